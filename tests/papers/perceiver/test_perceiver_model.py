"""Perceiver model: weight-sharing schemes (formula, same tensors), permutation invariance, adapters, decoders."""

import pytest
import torch

from paperzoo.papers.perceiver.adapters import AudioAdapter, BytesAdapter, PatchAdapter, PixelAdapter
from paperzoo.papers.perceiver.model import (
    Perceiver,
    PerceiverConfig,
    PerceiverEncoder,
    PerceiverLayer,
    block_plan,
    encoder_param_count,
)

SMALL = dict(num_latents=8, latent_dim=32, self_heads=4, self_per_block=2, num_bands=4)


def _n(m):
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("scheme,share,blocks", [("paper", True, 1), ("paper", True, 4), ("paper", False, 3),
                                                 ("io", True, 1), ("io", True, 5)])
@pytest.mark.parametrize("widths", [dict(), dict(cross_qk_dim=16, cross_v_dim=24, self_qk_dim=16, self_v_dim=8,
                                                 cross_widening=2, self_widening=4, cross_heads=2)])
def test_param_count_equals_formula(scheme, share, blocks, widths):
    cfg = PerceiverConfig(input="features", input_shape=(20,), input_dim=12, position="none", output="none",
                          scheme=scheme, share_weights=share, num_blocks=blocks, **{**SMALL, **widths})
    enc = PerceiverEncoder(cfg, 12)
    assert _n(enc) == encoder_param_count(cfg, 12)
    # the formula, spelled out for one case: paper scheme with sharing has 2 distinct (cross, latent) sets
    if scheme == "paper" and share and blocks == 4:
        one_cross, one_latent = _n(enc.cross[0]), _n(enc.latent[0])
        assert _n(enc) == 8 * 32 + 2 * one_cross + 2 * one_latent


def test_paper_scheme_shares_everything_after_the_first_block():
    cfg = PerceiverConfig(input="features", input_shape=(20,), input_dim=12, position="none", output="none",
                          scheme="paper", num_blocks=4, **SMALL)
    enc = PerceiverEncoder(cfg, 12)
    assert enc.plan == [(0, 0), (1, 1), (1, 1), (1, 1)]
    layers = enc.layers()  # execution order: [cross, self, self] x 4
    assert len(layers) == 12
    for b in (2, 3):  # repeats 2 and 3 use the very tensors of repeat 1
        for i in range(3):
            assert layers[3 * b + i] is layers[3 + i]
            assert layers[3 * b + i].attn.out.weight.data_ptr() == layers[3 + i].attn.out.weight.data_ptr()
    for i in range(3):  # the first cross-attend and its latent block are not shared
        assert layers[i].attn.out.weight.data_ptr() != layers[3 + i].attn.out.weight.data_ptr()
    assert layers[0].is_cross and layers[3].is_cross and not layers[1].is_cross


def test_io_scheme_one_cross_attend_then_shared_latent_blocks():
    cfg = PerceiverConfig(input="features", input_shape=(20,), input_dim=12, position="none", output="none",
                          scheme="io", num_blocks=3, **SMALL)
    enc = PerceiverEncoder(cfg, 12)
    layers = enc.layers()
    assert [la.is_cross for la in layers] == [True] + [False] * 6
    assert len(enc.cross) == 1 and len(enc.latent) == 1
    assert layers[1] is layers[3] is layers[5] and layers[2] is layers[4] is layers[6]


def test_no_sharing_every_block_its_own_weights():
    assert block_plan("paper", 3, 2, share_weights=False) == [(0, 0), (1, 1), (2, 2)]
    with pytest.raises(ValueError, match="scheme"):
        block_plan("lucid", 3, 2)
    with pytest.raises(ValueError, match="share_weights=False"):
        PerceiverConfig(scheme="io", share_weights=False)


def test_sharing_makes_repeats_iterative():
    """With sharing, repeating the shared block changes the output but not the parameters (an RNN in depth)."""
    kw = dict(input="features", input_shape=(20,), input_dim=12, position="none", output="none", **SMALL)
    torch.manual_seed(0)
    m3 = Perceiver(PerceiverConfig(num_blocks=3, **kw))
    m5 = Perceiver(PerceiverConfig(num_blocks=5, **kw))
    assert _n(m3) == _n(m5)
    m5.load_state_dict(m3.state_dict())
    x = torch.randn(2, 20, 12)
    assert not torch.allclose(m3(x).last_hidden_state, m5(x).last_hidden_state)


def test_cross_attention_is_permutation_invariant_without_positions():
    torch.manual_seed(0)
    layer = PerceiverLayer(32, 1, kv_dim=12, qk_dim=16, v_dim=24, widening=2).eval()
    z, x = torch.randn(2, 8, 32), torch.randn(2, 50, 12)
    mask = torch.ones(2, 50, dtype=torch.bool)
    mask[1, 30:] = False
    perm = torch.randperm(50)
    a = layer(z, x, mask)
    b = layer(z, x[:, perm], mask[:, perm])
    assert (a - b).abs().max() < 1e-5
    # the whole model too, on raw features
    cfg = PerceiverConfig(input="features", input_shape=(50,), input_dim=12, position="none", output="mean",
                          num_blocks=2, **SMALL)
    m = Perceiver(cfg).eval()
    assert (m(x, attention_mask=mask).logits - m(x[:, perm], attention_mask=mask[:, perm]).logits).abs().max() < 1e-5


def test_positions_break_permutation_invariance():
    torch.manual_seed(0)
    m = Perceiver(PerceiverConfig.image(size=8, channels=1, output="mean", **SMALL)).eval()
    img = torch.randn(2, 1, 8, 8)
    shuffled = img.flatten(2)[..., torch.randperm(64)].reshape(2, 1, 8, 8)
    assert (m(img).logits - m(shuffled).logits).abs().max() > 1e-4


def test_padding_is_ignored():
    torch.manual_seed(0)
    cfg = PerceiverConfig(input="bytes", input_shape=(16,), position="learned", byte_dim=24, output="none",
                          scheme="io", **SMALL)
    m = Perceiver(cfg).eval()
    ids = torch.randint(0, 262, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.long)
    mask[:, 10:] = 0
    other = ids.clone()
    other[:, 10:] = 7
    assert torch.allclose(m(ids, attention_mask=mask).last_hidden_state,
                          m(other, attention_mask=mask).last_hidden_state, atol=1e-6)


def test_adapters_shapes_and_channels():
    px = PixelAdapter((3, 8, 6), position="fourier", num_bands=5)
    x, raw = px(torch.randn(2, 3, 8, 6))
    assert x.shape == (2, 48, 3 + 2 * (2 * 5 + 1)) and raw.shape == (2, 48, 3)
    assert torch.equal(x[:, 7, :3], raw[:, 7])
    pa = PatchAdapter((3, 8, 8), 4, position="learned", learned_dim=10)
    x, raw = pa(torch.randn(2, 3, 8, 8))
    assert x.shape == (2, 4, 48 + 10)
    au = AudioAdapter(64, patch_size=4, position="fourier", num_bands=3)
    w = torch.arange(64.0)[None]
    x, raw = au(w)
    assert x.shape == (1, 16, 4 + 1 + 2 * 3) and torch.equal(raw[0, 1], torch.tensor([4.0, 5, 6, 7]))
    by = BytesAdapter(262, 16, 32, position="fourier", num_bands=4)
    assert by(torch.randint(0, 262, (2, 20)))[0].shape == (2, 20, 16 + 9)
    with pytest.raises(ValueError, match=r"\(batch, 3, 8, 6\)"):
        px(torch.randn(2, 8, 6, 3))
    with pytest.raises(ValueError, match="float waveform"):
        au(torch.zeros(1, 64, dtype=torch.long))
    with pytest.raises(ValueError, match="seq <= 32"):
        by(torch.zeros(1, 33, dtype=torch.long))
    with pytest.raises(ValueError, match="divisible by patch_size"):
        PatchAdapter((3, 8, 8), 3)


@pytest.mark.parametrize("output,extra,shape", [
    ("mean", {}, (2, 10)),
    ("classify", {}, (2, 10)),
    ("per_position", dict(queries="learned", num_outputs=7, out_dim=5), (2, 7, 5)),
    ("per_position", dict(queries="fourier", output_shape=(4, 4), out_dim=3, query_dim=20), (2, 16, 3)),
    ("per_position", dict(queries="input", out_dim=3), (2, 16, 3)),
    ("none", {}, None),
])
def test_decoders(output, extra, shape):
    torch.manual_seed(0)
    cfg = PerceiverConfig(input="pixels", input_shape=(1, 4, 4), output=output, **SMALL, **extra)
    out = Perceiver(cfg)(torch.randn(2, 1, 4, 4))
    assert out.last_hidden_state.shape == (2, 8, 32)
    assert (out.logits is None) if shape is None else out.logits.shape == shape


def test_subsampled_output_points_equal_the_full_decode_rows():
    torch.manual_seed(0)
    for q in ("learned", "fourier", "input"):
        cfg = PerceiverConfig(input="pixels", input_shape=(1, 4, 4), output="per_position", queries=q,
                              num_outputs=16, output_shape=(4, 4), out_dim=3, **SMALL)
        m = Perceiver(cfg).eval()
        img = torch.randn(2, 1, 4, 4)
        idx = torch.tensor([3, 0, 11])
        full, sub = m(img).logits, m(img, output_index=idx).logits
        assert sub.shape == (2, 3, 3) and (full[:, idx] - sub).abs().max() < 1e-6


def test_mlm_loss_with_subsampled_targets_and_validation():
    torch.manual_seed(0)
    cfg = PerceiverConfig.hf_mlm(max_len=16, byte_dim=24, num_latents=8, latent_dim=32, self_per_block=1)
    m = Perceiver(cfg)
    ids = torch.randint(0, 262, (2, 16))
    out = m(ids, labels=ids, output_index=torch.tensor([1, 5]))
    assert out.logits.shape == (2, 2, 262) and out.loss.ndim == 0
    out.loss.backward()
    assert m.adapter.embed.weight.grad is not None  # tied logits reach the input embedding
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        m(ids, attention_mask=torch.ones(2, 15))
    with pytest.raises(ValueError, match="output='mlm' needs input='bytes'"):
        PerceiverConfig(output="mlm", num_outputs=4)
    with pytest.raises(ValueError, match="scheme must be one of"):
        PerceiverConfig(scheme="rnn")
    with pytest.raises(ValueError, match="num_latents must be a positive int"):
        PerceiverConfig(num_latents=0)


def test_decode_labelled_only_gives_the_same_loss_and_gradients():
    torch.manual_seed(0)
    cfg = PerceiverConfig.hf_mlm(max_len=32, byte_dim=24, num_latents=8, latent_dim=32, self_per_block=1)
    m = Perceiver(cfg)
    ids = torch.randint(0, 262, (3, 32))
    labels = torch.full_like(ids, -100)
    labels[0, [2, 9, 30]] = ids[0, [2, 9, 30]]
    labels[2, [0, 5]] = ids[2, [0, 5]]  # sample 1 has no target at all
    full = m(ids, labels=labels)
    full.loss.backward()
    g_full = m.encoder.latents.grad.clone()
    m.zero_grad()
    sparse = m(ids, labels=labels, decode_labelled_only=True)
    sparse.loss.backward()
    assert sparse.logits.shape == (3, 3, 262) and sparse.output_index.shape == (3, 3)
    assert abs(full.loss.item() - sparse.loss.item()) < 1e-6
    assert (g_full - m.encoder.latents.grad).abs().max() < 1e-6
    assert torch.equal(sparse.output_index[0], torch.tensor([2, 9, 30]))
    assert (full.logits[0, [2, 9, 30]] - sparse.logits[0]).abs().max() < 1e-5


def test_mlm_on_a_shorter_input_decodes_the_input_length():
    """A sequence shorter than max_len decodes its own length: logits (batch, L, vocab) and labels (batch, L) give
    a loss; the rows equal the first L rows of the same bytes padded to max_len with the padding masked."""
    torch.manual_seed(0)
    cfg = PerceiverConfig.hf_mlm(max_len=16, byte_dim=24, num_latents=8, latent_dim=32, self_per_block=1)
    m = Perceiver(cfg).eval()
    ids = torch.randint(0, 262, (2, 10))
    labels = ids.clone()
    labels[:, ::3] = -100
    short = m(ids, labels=labels)
    assert short.logits.shape == (2, 10, 262) and short.loss.ndim == 0
    padded = torch.cat([ids, torch.zeros(2, 6, dtype=ids.dtype)], 1)
    mask = torch.cat([torch.ones(2, 10), torch.zeros(2, 6)], 1).long()
    full = m(padded, attention_mask=mask, labels=torch.cat([labels, torch.full((2, 6), -100)], 1))
    assert full.logits.shape == (2, 16, 262)
    assert (full.logits[:, :10] - short.logits).abs().max() < 1e-5
    assert abs(full.loss.item() - short.loss.item()) < 1e-5
    # full length is unchanged: every position decoded
    assert m(padded).logits.shape == (2, 16, 262)


def test_byte_ids_outside_the_vocabulary_raise():
    by = BytesAdapter(vocab_size=262, dim=16, max_len=20)
    with pytest.raises(ValueError, match=r"vocab_size=262.*max 262"):
        by(torch.tensor([[1, 262]]))
    with pytest.raises(ValueError, match=r"vocab_size=262.*min -1"):
        by(torch.tensor([[-1, 3]]))
    cfg = PerceiverConfig.hf_mlm(max_len=16, byte_dim=24, num_latents=8, latent_dim=32, self_per_block=1)
    with pytest.raises(ValueError, match="vocab_size=262"):
        Perceiver(cfg)(torch.tensor([[5, 300]]))
