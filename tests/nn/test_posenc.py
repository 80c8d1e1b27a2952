"""Property tests for paperzoo.nn.posenc; each reference below is written from the papers' formulas, not our code."""

import math

import pytest
import torch

from paperzoo.nn.posenc import (
    ALiBi,
    FactorizedPositionalEmbedding,
    FourierPositionEncoding,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativePositionBias,
    alibi_slopes,
    fourier_features,
    fourier_position_grid,
    rotary_permutation,
    sinusoidal_table,
)

# ------------------------------------------------------------------------------------------------------ sinusoidal


@pytest.mark.parametrize("dim,base", [(8, 10000.0), (64, 10000.0), (6, 100.0)])
@pytest.mark.parametrize("interleaved", [False, True])
def test_sinusoid_matches_formula(dim, base, interleaved):
    table = sinusoidal_table(5000, dim, base=base, interleaved=interleaved)
    assert table.shape == (5000, dim) and table.dtype == torch.float32
    for pos in (0, 1, 2, 17, 511, 4999):
        for i in range(dim // 2):
            angle = pos / base ** (2 * i / dim)
            si, ci = (2 * i, 2 * i + 1) if interleaved else (i, dim // 2 + i)
            s, c = table[pos, si], table[pos, ci]
            assert s.item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert c.item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoid_module_offsets_and_growth():
    pe = SinusoidalPositionalEncoding(16, max_len=8, interleaved=True)
    ref = sinusoidal_table(100, 16, interleaved=True)
    assert torch.equal(pe(5), ref[:5])
    assert torch.equal(pe(30, offset=60), ref[60:90])  # beyond max_len: grows
    assert torch.equal(pe(4, offset=2), ref[2:6])
    assert pe.state_dict() == {}  # fixed, not a parameter or a persistent buffer
    assert pe.half()(3, offset=200).dtype == torch.float16  # growth keeps a dtype conversion


def test_sinusoid_layouts_hold_the_same_features():
    a, b = sinusoidal_table(50, 12), sinusoidal_table(50, 12, interleaved=True)
    perm = torch.tensor([k for i in range(6) for k in (i, 6 + i)])
    assert torch.equal(a[:, perm], b)


@pytest.mark.parametrize("kwargs", [dict(n_pos=4, dim=7), dict(n_pos=-1, dim=8), dict(n_pos=4, dim=8, base=0.0)])
def test_sinusoid_bad_inputs(kwargs):
    with pytest.raises(ValueError):
        sinusoidal_table(**kwargs)


# --------------------------------------------------------------------------------------------------------- learned


def test_learned_refuses_to_extrapolate():
    pe = LearnedPositionalEmbedding(16, 8)
    assert torch.equal(pe(16), pe.weight)
    assert torch.equal(pe(4, offset=12), pe.weight[12:])
    with pytest.raises(ValueError, match="learned absolute positions cannot extrapolate beyond max_len=16"):
        pe(17)
    with pytest.raises(ValueError, match="cannot extrapolate beyond max_len=16"):
        pe(4, offset=13)
    with pytest.raises(ValueError):
        pe(2, offset=-1)


# ---------------------------------------------------------------------------------------------------------- rotary


def rope_complex_reference(x, offset, base=10000.0):
    """RoFormer's definition with complex numbers: pair (x_{2i}, x_{2i+1}) is multiplied by exp(i * p * theta_i)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pos = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    rot = torch.polar(torch.ones(len(pos), d // 2, dtype=torch.float64), pos[:, None] * theta)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous()) * rot
    return torch.view_as_real(z).reshape(x.shape)


def test_rope_interleaved_matches_complex_definition():
    x = torch.randn(2, 3, 7, 16)
    (q, _) = RotaryEmbedding(16, interleaved=True)(x, x, offset=5)
    torch.testing.assert_close(q.double(), rope_complex_reference(x, 5), atol=1e-5, rtol=1e-5)


def test_rope_half_split_is_permuted_interleaved():
    x = torch.randn(2, 3, 7, 16)
    perm = rotary_permutation(16)
    inter, half = RotaryEmbedding(16, interleaved=True), RotaryEmbedding(16)
    torch.testing.assert_close(half.rotate(x[..., perm], 3), inter.rotate(x, 3)[..., perm])
    # and it is not the same map: loading an interleaved checkpoint into a half-split model changes the output
    assert not torch.allclose(half.rotate(x, 3), inter.rotate(x, 3), atol=1e-3)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_scores_depend_only_on_relative_position(interleaved):
    rope = RotaryEmbedding(32, interleaved=interleaved)
    q, k = torch.randn(1, 2, 1, 32).double(), torch.randn(1, 2, 1, 32).double()
    q, k = q.expand(1, 2, 12, 32), k.expand(1, 2, 12, 32)  # the same vectors at every position
    for offset in (0, 100):
        qr, kr = rope(q, k, offset=offset)
        s = qr @ kr.transpose(-1, -2)  # (1, 2, 12, 12): must be Toeplitz, s[i, j] = f(i - j)
        torch.testing.assert_close(s[..., 1:, 1:], s[..., :-1, :-1])
    # a shift of both positions leaves every score unchanged
    q, k = torch.randn(2, 2, 9, 32), torch.randn(2, 2, 9, 32)

    def scores(**offsets):
        qr, kr = rope(q, k, **offsets)
        return qr @ kr.transpose(-1, -2)

    torch.testing.assert_close(scores(offset=0), scores(offset=333), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(scores(q_offset=5, k_offset=0), scores(q_offset=105, k_offset=100), atol=1e-4, rtol=1e-4)
    # but scores do depend on the relative position (rotation is not a no-op)
    assert not torch.allclose(scores(q_offset=5, k_offset=0), scores(offset=0), atol=1e-3)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_preserves_norms(interleaved):
    x = torch.randn(3, 4, 20, 8)
    y = RotaryEmbedding(8, interleaved=interleaved).rotate(x, 1000)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_layouts_agree_after_permuting_weights(interleaved):
    """A model with per-head W_q, W_k in one layout equals the other layout's model with permuted rows."""
    torch.manual_seed(0)
    b, s, dim, heads, hd = 2, 6, 24, 3, 8
    x, wq, wk = torch.randn(b, s, dim), torch.randn(heads * hd, dim), torch.randn(heads * hd, dim)
    perm = rotary_permutation(hd)
    rows = (torch.arange(heads)[:, None] * hd + perm).reshape(-1)  # permute within each head
    src, dst = RotaryEmbedding(hd, interleaved=True), RotaryEmbedding(hd, interleaved=False)
    if not interleaved:  # the other direction: half-split checkpoint into an interleaved model, inverse perm
        src, dst = dst, src
        rows = (torch.arange(heads)[:, None] * hd + perm.argsort()).reshape(-1)

    def scores(rope, wq, wk):
        q = (x @ wq.T).view(b, s, heads, hd).transpose(1, 2)
        k = (x @ wk.T).view(b, s, heads, hd).transpose(1, 2)
        q, k = rope(q, k, offset=7)
        return q @ k.transpose(-1, -2)

    torch.testing.assert_close(scores(dst, wq[rows], wk[rows]), scores(src, wq, wk), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(scores(dst, wq, wk), scores(src, wq, wk), atol=1e-2)


def test_rope_computes_in_fp32_under_bf16():
    rope = RotaryEmbedding(64)
    x = torch.randn(1, 2, 16, 64).to(torch.bfloat16)
    q, k = rope(x, x, offset=4000)
    assert q.dtype == k.dtype == torch.bfloat16
    assert torch.equal(q, rope.rotate(x.float(), 4000).to(torch.bfloat16))
    # a bf16 computation of the angles is far off at this position; ours equals the exact result rounded once
    perm = rotary_permutation(64)
    exact = rope_complex_reference(x[..., perm.argsort()], 4000)[..., perm]  # half-split via the interleaved form
    torch.testing.assert_close(q.double(), exact, atol=2e-2, rtol=1e-2)


def test_rope_table_cache_and_half_module():
    rope = RotaryEmbedding(8, interleaved=True)
    small = rope.cos_sin(4, offset=2)
    big = rope.cos_sin(50, offset=100)  # grows the cache
    fresh = RotaryEmbedding(8, interleaved=True)
    for got, want in zip((*rope.cos_sin(4, offset=2), *big), (*small, *fresh.cos_sin(50, offset=100)), strict=True):
        assert torch.equal(got, want)
    x = torch.randn(1, 1, 3, 8)
    torch.testing.assert_close(rope.half().rotate(x, 7000), fresh.rotate(x, 7000))  # .half() rounds no table


def test_rope_offsets_for_cached_decoding():
    rope = RotaryEmbedding(16)
    q, k = torch.randn(1, 2, 10, 16), torch.randn(1, 2, 10, 16)
    qf, kf = rope(q, k)
    ql, kl = rope(q[:, :, -1:], k, q_offset=9, k_offset=0)
    torch.testing.assert_close(ql, qf[:, :, -1:])
    torch.testing.assert_close(kl, kf)


def test_rope_bad_inputs():
    rope = RotaryEmbedding(16)
    with pytest.raises(ValueError, match="head_dim=16"):
        rope(torch.randn(2, 4, 16), torch.randn(2, 4, 16))
    with pytest.raises(ValueError, match="head_dim=16"):
        rope(torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8))
    with pytest.raises(ValueError, match="floating-point"):
        rope.rotate(torch.ones(1, 2, 4, 16, dtype=torch.long))
    with pytest.raises(ValueError):
        RotaryEmbedding(15)
    with pytest.raises(ValueError):
        rotary_permutation(7)


# ----------------------------------------------------------------------------------------------------------- ALiBi


def reference_alibi_slopes(n):
    """Press et al.'s recipe as described in their code: a closed-form start and ratio, recursing for non-powers."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest) + reference_alibi_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n", [*range(1, 17), 24, 40])
def test_alibi_slopes_match_reference(n):
    got = alibi_slopes(n)
    assert got.shape == (n,) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), torch.tensor(reference_alibi_slopes(n), dtype=torch.float64))


def test_alibi_slopes_known_values():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))
    # 12 heads: the 8-head slopes, then 1/sqrt(2) * each of the first four
    expected = [2.0**-i for i in range(1, 9)] + [2.0 ** (-0.5 - i) for i in range(4)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(expected))


def test_alibi_bias_forms():
    q_len, k_len, off = 4, 9, 5
    causal, sym = ALiBi(6)(q_len, k_len, offset=off), ALiBi(6, causal=False)(q_len, k_len, offset=off)
    assert causal.shape == sym.shape == (6, q_len, k_len)
    slopes = alibi_slopes(6)
    for h, i, j in [(0, 0, 0), (2, 3, 1), (5, 1, 8), (4, 2, 7)]:
        d = (off + i) - j
        assert causal[h, i, j].item() == pytest.approx(-slopes[h].item() * d)
        assert sym[h, i, j].item() == pytest.approx(-slopes[h].item() * abs(d))
    # under a causal mask the paper's code (bias = slope * j) gives the same attention: a per-row constant apart
    logits = torch.randn(6, q_len, k_len)
    future = torch.arange(k_len)[None, :] > (off + torch.arange(q_len))[:, None]
    press = slopes[:, None, None] * torch.arange(k_len, dtype=torch.float32)
    a = (logits + causal).masked_fill(future, float("-inf")).softmax(-1)
    b = (logits + press).masked_fill(future, float("-inf")).softmax(-1)
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError):
        alibi_slopes(0)


# ------------------------------------------------------------------------------------------------------ T5 buckets


def reference_t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's published rule for relative position ``rel = key - query`` (Raffel et al., mesh-tensorflow)."""
    bucket = 0
    n = -rel
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            bucket += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    val = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return bucket + min(val, num_buckets - 1)


@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (16, 64), (64, 256), (10, 50), (8, 20)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_table_matches_reference(num_buckets, max_distance, bidirectional):
    rel = torch.arange(-300, 301)
    got = T5RelativePositionBias.relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    expected = [reference_t5_bucket(r, bidirectional, num_buckets, max_distance) for r in rel.tolist()]
    assert got.tolist() == expected
    assert got.min() >= 0 and got.max() < num_buckets


def test_t5_bucket_known_values():
    bucket = T5RelativePositionBias.relative_position_bucket
    rel = torch.tensor([0, -1, -7, -8, -12, -300, 1, 7, 300])
    assert bucket(rel, True, 32, 128).tolist() == [0, 1, 7, 8, 9, 15, 17, 23, 31]
    assert bucket(rel, False, 32, 128).tolist() == [0, 1, 7, 8, 12, 31, 0, 0, 0]  # the future shares bucket 0


def test_t5_bias_shape_offset_and_sharing():
    t5 = T5RelativePositionBias(num_heads=3)
    bias = t5(5, 7)
    assert bias.shape == (3, 5, 7) and bias.dtype == torch.float32
    table = t5.relative_attention_bias.weight  # (buckets, heads)
    for h, i, j in [(0, 0, 0), (1, 4, 0), (2, 1, 6)]:
        b = T5RelativePositionBias.relative_position_bucket(torch.tensor(j - i))
        assert bias[h, i, j] == table[b, h]
    torch.testing.assert_close(t5(1, 7, offset=4), bias[:, 4:5])  # one decoding step at query position 4
    # one instance serves every layer: gradients from all layers land in the one table
    (t5(5, 7).sum() + t5(5, 7).pow(2).sum()).backward()
    assert sum(p.numel() for p in t5.parameters()) == 32 * 3
    assert table.grad is not None and table.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="integer tensor"):
        T5RelativePositionBias.relative_position_bucket(torch.tensor([1.5]))
    for kwargs in (dict(num_heads=0), dict(num_heads=2, num_buckets=2), dict(num_heads=2, max_distance=4)):
        with pytest.raises(ValueError):
            T5RelativePositionBias(**kwargs)


# ------------------------------------------------------------------------------------------------ Fourier features


def test_fourier_features_values_and_band_spacing():
    k, res = 5, 64
    x = torch.tensor([[0.0], [1.0], [-0.3], [0.77]], dtype=torch.float64)
    feats = fourier_features(x, k, [res])
    assert feats.shape == (4, 1 * 2 * k + 1)
    freqs = [1 + i * (res / 2 - 1) / (k - 1) for i in range(k)]  # equally spaced from 1 to Nyquist res/2
    assert freqs[0] == 1 and freqs[-1] == res / 2
    for r, xv in enumerate(x[:, 0].tolist()):
        assert feats[r, 0].item() == xv  # raw position first
        for i, f in enumerate(freqs):
            assert feats[r, 1 + i].item() == pytest.approx(math.sin(math.pi * f * xv), abs=1e-9)
            assert feats[r, 1 + k + i].item() == pytest.approx(math.cos(math.pi * f * xv), abs=1e-9)
    assert torch.all(feats[0, 1 : 1 + k] == 0) and torch.all(feats[0, 1 + k :] == 1)  # x = 0
    # x = 1: sin(pi f) vanishes at integer frequencies, cos(pi f) = (-1)^f
    integer_band = fourier_features(torch.ones(1, 1), 4, [8])  # freqs 1, 2, 3, 4
    torch.testing.assert_close(integer_band[0, 1:5], torch.zeros(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(integer_band[0, 5:9], torch.tensor([-1.0, 1.0, -1.0, 1.0]))


def test_fourier_features_multi_axis_order_and_options():
    pos = torch.rand(3, 7, 2) * 2 - 1
    k, res = 4, [10, 30]
    feats = fourier_features(pos, k, res)
    assert feats.shape == (3, 7, 2 * 2 * k + 2)
    torch.testing.assert_close(feats[..., :2], pos)
    f1 = torch.linspace(1, res[1] / 2, k)
    # axis-major: channels 2+k .. 2+2k-1 are the sines of axis 1
    torch.testing.assert_close(feats[..., 2 + k : 2 + 2 * k], torch.sin(math.pi * f1 * pos[..., 1:2]))
    assert fourier_features(pos, k, res, concat_pos=False).shape[-1] == 2 * 2 * k
    assert fourier_features(pos, k, res, sine_only=True).shape[-1] == 2 * k + 2
    with pytest.raises(ValueError, match="d=2"):
        fourier_features(pos, k, [10])
    with pytest.raises(ValueError):
        fourier_features(pos.long(), k, res)


@pytest.mark.parametrize("shape", [(16,), (4, 6), (3, 4, 5)])
def test_fourier_grid_shapes_and_positions(shape):
    d, k = len(shape), 6
    grid = fourier_position_grid(shape, k)
    assert grid.shape == (math.prod(shape), d * 2 * k + d)
    pos = grid[:, :d].reshape(*shape, d)
    for a, n in enumerate(shape):  # linspace(-1, 1) along axis a, row-major flattening
        idx = [0] * d
        idx[a] = slice(None)
        torch.testing.assert_close(pos[tuple(idx)][:, a], torch.linspace(-1, 1, n))
    enc = FourierPositionEncoding(shape, k)
    assert enc.out_dim == d * 2 * k + d and torch.equal(enc(), grid)
    assert enc(batch_size=2).shape == (2, math.prod(shape), enc.out_dim)
    assert enc.state_dict() == {}
    with pytest.raises(ValueError):
        fourier_position_grid((0, 3), k)


# ------------------------------------------------------------------------------------------------------ factorised


def test_factorized_embedding_is_sum_of_axis_tables():
    T, H, W, dim = 2, 3, 4, 5
    pe = FactorizedPositionalEmbedding((T, H, W), dim)
    out = pe()
    assert out.shape == (T * H * W, dim)
    et, eh, ew = pe.tables
    for t, h, w in [(0, 0, 0), (1, 2, 3), (0, 1, 2), (1, 0, 3)]:
        torch.testing.assert_close(out[(t * H + h) * W + w], et[t] + eh[h] + ew[w])
    small = pe((1, 2, 2))
    assert small.shape == (4, dim)
    torch.testing.assert_close(small[3], et[0] + eh[1] + ew[1])
    assert sum(p.numel() for p in pe.parameters()) == (T + H + W) * dim
    for bad in [(3, 3, 4), (1, 2), (0, 1, 1)]:
        with pytest.raises(ValueError):
            pe(bad)


def test_bad_offsets_and_lengths():
    with pytest.raises(ValueError):
        SinusoidalPositionalEncoding(8)(4, offset=-2)
    with pytest.raises(ValueError):
        ALiBi(4)(3, -1)
    with pytest.raises(ValueError):
        T5RelativePositionBias(4)(2.5, 3)


# ---------------------------------------------------------------------------------------- cross-check with Hugging Face


def test_agrees_with_hugging_face_implementations():
    """HF's T5 buckets, Perceiver Fourier features (DeepMind's ordering) and Llama's half-split RoPE."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    from transformers.models.perceiver.modeling_perceiver import build_linear_positions, generate_fourier_features
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-300, 301)[None, :]
    for bidirectional in (True, False):
        ours = T5RelativePositionBias.relative_position_bucket(rel, bidirectional, 32, 128)
        assert torch.equal(ours, T5Attention._relative_position_bucket(rel, bidirectional, 32, 128))

    shape, k = (5, 7), 6
    pos = build_linear_positions(shape).reshape(1, -1, 2)
    theirs = generate_fourier_features(pos, k, max_resolution=shape)
    torch.testing.assert_close(fourier_position_grid(shape, k), theirs[0])

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64)
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)
    cos, sin = LlamaRotaryEmbedding(cfg)(q, torch.arange(20, 29)[None].expand(2, -1))
    hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
    our_q, our_k = RotaryEmbedding(16, base=cfg.rope_parameters["rope_theta"])(q, k, offset=20)
    torch.testing.assert_close(our_q, hf_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_k, hf_k, atol=1e-5, rtol=1e-5)
