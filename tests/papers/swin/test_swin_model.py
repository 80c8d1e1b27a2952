"""Swin: shifted windows equal masked global attention, padding is invisible, any size, presets and counts."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange

from paperzoo.papers.swin.model import (
    MaskCache,
    SwinBlock,
    SwinConfig,
    SwinForImageClassification,
    SwinModel,
    interpolate_bias_table,
    relative_position_index,
    shift_window_mask,
    swin_flops,
    window_partition,
    window_reverse,
)


def _block(window: int, shift: int, dim: int = 16, heads: int = 2) -> SwinBlock:
    torch.manual_seed(0)
    cfg = SwinConfig(dim=dim, depths=(2,), num_heads=(heads,), window_size=window, drop_path_rate=0.0)
    block = SwinBlock(cfg, dim, heads, shift, 0.0).eval()
    with torch.no_grad():
        block.attn.relative_position_bias_table.normal_()
    return block


def _brute_force(block: SwinBlock, y: torch.Tensor) -> torch.Tensor:
    """Global attention over the h*w real tokens; a token sees another iff both fall in the same (shifted)
    window of the padded map, i.e. the same cell of a grid offset by (m - s) (paper Fig. 2), plus the bias."""
    b, h, w, c = y.shape
    m, s = block.window_and_shift(h, w)
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()
    off = (m - s) % m
    gy, gx = (ys + off) // m, (xs + off) // m
    same = (gy[:, None] == gy[None]) & (gx[:, None] == gx[None])
    big = block.attn.window_size
    idx = (ys[:, None] - ys[None] + big - 1) * (2 * big - 1) + (xs[:, None] - xs[None] + big - 1)
    bias = block.attn.relative_position_bias_table[idx.clamp(0, (2 * big - 1) ** 2 - 1)]  # (L, L, heads)
    mask = torch.where(same[..., None], bias, torch.tensor(float("-inf"))).permute(2, 0, 1)
    q, k, v = rearrange(block.attn.qkv(y.reshape(b, h * w, c)), "b l (t h d) -> t b h l d", t=3,
                        h=block.attn.num_heads)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return block.attn.proj(rearrange(o, "b h l d -> b l (h d)")).reshape(b, h, w, c)


@pytest.mark.parametrize("size", [(8, 8), (12, 8), (10, 7), (13, 9), (5, 11), (4, 9), (3, 3)])
@pytest.mark.parametrize("shift", [0, 2])
def test_shifted_window_attention_equals_masked_global_attention(size, shift):
    block = _block(window=4, shift=shift)
    y = torch.randn(2, *size, 16)
    with torch.no_grad():
        ours = block.attention(y, MaskCache(mask_padding=True))
        ref = _brute_force(block, y)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_unmasked_padding_differs_from_global_attention():
    """HF/official behaviour (mask_padding=False) lets real tokens attend to zero padding."""
    block = _block(window=4, shift=2)
    y = torch.randn(1, 10, 7, 16)
    with torch.no_grad():
        hf_like = block.attention(y, MaskCache(mask_padding=False))
    assert (hf_like - _brute_force(block, y)).abs().max() > 1e-3


@pytest.mark.parametrize("size", [(8, 8), (12, 4), (9, 13)])
def test_shift_round_trip_is_identity(size):
    x = torch.randn(2, *size, 3)
    m, s = 4, 2
    hp, wp = math.ceil(size[0] / m) * m, math.ceil(size[1] / m) * m
    padded = F.pad(x, (0, 0, 0, wp - size[1], 0, hp - size[0]))
    windows = window_partition(torch.roll(padded, (-s, -s), (1, 2)), m)
    assert windows.shape == (2, (hp // m) * (wp // m), m * m, 3)
    back = torch.roll(window_reverse(windows, m, hp, wp), (s, s), (1, 2))[:, :size[0], :size[1]]
    assert torch.equal(back, x)


@pytest.mark.parametrize("shift", [0, 2])
def test_padded_tokens_do_not_change_real_outputs(shift):
    """Any values at padded positions leave every real output unchanged, and no row is fully masked."""
    block = _block(window=4, shift=shift)
    h, w, m = 6, 7, 4
    mask = shift_window_mask(h, w, m, shift, mask_padding=True)
    assert torch.isfinite(mask).any(-1).all()
    y = F.pad(torch.randn(2, h, w, 16), (0, 0, 0, 1, 0, 2))
    noisy = y.clone()
    noisy[:, h:], noisy[:, :, w:] = 100 * torch.randn_like(noisy[:, h:]), 100 * torch.randn_like(noisy[:, :, w:])
    outs = []
    with torch.no_grad():
        for t in (y, noisy):
            t = torch.roll(t, (-shift, -shift), (1, 2))
            o = window_reverse(block.attn(window_partition(t, m), mask), m, 8, 8)
            outs.append(torch.roll(o, (shift, shift), (1, 2))[:, :h, :w])
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)


def test_swin_t_parameter_count_and_flops():
    with torch.device("meta"):
        model = SwinForImageClassification(SwinConfig.preset("swin-t"))
    assert sum(p.numel() for p in model.parameters()) == 28_288_354
    gflops = swin_flops(model.config, 224, 224) / 1e9
    assert abs(gflops - 4.5) < 0.05  # paper Table 1: 4.5G


def test_presets_sizes():
    with torch.device("meta"):
        n = {k: sum(p.numel() for p in SwinForImageClassification(SwinConfig.preset(k)).parameters()) / 1e6
             for k in ("swin-s", "swin-b")}
    assert abs(n["swin-s"] - 50) < 0.5 and abs(n["swin-b"] - 88) < 0.5  # paper Table 1: 50M, 88M


@pytest.mark.parametrize("size", [(62, 45), (32, 32), (33, 100)])  # from the total stride 32 up
def test_any_input_size_and_backbone_strides(size):
    torch.manual_seed(0)
    cfg = SwinConfig.preset("tiny", patch_size=4, depths=(2, 2, 2, 2), num_heads=(2, 2, 4, 4))
    model = SwinModel(cfg).eval()
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        feats = model.features(x)
        out = model(pixel_values=x)
    h, w = math.ceil(size[0] / 4), math.ceil(size[1] / 4)
    for i, f in enumerate(feats):
        assert f.shape == (1, 32 * 2**i, h, w)
        h, w = math.ceil(h / 2), math.ceil(w / 2)
    assert out.last_hidden_state.shape == (1, feats[-1].shape[2] * feats[-1].shape[3], 256)
    assert torch.isfinite(out.last_hidden_state).all()


def test_window_shrinks_and_shift_drops_on_small_maps():
    block = _block(window=7, shift=3)
    assert block.window_and_shift(7, 9) == (7, 0)
    assert block.window_and_shift(4, 9) == (4, 0)
    assert block.window_and_shift(8, 9) == (7, 3)
    # the shrunken window reads the centre of the big table
    idx = relative_position_index(4, 7)
    assert idx.min() >= 0 and idx.max() < 13 * 13 and idx[0, 0] == 6 * 13 + 6


def test_masks_cached_and_model_is_stateless():
    torch.manual_seed(0)
    model = SwinModel(SwinConfig.preset("tiny")).eval()
    a, b = torch.randn(1, 3, 40, 44), torch.randn(1, 3, 12, 10)
    with torch.no_grad():
        ref = model(a).last_hidden_state
        n = len(model.masks)
        model(a)
        assert len(model.masks) == n  # reused, not rebuilt
        model(b)  # a small input shrinks windows for that call only (HF keeps the shrunken state)
        torch.testing.assert_close(model(a).last_hidden_state, ref)


def _keys_cubic(x: float, a: float = -0.75) -> float:
    """Keys' cubic convolution kernel with torch's (and OpenCV's) a = -0.75, written out by hand."""
    x = abs(x)
    if x <= 1:
        return (a + 2) * x**3 - (a + 3) * x**2 + 1
    if x < 2:
        return a * x**3 - 5 * a * x**2 + 8 * a * x - 4 * a
    return 0.0


def test_bias_table_interpolation_is_bicubic_as_the_official_code():
    """A unit impulse in the middle of a 13x13 table (window 7) resized to 23x23 (window 12) gives, away from the
    borders, the separable cubic kernel at the half-pixel source coordinates: negative lobes included, which
    bilinear, nearest or area resampling cannot produce."""
    side, new = 13, 23
    t = torch.zeros(side, side, 1)
    t[6, 6] = 1.0
    got = interpolate_bias_table(t.reshape(side * side, 1), 12).reshape(new, new)
    src = [(i + 0.5) * side / new - 0.5 for i in range(new)]  # align_corners=False
    want = torch.tensor([[_keys_cubic(si - 6) * _keys_cubic(sj - 6) for sj in src] for si in src])
    inner = slice(4, new - 4)  # the impulse's support stays clear of the clamped borders
    torch.testing.assert_close(got[inner, inner], want[inner, inner], atol=1e-6, rtol=0)
    assert got.min() < -0.01  # the cubic's negative lobe


def test_bias_table_interpolation():
    t = torch.randn(13 * 13, 3)
    assert torch.equal(interpolate_bias_table(t, 7), t)
    assert interpolate_bias_table(t, 12).shape == (23 * 23, 3)
    const = torch.ones(13 * 13, 2)
    torch.testing.assert_close(interpolate_bias_table(const, 12), torch.ones(23 * 23, 2))
    model = SwinModel(SwinConfig.preset("tiny", window_size=4))
    model.set_window_size(6)
    assert model.stages[0].blocks[0].attn.relative_position_bias_table.shape == (11 * 11, 2)
    assert model(torch.randn(1, 3, 48, 48)).last_hidden_state.shape == (1, 144, 64)
    with pytest.raises(ValueError, match="bias table"):
        interpolate_bias_table(torch.randn(13 * 13), 5)


def test_classification_loss_and_gradients_reach_bias_tables():
    torch.manual_seed(0)
    model = SwinForImageClassification(SwinConfig.preset("tiny", drop_path_rate=0.1, ape=True))
    out = model(pixel_values=torch.randn(4, 3, 32, 32), labels=torch.tensor([0, 1, 2, 3]))
    assert out.logits.shape == (4, 10)
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert model.swin.stages[0].blocks[1].attn.relative_position_bias_table.grad.abs().sum() > 0


def test_stochastic_depth_only_in_training():
    torch.manual_seed(0)
    model = SwinModel(SwinConfig.preset("tiny", drop_path_rate=0.5))
    x = torch.randn(8, 3, 32, 32)
    model.train()
    a, b = model(x).last_hidden_state, model(x).last_hidden_state
    assert not torch.allclose(a, b)
    model.eval()
    torch.testing.assert_close(model(x).last_hidden_state, model(x).last_hidden_state)


def test_input_validation():
    model = SwinModel(SwinConfig.preset("tiny"))
    with pytest.raises(ValueError, match="4-D"):
        model(torch.randn(3, 32, 32))
    with pytest.raises(ValueError, match="3 channels"):
        model(torch.randn(1, 1, 32, 32))
    with pytest.raises(ValueError, match="floating"):
        model(torch.zeros(1, 3, 32, 32, dtype=torch.uint8))
    with pytest.raises(ValueError, match="divisible"):
        SwinConfig(dim=30, num_heads=(4, 8, 16, 32))
    with pytest.raises(ValueError, match="preset"):
        SwinConfig.preset("huge")
    clf = SwinForImageClassification(SwinConfig.preset("tiny"))
    with pytest.raises(ValueError, match="labels"):
        clf(torch.randn(2, 3, 32, 32), labels=torch.zeros(3, dtype=torch.long))


def test_a_stage_is_patch_merging_then_its_blocks():
    torch.manual_seed(0)
    model = SwinModel(SwinConfig.preset("tiny")).eval()
    first, second = model.stages
    assert first.patch_merging is None and second.patch_merging is not None
    x = torch.randn(2, 16, 16, 32)
    with torch.no_grad():
        y = second.patch_merging(x)  # (2, 8, 8, 64)
        for block in second.blocks:
            y = block(y, model.masks)
        torch.testing.assert_close(second(x, model.masks), y)
        assert y.shape == (2, 8, 8, 64)
        x = torch.randn(1, 3, 32, 32)
        out = model(x, output_hidden_states=True)
        features = model.features(x)
    assert [tuple(h.shape) for h in out.hidden_states] == [(1, 256, 32), (1, 256, 32), (1, 64, 64)]
    assert [tuple(h.shape) for h in out.reshaped_hidden_states] == [(1, 32, 16, 16), (1, 32, 16, 16), (1, 64, 8, 8)]
    for tokens, grid in zip(out.hidden_states, out.reshaped_hidden_states, strict=True):
        assert torch.equal(tokens, grid.flatten(2).transpose(1, 2))
    # features() and the hidden states agree on layout and values (NCHW maps)
    assert all(torch.equal(f, h) for f, h in zip(features, out.reshaped_hidden_states[1:], strict=True))


def test_input_dtype_must_be_the_models():
    model = SwinForImageClassification(SwinConfig.preset("tiny")).eval()
    x = torch.randn(1, 3, 32, 32)
    with pytest.raises(ValueError, match=r"torch\.float32.*got torch\.float64"):
        model(x.double())
    assert model.double()(x.double()).logits.dtype == torch.float64
    model.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(x.bfloat16()).logits.shape == (1, 10)


@pytest.mark.parametrize(("overrides", "stride"), [(dict(), 4), (dict(patch_size=4, depths=(2, 2, 2, 2),
                                                                      num_heads=(2, 2, 4, 4)), 32)])
def test_images_smaller_than_the_total_stride_raise(overrides, stride):
    """The smallest image is patch_size * 2^(stages - 1): one token of the last stage made of real pixels. Below
    it, patch mergings concatenate zero padding (and the window has already shrunk to the 1x1 map)."""
    model = SwinModel(SwinConfig.preset("tiny", **overrides)).eval()
    for h, w in ((1, 1), (2, 2), (stride - 1, stride), (stride, stride - 1)):
        with pytest.raises(ValueError, match=rf"at least {stride}x{stride}.*patch_size.*got {h}x{w}"):
            model(torch.randn(1, 3, h, w))
    with torch.no_grad():
        assert model(torch.randn(1, 3, stride, stride)).last_hidden_state.shape[1] == 1
