"""Multi-head self- and cross-attention on ``torch.nn.functional.scaled_dot_product_attention``.

Attention(Q, K, V) = softmax(Q K^T * scale + B) V   (Vaswani et al. 2017, eq. 1), per head, with the
heads concatenated and projected (eq. 4/5 of the same paper).

Mask conventions (used everywhere in paperzoo):

- ``key_padding_mask``: ``(batch, k_len)``, **True (or 1) = a real token to attend to, False (or 0) = padding**,
  the same meaning as Hugging Face's ``attention_mask``. Integer/float 0/1 masks are accepted
  (see :func:`as_keep_mask`).
- ``attn_bias``: added to the scores before the softmax. A float tensor is additive (T5/ALiBi/Swin biases,
  ``-inf`` forbids); a bool tensor is a keep-mask (True = may attend). Shapes ``(q, k)``, ``(heads or 1, q, k)``
  or ``(batch or 1, heads or 1, q, k)``.
- ``causal=True``: query i sees keys j <= i (top-left aligned, as SDPA's ``is_causal``).

A query row that sees no key at all (e.g. a sequence that is entirely padding) gets an all-zero attention
result (before the output projection, which then adds only its bias) and zero gradients, never NaN: SDPA's
safe softmax (torch >= 2.5) maps fully ``-inf`` rows to 0, and the explicit path used for
``return_attention=True`` does the same (tested in tests/nn/test_attention.py).

Every paperzoo model attends through :func:`sdpa` (this module's :class:`MultiHeadAttention`, Funnel's relative
attention, Swin's window attention): ``scaled_dot_product_attention``, except where its CPU kernel is measurably
slow (short blocks in bf16 with gradients), see its docstring.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

__all__ = ["MultiHeadAttention", "as_keep_mask", "merge_masks", "sdpa"]

# per-head score blocks (q_len * k_len) up to this size are computed unfused on CPU in bf16 when training (see sdpa)
UNFUSED_MAX_SCORES = 2**17


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """``F.scaled_dot_product_attention(q, k, v, ...)``: the same function, unfused where that is faster.

    On CPU in bf16 PyTorch takes its fused (flash) kernel, whose backward is slow for a small score block per head.
    Fwd+bwd, 2 threads, fused vs unfused (bf16 products, softmax accumulated in fp32), interleaved in one process:
    Swin's 49 x 49 windows (512 windows x 3 heads, d 32) 141 vs 18 ms; 128 x 128 (8 x 8 heads, d 64) 20 vs 5.9 ms;
    256 x 256 51 vs 21 ms; Perceiver's 2048 queries x 64 latents (8 x 8 heads, d 32) 75 vs 41 ms. From 512 x 512
    on the fused kernel wins (100 vs 130 ms; 1024 x 1024 258 vs 420 ms), and it never stores the scores. So a head's
    block of at most :data:`UNFUSED_MAX_SCORES` scores is computed as softmax(Q K^T * scale + mask) V in bf16, as
    Hugging Face's attention computes it under autocast (its fp32 probabilities are rounded to bf16 before the
    product with V; the softmax kernel accumulates max and sum in fp32 either way). SDPA's own unfused (math)
    backend is no substitute: it upcasts to fp32, and with reduced precision allowed its safe-softmax scan of the
    scores (isneginf, all, where) still leaves the Perceiver MLM step at 0.95x Hugging Face's, against 1.08x here.
    Without gradients the fused forward is as fast or faster (2048 x 64: 18 vs 28 ms; 49 x 49: 13 vs 13 ms), so
    inference, fp32, other devices and compiled graphs keep SDPA's own choice.
    """
    if (q.dtype == torch.bfloat16 and q.device.type == "cpu" and not torch.compiler.is_compiling()
            and q.shape[-2] * k.shape[-2] <= UNFUSED_MAX_SCORES and torch.is_grad_enabled()
            and (q.requires_grad or k.requires_grad or v.requires_grad)):
        return _explicit_attention(q, k, v, attn_mask, is_causal, scale, dropout_p)[0]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                          scale=scale)


def as_keep_mask(mask: torch.Tensor) -> torch.Tensor:
    """A bool keep-mask (True = attend) from a bool or HF-style 1/0 integer/float mask of any shape."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"expected a mask tensor, got {type(mask).__name__}")
    return mask if mask.dtype == torch.bool else mask != 0


def _bias_4d(bias: torch.Tensor, q_len: int, k_len: int) -> torch.Tensor:
    """Validate an attention bias/mask and view it as (batch or 1, heads or 1, q, k)."""
    if bias.ndim not in (2, 3, 4) or bias.shape[-1] != k_len or bias.shape[-2] not in (1, q_len):
        raise ValueError(f"attn_bias must have shape (q, k), (heads, q, k) or (batch, heads, q, k) with "
                         f"(q, k) = ({q_len} or 1, {k_len}); got {tuple(bias.shape)}")
    return bias.reshape((1,) * (4 - bias.ndim) + tuple(bias.shape))


def merge_masks(key_padding_mask: torch.Tensor | None, attn_bias: torch.Tensor | None, causal: bool,
                q_len: int, k_len: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor | None, bool]:
    """Merge padding, bias and causality into what SDPA takes: ``(attn_mask or None, is_causal)``.

    Nothing is materialised when nothing is needed: no mask -> ``(None, causal)`` (SDPA's ``is_causal``);
    otherwise one additive float mask of ``dtype`` with ``-inf`` where attention is forbidden, of the smallest
    shape that broadcasts to (batch, heads, q, k) (padding alone: (batch, 1, 1, k)). Compute it once per
    forward and pass it to every layer as ``attn_mask`` (SDPA's name), which goes to SDPA unchanged.
    """
    keep = None
    if key_padding_mask is not None:
        if key_padding_mask.ndim != 2 or key_padding_mask.shape[-1] != k_len:
            raise ValueError(f"key_padding_mask must have shape (batch, k_len={k_len}), "
                             f"got {tuple(key_padding_mask.shape)}")
        keep = as_keep_mask(key_padding_mask)[:, None, None, :]  # (b, 1, 1, k)
    if attn_bias is not None:
        attn_bias = _bias_4d(attn_bias, q_len, k_len)
        if attn_bias.dtype == torch.bool:
            keep, attn_bias = (attn_bias if keep is None else keep & attn_bias), None
        elif not attn_bias.is_floating_point():
            raise ValueError(f"attn_bias must be a float (additive) or bool (keep) tensor, got {attn_bias.dtype}")
    if attn_bias is None and keep is None:
        return None, causal
    if causal:
        device = (keep if keep is not None else attn_bias).device
        tri = torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()
        keep = tri if keep is None else keep & tri
    mask = attn_bias.to(dtype) if attn_bias is not None else torch.zeros(keep.shape, dtype=dtype, device=keep.device)
    if keep is not None:
        mask = mask.masked_fill(~keep, float("-inf"))
    return mask, False


class MultiHeadAttention(nn.Module):
    """Multi-head attention with separate query/key/value widths and an optional output projection.

    Args:
        dim: query input width.
        num_heads: number of heads; ``qk_dim`` and ``v_dim`` must be divisible by it.
        kv_dim: key/value input width for cross-attention (None: self-attention, keys/values from ``x``
            unless ``context`` is given, then ``context`` must have width ``dim``).
        qk_dim: total query/key width over all heads (default ``dim``).
        v_dim: total value width over all heads (default ``qk_dim``).
        out_dim: output width (default ``dim``); with ``out_proj=False`` the output is the concatenated heads,
            width ``v_dim``.
        bias: biases in the projections.
        dropout: dropout on the attention probabilities (training only).
        scale: score scale (default ``1/sqrt(qk_dim / num_heads)``; T5 uses 1.0).

    Self-attention keeps q, k, v in one fused Linear ``qkv`` (one GEMM, output ``[q | k | v]``);
    cross-attention has ``q`` and a fused ``kv``. The output projection is ``out``.
    """

    def __init__(self, dim: int, num_heads: int, kv_dim: int | None = None, qk_dim: int | None = None,
                 v_dim: int | None = None, out_dim: int | None = None, out_proj: bool = True, bias: bool = True,
                 dropout: float = 0.0, scale: float | None = None):
        super().__init__()
        qk_dim = qk_dim or dim
        v_dim = v_dim or qk_dim
        if num_heads < 1 or qk_dim % num_heads or v_dim % num_heads:
            raise ValueError(f"qk_dim ({qk_dim}) and v_dim ({v_dim}) must be divisible by num_heads ({num_heads})")
        if not out_proj and out_dim not in (None, v_dim):
            raise ValueError(f"without out_proj the output width is v_dim={v_dim}, got out_dim={out_dim}")
        self.dim, self.num_heads, self.kv_dim = dim, num_heads, kv_dim
        self.qk_dim, self.v_dim = qk_dim, v_dim
        self.head_dim = qk_dim // num_heads
        self.scale = scale if scale is not None else 1.0 / math.sqrt(self.head_dim)
        self.dropout = dropout
        if kv_dim is None:
            self.qkv = nn.Linear(dim, 2 * qk_dim + v_dim, bias=bias)
        else:
            self.q = nn.Linear(dim, qk_dim, bias=bias)
            self.kv = nn.Linear(kv_dim, qk_dim + v_dim, bias=bias)
        self.out = nn.Linear(v_dim, out_dim or dim, bias=bias) if out_proj else nn.Identity()
        self.out_dim = (out_dim or dim) if out_proj else v_dim

    def _project(self, x: torch.Tensor, context: torch.Tensor | None):
        """q, k, v as (batch, heads, seq, head_dim) views of the projection outputs (no copies)."""
        qk, v = self.qk_dim, self.v_dim
        if self.kv_dim is None:
            if context is None:
                q, k, v = F.linear(x, self.qkv.weight, self.qkv.bias).split([qk, qk, v], dim=-1)
            else:  # the fused weight, split between the query and the key/value inputs
                w, b = self.qkv.weight, self.qkv.bias
                q = F.linear(x, w[:qk], None if b is None else b[:qk])
                k, v = F.linear(context, w[qk:], None if b is None else b[qk:]).split([qk, v], dim=-1)
        else:
            q = F.linear(x, self.q.weight, self.q.bias)
            k, v = F.linear(context, self.kv.weight, self.kv.bias).split([qk, v], dim=-1)
        h = self.num_heads
        return tuple(rearrange(t, "b s (h d) -> b h s d", h=h) for t in (q, k, v))

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None, attn_bias: torch.Tensor | None = None,
                causal: bool = False, rotary: nn.Module | None = None, rotary_offset: int = 0,
                return_attention: bool = False, attn_mask: torch.Tensor | None = None):
        """Attend from ``x`` (batch, q_len, dim) to ``context`` (batch, k_len, kv_dim) or to ``x`` itself.

        ``key_padding_mask`` (batch, k_len), True/1 = keep; ``attn_bias`` additive float or bool keep-mask
        (see the module docstring); ``rotary`` a RotaryEmbedding applied to q and k (positions start at
        ``rotary_offset``). Returns (batch, q_len, out_dim), and the attention probabilities
        (batch, heads, q_len, k_len) as well when ``return_attention``. ``attn_mask``: a mask already merged by
        :func:`merge_masks` (a stack merges once per forward), passed to SDPA as it is; give it alone.
        """
        if x.ndim != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape (batch, seq, dim={self.dim}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise ValueError(f"x must be a floating-point tensor, got {x.dtype}")
        if context is None and self.kv_dim is not None:
            raise ValueError(f"cross-attention (kv_dim={self.kv_dim}) needs a context tensor")
        if context is not None:
            width = self.kv_dim or self.dim
            if context.ndim != 3 or context.shape[-1] != width or context.shape[0] != x.shape[0]:
                raise ValueError(f"context must have shape (batch={x.shape[0]}, k_len, {width}), "
                                 f"got {tuple(context.shape)}")
        q_len, k_len = x.shape[1], (x if context is None else context).shape[1]
        if attn_mask is None:
            attn_mask, causal = merge_masks(key_padding_mask, attn_bias, causal, q_len, k_len, x.dtype)
        elif key_padding_mask is not None or attn_bias is not None or causal:
            raise ValueError("attn_mask is already merged (merge_masks): pass it without key_padding_mask, "
                             "attn_bias or causal")

        q, k, v = self._project(x, context)
        if rotary is not None:
            q, k = rotary(q, k, offset=rotary_offset)
        p = self.dropout if self.training else 0.0
        if return_attention:
            o, attn = _explicit_attention(q, k, v, attn_mask, causal, self.scale, p)
        else:
            o = sdpa(q, k, v, attn_mask=attn_mask, dropout_p=p, is_causal=causal, scale=self.scale)
        o = self.out(rearrange(o, "b h s d -> b s (h d)"))
        return (o, attn) if return_attention else o


def _explicit_attention(q, k, v, mask, is_causal, scale, p):
    """(softmax(Q K^T * scale + mask) V, the probabilities before dropout), in q's dtype, outside autocast: the
    short-block path of :func:`sdpa` and ``return_attention=True``. A row with no visible key gives zeros and zero
    gradients: its mask row is zeroed before the softmax, found on the mask's own broadcast shape."""
    if is_causal and mask is not None:
        raise ValueError("sdpa: pass attn_mask or is_causal=True, not both (as scaled_dot_product_attention)")
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    with torch.autocast(q.device.type, enabled=False):
        scores = torch.matmul(q * scale, k.transpose(-1, -2))
        empty = None
        if is_causal:
            keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
            mask = torch.zeros(keep.shape, dtype=q.dtype, device=q.device).masked_fill(~keep, float("-inf"))
        if mask is not None:
            if mask.dtype == torch.bool:
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
            mask = mask.to(q.dtype)
            empty = mask.amax(-1, keepdim=True) == float("-inf")  # on the mask's own (broadcast) shape
            if bool(empty.any()):
                mask = mask.masked_fill(empty, 0.0)
            else:
                empty = None
            scores.add_(mask)  # in place: the product's backward needs q and k, not its output
        attn = scores.softmax(-1)
        if empty is not None:
            attn = attn.masked_fill(empty, 0.0)
        return torch.matmul(F.dropout(attn, p) if p > 0.0 else attn, v), attn
