"""VATT's mechanism: tokenisers, factorised positions and their interpolation, [AGG], DropToken, the backbones."""

import dataclasses

import pytest
import torch

from paperzoo.papers.vatt import (
    VATT,
    DropToken,
    FactorizedPositions,
    VATTConfig,
    VoxelTokenizer,
    WaveformTokenizer,
    interpolate_table,
)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread."""


def _quiet(cfg: VATTConfig, **kw) -> VATTConfig:
    """The config with every dropout off (so train and eval differ only by DropToken)."""
    off = {"dropout": 0.0}
    return dataclasses.replace(cfg, pos_dropout=0.0, video=dataclasses.replace(cfg.video, **off),
                               audio=dataclasses.replace(cfg.audio, **off), text=dataclasses.replace(cfg.text, **off),
                               shared=dataclasses.replace(cfg.shared, **off), **kw)


# ----------------------------------------------------------------------------------------------------- tokenisers
def test_tokenisers_are_their_strided_convolutions():
    v = VoxelTokenizer(3, 8, (2, 4, 4))
    x = torch.randn(2, 3, 6, 12, 16)
    tokens, grid = v(x)
    assert grid == (3, 3, 4) and tokens.shape == (2, 36, 8)
    assert torch.allclose(tokens, v.proj(x).flatten(2).transpose(1, 2), atol=1e-5)
    w = WaveformTokenizer(8, 16)
    a = torch.randn(2, 100)  # 6 windows of 16, 4 samples dropped as by the convolution
    tokens, grid = w(a)
    assert grid == (6,) and torch.allclose(tokens, w.proj(a[:, None]).transpose(1, 2), atol=1e-5)


def test_paper_token_counts():
    cfg = VATTConfig.preset("mbs")
    assert cfg.video_grid == (8, 14, 14) and cfg.audio_tokens == 1200  # 1568 voxels, 153600 / 128 waveform tokens


# ----------------------------------------------------------------------------------------------------- positions
def test_factorised_encoding_is_the_sum_of_the_three_tables_after_layernorm():
    pos = FactorizedPositions((2, 3, 4), 6, dropout=0.0).eval()
    t, h, w = (tb.detach() for tb in pos.pe.tables)
    brute = torch.stack([t[i] + h[j] + w[k] for i in range(2) for j in range(3) for k in range(4)])
    assert torch.allclose(pos.encoding(), brute, atol=1e-6)
    x = torch.randn(5, 24, 6)
    assert torch.allclose(pos(x), x + torch.nn.functional.layer_norm(brute, (6,), pos.norm.weight, pos.norm.bias,
                                                                     pos.norm.eps), atol=1e-6)
    with pytest.raises(ValueError, match="grid must have 3"):
        pos.encoding((2, 3))


@pytest.mark.parametrize("n", [1, 3, 7, 20])
def test_interpolation_keeps_a_constant_table_constant_and_a_linear_one_linear(n):
    const = torch.full((5, 4), 0.7)
    assert torch.allclose(interpolate_table(const, n), torch.full((n, 4), 0.7), atol=1e-6)
    lin = torch.linspace(-1, 3, 5)[:, None] * torch.tensor([1.0, -2.0, 0.5])  # rows on a line
    out = interpolate_table(lin, n)
    if n > 1:
        want = torch.linspace(-1, 3, n)[:, None] * torch.tensor([1.0, -2.0, 0.5])
        assert torch.allclose(out, want, atol=1e-5)
        assert torch.allclose(out[0], lin[0]) and torch.allclose(out[-1], lin[-1])


def test_a_new_grid_interpolates_every_axis_instead_of_cropping():
    pos = FactorizedPositions((4, 2, 2), 3, dropout=0.0)
    with torch.no_grad():
        pos.pe.tables[0].copy_(torch.arange(4.0)[:, None].expand(4, 3))  # temporal table linear in time
        pos.pe.tables[1].zero_()
        pos.pe.tables[2].zero_()
    enc = pos.encoding((7, 2, 2)).reshape(7, 2, 2, 3)
    assert torch.allclose(enc[:, 0, 0, 0], torch.linspace(0, 3, 7), atol=1e-6)  # spans the whole table: not a crop


# ----------------------------------------------------------------------------------------------------- [AGG]
def test_agg_token_carries_no_positional_encoding():
    model = VATT(VATTConfig.preset("tiny")).train()  # with dropout and DropToken active
    cfg = model.cfg
    x = VATT.example_inputs(cfg, 3)
    for stream, inp in ((model.video_in, x["video"]), (model.audio_in, x["audio"])):
        out = stream(inp)
        assert torch.equal(out[:, 0], stream.agg.token[0].expand(3, -1))  # the learned token itself, no position
        assert not torch.equal(out[:, 1], out[:, 2])  # the other tokens do carry positions
    assert model.text_agg.token.abs().sum() > 0  # initialised (glorot), not an empty tensor


# ----------------------------------------------------------------------------------------------------- DropToken
def _numbered(b: int, n: int) -> torch.Tensor:
    """(b, n, 2) tokens whose features are (position, sample)."""
    return torch.stack([torch.arange(n).expand(b, n), torch.arange(b)[:, None].expand(b, n)], -1).float()


def test_droptoken_keeps_the_same_positions_across_the_batch_by_default():
    torch.manual_seed(0)
    drop = DropToken(0.5, 16).train()
    out = drop(_numbered(4, 16))
    assert out.shape == (4, 8, 2)
    kept = out[..., 0]
    assert (kept == kept[:1]).all()  # one permutation for the whole batch
    assert (out[..., 1] == torch.arange(4.0)[:, None]).all()  # every sample keeps its own tokens
    assert len(set(kept[0].tolist())) == 8  # distinct positions
    assert not torch.equal(drop(_numbered(4, 16))[0, :, 0], kept[0])  # a fresh permutation per call


def test_per_sample_droptoken_draws_a_permutation_per_sample():
    torch.manual_seed(0)
    out = DropToken(0.25, 32, per_sample=True).train()(_numbered(6, 32))
    sets = {tuple(sorted(row.tolist())) for row in out[..., 0]}
    assert out.shape == (6, 8, 2) and len(sets) > 1
    assert (out[..., 1] == torch.arange(6.0)[:, None]).all()


def test_droptoken_count_follows_the_configured_maximum_and_eval_drops_nothing():
    drop = DropToken(0.5, 64).train()
    assert drop(torch.randn(2, 64, 3)).shape[1] == 32
    short = _numbered(2, 20)  # fewer tokens than int(0.5 * 64) = 32: all kept (permuted, as the official code)
    out = drop(short)
    assert out.shape == (2, 20, 2) and sorted(out[0, :, 0].tolist()) == list(range(20))
    x = torch.randn(2, 64, 3)
    assert torch.equal(drop.eval()(x), x)
    assert torch.equal(DropToken(1.0, 64).train()(x), x)
    with pytest.raises(ValueError, match="kept fraction"):
        DropToken(0.0, 64)


def test_model_drops_video_and_audio_tokens_never_text_and_only_in_training():
    cfg = _quiet(VATTConfig.preset("tiny"), keep_rate=0.25)
    model = VATT(cfg)
    x = VATT.example_inputs(cfg, 2)
    n_video, n_audio = 1 + int(0.25 * 64), 1 + int(0.25 * 64)
    assert model.video_in.train()(x["video"]).shape[1] == n_video
    assert model.audio_in.train()(x["audio"]).shape[1] == n_audio
    assert model.video_in.eval()(x["video"]).shape[1] == 65
    model.train()
    t_train = model.encode_text(x["text"])
    v_train = model.encode_video(x["video"])
    model.eval()
    assert torch.allclose(t_train, model.encode_text(x["text"]), atol=1e-6)  # text: nothing dropped in training
    assert not torch.allclose(v_train, model.encode_video(x["video"]), atol=1e-4)  # video: tokens dropped
    assert not any(isinstance(m, DropToken) for m in [model.text_in, model.text_pre])


def test_fewer_frames_than_the_maximum_are_not_dropped_and_use_interpolated_positions():
    cfg = _quiet(VATTConfig.preset("tiny"), keep_rate=0.5)  # max 64 voxels, keeps 32
    model = VATT(cfg).train()
    short = torch.rand(2, 1, 4, 16, 16) * 2 - 1  # grid (2, 2, 2) = 8 voxels
    assert model.video_in(short).shape[1] == 1 + 8


# ----------------------------------------------------------------------------------------------------- backbones
def test_specific_text_uses_t5_bias_and_shared_text_an_absolute_table():
    spec = VATT(VATTConfig.preset("tiny"))
    assert spec.backbones["text"].rel_bias is not None and spec.backbones["video"].rel_bias is None
    shared = VATT(VATTConfig.preset("tiny", backbone="shared"))
    assert shared.backbone.rel_bias is None and shared.text_in.pos.shape == (shared.cfg.text_len,)
    assert sum(p.numel() for p in shared.parameters()) < sum(p.numel() for p in spec.parameters())
    x = VATT.example_inputs(shared.cfg, 2)
    out = shared.eval()(**x)
    assert out.video.shape == (2, shared.cfg.post_dim) and out.text_vt.shape == (2, 2, shared.cfg.vt_dim)


def test_trailing_padding_does_not_change_text_features():
    for backbone in ("specific", "shared"):
        model = VATT(VATTConfig.preset("tiny", backbone=backbone)).eval()
        ids = torch.randint(2, model.cfg.vocab_size, (3, 5))
        padded = torch.nn.functional.pad(ids, (0, 6))
        assert torch.allclose(model.encode_text(ids), model.encode_text(padded), atol=1e-5)


def test_common_space_heads_have_the_paper_shapes():
    model = VATT(VATTConfig.preset("mbs", frames=4, size=32, audio_samples=256, vocab_size=100))
    h = model.heads
    kinds = [type(m).__name__ for m in h.video_to_va] + ["|"] + [type(m).__name__ for m in h.va_to_vt]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "|", "ReLU", "Linear", "BatchNorm1d"]
    assert h.video_to_va[0].out_features == 512 and h.va_to_vt[1].out_features == 256
    assert h.audio_to_va.out_features == 512 and h.text_to_vt.out_features == 256
    assert model.backbones["video"].cfg.dim == 1024 and model.backbones["audio"].cfg.dim == 768
    assert model.backbones["text"].cfg.dim == 512 and model.backbones["text"].cfg.position == "t5"


def test_bad_inputs_name_what_was_expected():
    model = VATT(VATTConfig.preset("tiny"))
    x = VATT.example_inputs(model.cfg, 2)
    with pytest.raises(ValueError, match="channels=1"):
        model(torch.rand(2, 3, 8, 32, 32), x["audio"], x["text"])
    with pytest.raises(ValueError, match="int64"):
        model(x["video"], x["audio"], x["text"].float())
    with pytest.raises(ValueError, match="vocab_size"):
        model(x["video"], x["audio"], x["text"] + 1000)
    with pytest.raises(ValueError, match="batch size"):
        model(x["video"], x["audio"][:1], x["text"])
    with pytest.raises(ValueError, match="multiple"):
        VATTConfig.preset("tiny", frames=7)
    with pytest.raises(ValueError, match="unknown VATT preset"):
        VATTConfig.preset("huge")
