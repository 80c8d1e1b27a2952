"""Funnel semantics: block layouts, pooled lengths, [CLS] never pooled, the two relative-attention formulations agree,
decoder output length, SDPA, input validation, registry."""

import math
from dataclasses import replace

import pytest
import torch

from paperzoo.papers.funnel.model import (
    AttentionInputs,
    FunnelBase,
    FunnelClassifier,
    FunnelConfig,
    FunnelModel,
    parse_blocks,
    pool_positions,
    pool_tensor,
    relative_position_bias,
    stride_pool,
    upsample,
)

FLAGS = [(s, t) for s in (True, False) for t in (True, False)]


def tiny(**over):
    return FunnelConfig.preset("tiny", **{"blocks": "1-1-1", **over})


def batch(cfg, b=2, t=13, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, cfg.vocab_size, (b, t), generator=g)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, t - 3:] = 0
    types = torch.randint(0, 2, (b, t), generator=g)
    types[:, 0] = 2
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def test_parse_blocks():
    assert parse_blocks("4-4-4") == ((4, 4, 4), (1, 1, 1))
    assert parse_blocks("6-3x2-3x2") == ((6, 3, 3), (1, 2, 2))
    for bad in ("", "4--4", "4-x2", "0-4", "4-4x0", "a"):
        with pytest.raises(ValueError, match="4-4-4"):
            parse_blocks(bad)
    with pytest.raises(ValueError, match="rel_shift"):
        FunnelConfig(attention_type="xl")


@pytest.mark.parametrize("sep,trunc", FLAGS)
def test_pooled_lengths_agree_for_odd_and_even(sep, trunc):
    for t in range(2, 21):
        expect = math.ceil((t + 1) / 2) if sep and not trunc else math.ceil(t / 2)
        x = torch.randn(2, t, 3)
        assert pool_tensor(x, "mean", sep, trunc).shape[1] == expect
        assert pool_tensor(x[..., 0], "min", sep, trunc).shape[1] == expect
        assert stride_pool(torch.arange(t), sep, trunc).shape[0] == expect
        assert len(pool_positions(list(range(t)), 2, sep, trunc)) == expect


@pytest.mark.parametrize("mode", ["mean", "max"])
@pytest.mark.parametrize("trunc", [True, False])
def test_cls_never_pooled(mode, trunc):
    x = torch.randn(3, 9, 4)
    out = pool_tensor(x, mode, True, trunc)
    assert torch.equal(out[:, 0], x[:, 0])
    pairs = x[:, 1:9 if not trunc else 7]
    ref = pairs.reshape(3, -1, 2, 4).mean(2) if mode == "mean" else pairs.reshape(3, -1, 2, 4).amax(2)
    assert torch.allclose(out[:, 1:1 + ref.shape[1]], ref)
    assert not torch.equal(pool_tensor(x, mode, False, trunc)[:, 0], x[:, 0])


def test_attention_mask_pooling_is_min():
    m = torch.tensor([[1, 1, 1, 1, 1, 0, 0]], dtype=torch.float)
    assert pool_tensor(m, "min", True, False).tolist() == [[1, 1, 1, 0]]  # [CLS], (1,2), (3,4), (5,6)
    assert pool_tensor(m, "min", False, False).tolist() == [[1, 1, 0, 0]]


def test_positions_stay_arithmetic():
    pos = list(range(10))
    p1 = pool_positions(pos, 2, True, True)
    assert p1 == [-1, 1, 3, 5, 7]
    assert pool_positions(p1, 4, True, True) == [-3, 1, 5]
    assert pool_positions(pos, 2, False, True) == [0, 2, 4, 6, 8]


@pytest.mark.parametrize("shift", [1, 2])
def test_rel_shift_equals_factorized_bias(shift):
    torch.manual_seed(0)
    qv, kern = torch.randn(2, 5, 3, 4), torch.randn(16, 3, 4)
    k_pos = list(range(3, 3 + 2 * 9, 2))  # stride 2, 9 keys
    q_pos = list(range(-1, -1 + 2 * shift * 5, 2 * shift))
    inp = AttentionInputs(q_pos, k_pos, 2 * shift, 2, torch.zeros(2, 5), torch.zeros(2, 9), torch.ones(2, 9))
    a = relative_position_bias(qv, kern, inp, "rel_shift")
    b = relative_position_bias(qv, kern, inp, "factorized")
    d = torch.tensor(q_pos)[:, None] - torch.tensor(k_pos)[None]  # direct: r(p_i - p_j)
    inv = 1.0 / (10000 ** (torch.arange(8) / 8))
    r = torch.cat([(d[..., None] * inv).sin(), (d[..., None] * inv).cos()], -1)
    direct = torch.einsum("binh,dnh,ijd->bnij", qv, kern, r)
    assert torch.allclose(a, direct, atol=1e-4) and torch.allclose(b, direct, atol=1e-4)


@pytest.mark.parametrize("sep,pool_q_only", [(True, True), (False, True), (True, False), (False, False)])
def test_two_formulations_agree_end_to_end(sep, pool_q_only):
    cfg = tiny(separate_cls=sep, pool_q_only=pool_q_only)
    torch.manual_seed(0)
    a = FunnelModel(cfg).eval()
    b = FunnelModel(replace(cfg, attention_type="factorized")).eval()
    b.load_state_dict(a.state_dict())
    for t in (12, 13):
        x = batch(cfg, t=t)
        with torch.no_grad():
            ya, yb = a(**x).last_hidden_state, b(**x).last_hidden_state
        assert (ya - yb).abs().max() < 1e-5


@pytest.mark.parametrize("sep,trunc", FLAGS)
def test_decoder_output_length_equals_input_length(sep, trunc):
    cfg = tiny(separate_cls=sep, truncate_seq=trunc)
    model = FunnelModel(cfg).eval()
    base = FunnelBase(cfg).eval()
    for t in (3, 8, 9, 16, 17):
        x = batch(cfg, t=t)
        assert model(**x).last_hidden_state.shape == (2, t, cfg.dim)
        assert base(**x).last_hidden_state.shape[1] < t


def test_upsample_repeats_and_keeps_cls():
    x = torch.arange(4.0).view(1, 4, 1)  # [CLS], a, b, c
    assert upsample(x, 2, 7, True, True)[0, :, 0].tolist() == [0, 1, 1, 2, 2, 3, 3]
    assert upsample(x, 2, 7, False, False)[0, :, 0].tolist() == [0, 0, 1, 1, 2, 2, 3]


def test_shared_repeats_and_hidden_states():
    cfg = tiny(blocks="1-2x2")
    model = FunnelModel(cfg)
    assert sum(1 for _ in model.encoder.blocks[1]) == 2
    out = FunnelBase(cfg)(**batch(cfg), output_hidden_states=True)
    assert len(out.hidden_states) == 1 + 1 + 2 * 2  # embeddings, block 1, block 2 with each layer applied twice


def test_attention_goes_through_sdpa(monkeypatch):
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(*a, **k):
        calls.append(k["attn_mask"].shape)
        return real(*a, **k)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    cfg = tiny()
    FunnelModel(cfg)(**batch(cfg, t=9))
    assert calls[0] == (2, cfg.num_heads, 9, 9) and calls[1] == (2, cfg.num_heads, 5, 9)  # pooled queries, full keys
    assert len(calls) == 3 + cfg.num_decoder_layers


def test_classifier_learns_and_validates():
    cfg = tiny(dropout=0.0, attn_dropout=0.0)
    torch.manual_seed(0)
    model = FunnelClassifier(cfg)
    x = batch(cfg, b=8, t=9)
    labels = (x["input_ids"][:, 1] % 2).long()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = model(**x, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        model(input_ids=x["input_ids"].float())
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        model(input_ids=x["input_ids"], attention_mask=x["attention_mask"][:, :3])
    with pytest.raises(ValueError, match="labels"):
        model(**x, labels=labels[:3])


def test_registered():
    from paperzoo.registry import get

    paper = get("funnel")
    assert paper.arxiv == "2006.03236" and "FunnelModel" in paper.models


def test_presets():
    assert FunnelConfig.preset("base").block_sizes == (6, 6, 6)
    assert FunnelConfig.preset("large", blocks="8-8-8").dim == 1024
    with pytest.raises(ValueError, match="tiny"):
        FunnelConfig.preset("huge")


@pytest.mark.parametrize("sep", [True, False])
@pytest.mark.parametrize("attention_type", ["rel_shift", "factorized"])
@pytest.mark.parametrize("shift", [1, 2])
def test_fused_attention_bias_equals_the_reference_formulation(sep, attention_type, shift):
    """The fused bias (one baddbmm on a strided view) == the equations written pair by pair, values and grads."""
    cfg = tiny(separate_cls=sep, attention_type=attention_type)
    torch.manual_seed(0)
    att = FunnelModel(cfg).encoder.blocks[0][0].attention
    n_q, n_k = 6, 11
    q_pos = list(range(-1, -1 + shift * n_q, shift))
    k_pos = list(range(0, n_k))
    q_types = torch.tensor([[2, 0, 0, 1, 1, 1], [2, 1, 0, 2, 0, 1]])
    k_types = torch.randint(0, 3, (2, n_k), generator=torch.Generator().manual_seed(1))
    k_mask = torch.ones(2, n_k)
    k_mask[1, 8:] = 0
    inputs = AttentionInputs(q_pos, k_pos, shift, 1, q_types, k_types, k_mask)
    q = torch.randn(2, n_q, cfg.num_heads, cfg.head_dim, requires_grad=True)
    got, want = att.bias(q, inputs), att.reference_bias(q, inputs)
    assert got.shape == (2, cfg.num_heads, n_q, n_k)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    g = torch.randn(got.shape)
    params = [q, att.r_kernel, att.seg_embed, att.r_s_bias, att.r_r_bias]
    ga = torch.autograd.grad((got * g).sum(), params)
    gb = torch.autograd.grad((want * g).sum(), params)
    for a, b in zip(ga, gb, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_reference_bias_reads_the_equations():
    """One entry of the reference, computed by hand from the paper's formula."""
    cfg = tiny(separate_cls=False)
    torch.manual_seed(0)
    att = FunnelModel(cfg).encoder.blocks[0][0].attention
    q = torch.randn(1, 3, cfg.num_heads, cfg.head_dim)
    inputs = AttentionInputs([0, 1, 2], [0, 1, 2, 3], 1, 1, torch.tensor([[0, 0, 1]]), torch.tensor([[0, 1, 1, 2]]),
                             torch.tensor([[1.0, 1.0, 1.0, 0.0]]))
    bias = att.reference_bias(q, inputs)
    i, j, n = 2, 0, 1  # query type 1, key type 0: different segments; distance 2
    w = 1.0 / (10000 ** (torch.arange(cfg.dim // 2) / (cfg.dim // 2)))
    r = torch.cat([(2 * w).sin(), (2 * w).cos()])
    want = ((q[0, i, n] + att.r_r_bias[n]) @ (r @ att.r_kernel[:, n])
            + (q[0, i, n] + att.r_s_bias[n]) @ att.seg_embed[0, n]) / math.sqrt(cfg.head_dim)
    torch.testing.assert_close(bias[0, n, i, j], want)
    assert bias[0, n, i, 3] < -1e5  # padded key


def test_token_types_must_be_0_1_or_2():
    cfg = tiny()
    x = batch(cfg)
    x["token_type_ids"][0, 3] = 3
    with pytest.raises(ValueError, match="token_type_ids must be 0, 1 or 2"):
        FunnelModel(cfg)(**x)
