"""MultiHeadAttention: agrees with a naive reference, masks hide what they should, shapes and bad inputs."""

import math

import pytest
import torch
from einops import rearrange

from paperzoo.nn.attention import MultiHeadAttention, as_keep_mask, merge_masks
from paperzoo.nn.posenc import ALiBi, RotaryEmbedding


def naive(attn: MultiHeadAttention, x, context=None, bias=None):
    """softmax(Q K^T * scale + bias) V with explicit per-part weights; bias (b|1, h|1, q, k) additive."""
    ctx = x if context is None else context
    qk = attn.qk_dim
    if attn.kv_dim is None:
        w, b = attn.qkv.weight, attn.qkv.bias
        wq, bq, wk, bk, wv, bv = w[:qk], b[:qk], w[qk:2 * qk], b[qk:2 * qk], w[2 * qk:], b[2 * qk:]
    else:
        wq, bq = attn.q.weight, attn.q.bias
        wk, bk, wv, bv = attn.kv.weight[:qk], attn.kv.bias[:qk], attn.kv.weight[qk:], attn.kv.bias[qk:]
    h = attn.num_heads
    q = rearrange(x @ wq.T + bq, "b s (h d) -> b h s d", h=h)
    k = rearrange(ctx @ wk.T + bk, "b s (h d) -> b h s d", h=h)
    vv = rearrange(ctx @ wv.T + bv, "b s (h d) -> b h s d", h=h)
    scores = q @ k.transpose(-1, -2) * attn.scale
    if bias is not None:
        scores = scores + bias
    o = rearrange(scores.softmax(-1) @ vv, "b h s d -> b s (h d)")
    return attn.out(o)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_matches_naive_reference_with_bias_and_padding():
    attn = MultiHeadAttention(48, 3).eval()
    x = torch.randn(2, 7, 48)
    bias = torch.randn(3, 7, 7)
    pad = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    ref_bias = bias[None].masked_fill(~pad.bool()[:, None, None, :], float("-inf"))
    torch.testing.assert_close(attn(x, key_padding_mask=pad, attn_bias=bias), naive(attn, x, bias=ref_bias),
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(attn(x), naive(attn, x), atol=1e-5, rtol=1e-5)
    out, probs = attn(x, attn_bias=bias, return_attention=True)
    torch.testing.assert_close(out, naive(attn, x, bias=bias[None]), atol=1e-5, rtol=1e-5)
    assert probs.shape == (2, 3, 7, 7)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 3, 7))


def test_scale_option_t5_style():
    attn = MultiHeadAttention(32, 4, scale=1.0).eval()
    assert attn.scale == 1.0
    x = torch.randn(1, 5, 32)
    torch.testing.assert_close(attn(x), naive(attn, x), atol=1e-5, rtol=1e-5)
    assert MultiHeadAttention(32, 4).scale == pytest.approx(1 / math.sqrt(8))


def test_separate_widths_and_cross_attention_shapes():
    attn = MultiHeadAttention(24, 4, kv_dim=40, qk_dim=64, v_dim=32, out_dim=16).eval()
    x, ctx = torch.randn(3, 5, 24), torch.randn(3, 11, 40)
    out = attn(x, ctx)
    assert out.shape == (3, 5, 16)
    torch.testing.assert_close(out, naive(attn, x, ctx), atol=1e-5, rtol=1e-5)
    no_proj = MultiHeadAttention(24, 4, kv_dim=40, v_dim=32, out_proj=False)
    assert no_proj(x, ctx).shape == (3, 5, 32)
    # self-attention weights used against another sequence of the same width
    selfattn = MultiHeadAttention(24, 2, qk_dim=16, v_dim=20).eval()
    ctx2 = torch.randn(3, 9, 24)
    torch.testing.assert_close(selfattn(x, ctx2), naive(selfattn, x, ctx2), atol=1e-5, rtol=1e-5)


def test_padded_keys_do_not_change_outputs():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 9, 32)
    pad = torch.ones(2, 9, dtype=torch.long)
    pad[0, 6:] = 0
    y = x.clone()
    y[0, 6:] = torch.randn(3, 32) * 10  # change only the padded tokens' content
    a, b = attn(x, key_padding_mask=pad), attn(y, key_padding_mask=pad)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    torch.testing.assert_close(a[1], b[1])
    # cross-attention: padded context positions are invisible too
    cross = MultiHeadAttention(32, 4, kv_dim=16).eval()
    ctx = torch.randn(2, 5, 16)
    ctx2 = ctx.clone()
    ctx2[:, 3:] = 99.0
    m = torch.tensor([[True, True, True, False, False]] * 2)
    torch.testing.assert_close(cross(x, ctx, key_padding_mask=m), cross(x, ctx2, key_padding_mask=m))


@pytest.mark.parametrize("with_bias", [False, True])
def test_causal_blocks_the_future(with_bias):
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 10, 32)
    y = x.clone()
    y[:, 6:] = torch.randn(2, 4, 32)
    bias = torch.randn(4, 10, 10) if with_bias else None
    a, b = attn(x, causal=True, attn_bias=bias), attn(y, causal=True, attn_bias=bias)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])
    # equals the explicit lower-triangular mask
    tri = torch.ones(10, 10).tril().bool()
    ref = (bias if with_bias else torch.zeros(1, 10, 10)).masked_fill(~tri, float("-inf"))
    torch.testing.assert_close(a, naive(attn, x, bias=ref[None]), atol=1e-5, rtol=1e-5)


def test_fully_masked_rows_are_zero_not_nan():
    attn = MultiHeadAttention(16, 2).eval()
    x = torch.randn(2, 4, 16, requires_grad=True)
    pad = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    out = attn(x, key_padding_mask=pad)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[1], attn.out.bias.expand(4, 16))  # zero attention output, then out-projection
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    out2, probs = attn(x, key_padding_mask=pad, return_attention=True)
    torch.testing.assert_close(out2, out)
    assert (probs[1] == 0).all()


def test_no_mask_materialised_when_not_needed():
    assert merge_masks(None, None, True, 5, 5) == (None, True)
    assert merge_masks(None, None, False, 5, 5) == (None, False)
    mask, causal = merge_masks(torch.ones(2, 5, dtype=torch.long), None, False, 5, 5)
    assert mask.shape == (2, 1, 1, 5) and mask.dtype == torch.float32 and not causal
    mask, causal = merge_masks(torch.tensor([[1, 1, 0]]), torch.zeros(4, 3, 3), True, 3, 3)
    assert mask.shape == (1, 4, 3, 3) and not causal
    assert torch.isinf(mask[0, 0, 0, 1]) and torch.isinf(mask[0, 0, 2, 2]) and mask[0, 0, 1, 1] == 0
    assert as_keep_mask(torch.tensor([1, 0])).tolist() == [True, False]


def test_bool_attn_bias_is_a_keep_mask():
    attn = MultiHeadAttention(16, 2).eval()
    x = torch.randn(1, 6, 16)
    keep = torch.rand(6, 6) > 0.3
    keep |= torch.eye(6, dtype=torch.bool)
    additive = torch.zeros(6, 6).masked_fill(~keep, float("-inf"))
    torch.testing.assert_close(attn(x, attn_bias=keep), attn(x, attn_bias=additive))


def test_rotary_scores_relative_and_alibi_bias():
    attn = MultiHeadAttention(32, 4).eval()
    rope = RotaryEmbedding(8)
    x = torch.randn(1, 6, 32)
    out = attn(x, rotary=rope)
    # reference: rotate q, k by hand
    q, k, v = (rearrange(t, "b s (h d) -> b h s d", h=4) for t in attn.qkv(x).split(32, -1))
    q, k = rope(q, k)
    ref = attn.out(rearrange(((q @ k.transpose(-1, -2)) * attn.scale).softmax(-1) @ v, "b h s d -> b s (h d)"))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    alibi = ALiBi(4, causal=True)(6, 6)
    torch.testing.assert_close(attn(x, attn_bias=alibi, causal=True),
                               naive(attn, x, bias=alibi.masked_fill(~torch.ones(6, 6).tril().bool(), -math.inf)),
                               atol=1e-5, rtol=1e-5)


def test_dropout_only_in_training():
    attn = MultiHeadAttention(16, 2, dropout=0.5)
    x = torch.randn(2, 8, 16)
    attn.eval()
    torch.testing.assert_close(attn(x), attn(x))
    attn.train()
    assert not torch.allclose(attn(x), attn(x))


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)
    attn = MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="dim=16"):
        attn(torch.randn(2, 3, 15))
    with pytest.raises(ValueError, match="batch, seq"):
        attn(torch.randn(3, 16))
    with pytest.raises(ValueError, match="floating"):
        attn(torch.ones(2, 3, 16, dtype=torch.long))
    with pytest.raises(ValueError, match="key_padding_mask"):
        attn(torch.randn(2, 3, 16), key_padding_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="attn_bias"):
        attn(torch.randn(2, 3, 16), attn_bias=torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="context"):
        MultiHeadAttention(16, 2, kv_dim=8)(torch.randn(2, 3, 16))
    with pytest.raises(ValueError, match="context"):
        MultiHeadAttention(16, 2, kv_dim=8)(torch.randn(2, 3, 16), torch.randn(2, 3, 9))


# --------------------------------------------------------------------- sdpa: the short-block path on CPU in bf16
def _qkv(b=2, h=3, lq=7, lk=5, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, d, generator=g) for n in (lq, lk, lk)]


def _masks(lq, lk):
    g = torch.Generator().manual_seed(1)
    pad = torch.zeros(2, 1, 1, lk).masked_fill(torch.tensor([[False] * (lk - 2) + [True] * 2, [True] * lk])
                                               [:, None, None], float("-inf"))  # batch 1: every key padded
    return {"none": None, "float bias": torch.randn(3, lq, lk, generator=g), "padding": pad,
            "bool keep": torch.rand(2, 1, lq, lk, generator=g) > 0.3, "causal": "causal"}


@pytest.mark.parametrize("kind", ["none", "float bias", "padding", "bool keep", "causal"])
def test_sdpa_short_blocks_in_bf16_match_fp32_sdpa(kind, monkeypatch):
    """The unfused bf16 path computes scaled_dot_product_attention's function: outputs and the gradients of q, k, v
    and of a float mask match fp32 SDPA within bf16 rounding; rows that see no key give zeros and zero grads."""
    from paperzoo.nn import attention

    calls = []
    real = attention._explicit_attention
    monkeypatch.setattr(attention, "_explicit_attention", lambda *a: calls.append(1) or real(*a))
    lq, lk = 7, 5
    mask = _masks(lq, lk)[kind]
    causal = mask == "causal" if isinstance(mask, str) else False
    mask = None if causal else mask
    outs, grads = {}, {}
    for dt in (torch.float32, torch.bfloat16):
        q, k, v = (t.to(dt).requires_grad_() for t in _qkv(lq=lq, lk=lk))
        m = mask.to(dt).clone().requires_grad_() if mask is not None and mask.is_floating_point() else mask
        o = attention.sdpa(q, k, v, attn_mask=m, is_causal=causal)
        (o.float() * torch.linspace(-1, 1, o.shape[-1])).sum().backward()
        outs[dt] = o.float()
        grads[dt] = [t.grad.float() for t in (q, k, v) + ((m,) if m is not None and m.requires_grad else ())]
    assert len(calls) == 1  # bf16 took the unfused path, fp32 did not
    assert torch.isfinite(outs[torch.bfloat16]).all()
    torch.testing.assert_close(outs[torch.bfloat16], outs[torch.float32], atol=3e-2, rtol=3e-2)
    for g16, g32 in zip(grads[torch.bfloat16], grads[torch.float32], strict=True):
        assert torch.isfinite(g16).all()
        torch.testing.assert_close(g16, g32, atol=5e-2, rtol=5e-2)
    if kind == "padding":  # batch 1 sees no key: zeros, and nothing flows back to its q, k, v
        assert outs[torch.bfloat16][1].abs().max() == 0
        assert all(g[1].abs().max() == 0 for g in grads[torch.bfloat16][:3])


def test_sdpa_short_block_path_only_where_it_is_faster(monkeypatch):
    """CPU + bf16 + gradients + at most UNFUSED_MAX_SCORES scores per head: unfused; fp32, longer blocks,
    inference, compiled: SDPA."""
    from paperzoo.nn import attention

    calls = []
    real = attention._explicit_attention
    monkeypatch.setattr(attention, "_explicit_attention", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(attention, "UNFUSED_MAX_SCORES", 64)
    for lq, lk, dt, grad, expect in ((8, 8, torch.bfloat16, True, 1), (8, 9, torch.bfloat16, True, 0),
                                     (8, 8, torch.float32, True, 0), (8, 8, torch.bfloat16, False, 0)):
        calls.clear()
        q, k, v = (t.to(dt).requires_grad_(grad) for t in _qkv(lq=lq, lk=lk))
        attention.sdpa(q, k, v)
        assert len(calls) == expect, (lq, lk, dt, grad)
    q, k, v = (t.bfloat16().requires_grad_() for t in _qkv(lq=8, lk=8))
    calls.clear()
    with torch.no_grad():  # inference: the fused forward is not the slow part
        attention.sdpa(q, k, v)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    attention.sdpa(q, k, v)
    assert not calls


def test_sdpa_short_blocks_drop_out_and_refuse_mask_with_causal():
    from paperzoo.nn.attention import sdpa

    q, k, v = (t.bfloat16().requires_grad_() for t in _qkv(lq=6, lk=6))
    torch.manual_seed(0)
    a, b = sdpa(q, k, v, dropout_p=0.5), sdpa(q, k, v, dropout_p=0.5)
    assert not torch.equal(a, b) and torch.equal(sdpa(q, k, v), sdpa(q, k, v))
    with pytest.raises(ValueError, match="not both"):
        sdpa(q, k, v, attn_mask=torch.zeros(6, 6, dtype=torch.bfloat16), is_causal=True)
