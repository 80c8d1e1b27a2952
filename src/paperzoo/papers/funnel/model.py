"""Funnel-Transformer (Dai, Lai, Yang & Le, 2020): pooled-query attention, relative attention, upsampling decoder.

The encoder is a stack of blocks; every block after the first starts by pooling the hidden states to half length
(sec. 2.2). In that first layer the pooled states are the queries only (``pool_q_only``), keys and values stay at
full length: ``h <- LayerNorm(h' + S-Attn(Q=h', KV=h))``, ``h' = Pool(h)`` (eq. 5). [CLS] is kept out of pooling
(``separate_cls``). The decoder (sec. 2.3) upsamples the last block's output by repetition, adds the first block's
full-length output and runs ``num_decoder_layers`` full-length layers, so token-level objectives (ELECTRA) work.

Attention is Transformer-XL style relative attention with a segment (token-type) term (appendix A.2)::

    score_ij = (q_i + u)^T k_j  +  (q_i + v)^T W_r r(p_i - p_j)  +  (q_i + w)^T s_{[type_i == type_j]}

all divided by sqrt(d_head) (``head_dim``). The content term goes through ``scaled_dot_product_attention`` (queries
``q + u``); the positional and token-type terms, and the padding mask, form one additive float bias passed as
``attn_mask`` (1/sqrt(d_head) is folded into the small kernels ``W_r`` and ``s``, since SDPA only scales ``q k^T``).
``FunnelRelMultiheadAttention.reference_bias`` writes that bias pair by pair as the equations read; the fused one is
tested equal to it. The fused bias is
assembled head-major in one ``baddbmm``: the positional scores as a strided (shifted) view plus a rank-5 product for
the token-type term (rank 2 in (i, j) for types {0, 1, 2}), the [CLS] zeroing and the padding. The positional term
has the two formulations of the official code: ``rel_shift`` (A.2.1: score against every relative distance, then the
Transformer-XL shift, here an ``as_strided`` view) and ``factorized`` (A.2.2: ``r(i-j)`` expanded with sin/cos
addition formulas into query-side ``phi, pi`` and key-side ``psi, omega``). They agree (tested).

Parameter names follow Hugging Face's ``modeling_funnel`` so conversion is a plain state-dict copy; config names are
the project's (``dim``, ``num_heads``, ``head_dim``, ``ffn_dim``, ``attn_dropout``, ``norm_eps``), HF's live in
``hf.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from paperzoo.nn.attention import sdpa
from paperzoo.nn.embedding import check_token_ids
from paperzoo.nn.outputs import BaseModelOutput, ClassifierOutput

__all__ = ["FunnelConfig", "parse_blocks", "FunnelModel", "FunnelBase", "FunnelClassifier", "FunnelEncoder",
           "FunnelDecoder", "pool_tensor", "stride_pool", "pool_positions", "upsample", "relative_position_bias",
           "example_inputs"]

MASK_VALUE = 1e6  # the official code's INF: padded keys get score - 1e6 (finite, so an all-pad row stays finite)
CLS_TYPE_ID = 2  # a token type id that counts as "same segment" as every other token (official code)


def parse_blocks(layout: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``"6-3x2-3x2"`` -> block sizes ``(6, 3, 3)`` and repeats ``(1, 2, 2)`` (``NxR``: N layers, each applied R times
    in a row with shared weights, as Hugging Face / the official PyTorch code do)."""
    if not isinstance(layout, str) or not layout:
        raise ValueError(f"block layout must be a string like '4-4-4' or '6-3x2-3x2', got {layout!r}")
    sizes, repeats = [], []
    for part in layout.split("-"):
        n, _, r = part.partition("x")
        if not n.isdigit() or int(n) < 1 or (r and (not r.isdigit() or int(r) < 1)):
            raise ValueError(f"block layout must be a string like '4-4-4' or '6-3x2-3x2', got {layout!r}")
        sizes.append(int(n))
        repeats.append(int(r) if r else 1)
    return tuple(sizes), tuple(repeats)


@dataclass(frozen=True)
class FunnelConfig:
    """Funnel hyper-parameters. ``blocks`` is the paper's layout string (B6-6-6 -> ``"6-6-6"``)."""

    vocab_size: int = 30522
    blocks: str = "6-6-6"
    dim: int = 768
    num_heads: int = 12
    head_dim: int = 64
    ffn_dim: int = 3072
    num_decoder_layers: int = 2
    activation: str = "gelu_new"  # tanh-approximated GELU (official); "gelu" for the exact one
    dropout: float = 0.1
    attn_dropout: float = 0.1
    activation_dropout: float = 0.0
    norm_eps: float = 1e-9
    pooling: str = "mean"  # "mean" (paper) or "max"
    attention_type: str = "rel_shift"  # or "factorized"
    separate_cls: bool = True
    truncate_seq: bool = True
    pool_q_only: bool = True
    pad_token_id: int | None = None
    num_labels: int = 2

    def __post_init__(self) -> None:
        _check_config(self)

    @property
    def block_sizes(self) -> tuple[int, ...]:
        return parse_blocks(self.blocks)[0]

    @property
    def block_repeats(self) -> tuple[int, ...]:
        return parse_blocks(self.blocks)[1]

    @classmethod
    def preset(cls, name: str, **overrides) -> FunnelConfig:
        """``tiny`` (tests), ``small`` (the laptop reproduction's B2-2-2 at d 128), ``base`` (B6-6-6, the paper's
        base scale), ``large`` (B8-8-8, d 1024)."""
        presets = {
            "tiny": cls(vocab_size=100, blocks="1-1", dim=32, num_heads=2, head_dim=16, ffn_dim=64,
                        num_decoder_layers=1),
            "small": cls(vocab_size=8000, blocks="2-2-2", dim=128, num_heads=2, head_dim=64, ffn_dim=512,
                         pad_token_id=0),
            "base": cls(),
            "large": cls(blocks="8-8-8", dim=1024, num_heads=16, head_dim=64, ffn_dim=4096),
        }
        if name not in presets:
            raise ValueError(f"preset must be one of {sorted(presets)}, got {name!r}")
        return replace(presets[name], **overrides)


# ----------------------------------------------------------------------------------------------------------- pooling

def stride_pool(x: torch.Tensor, separate_cls: bool, truncate_seq: bool) -> torch.Tensor:
    """Keep every second entry along the last axis (token types, masks of indices), [CLS] kept in front.

    ``(..., T) -> (..., T')`` with ``T'`` = :func:`pooled_length`.
    """
    if separate_cls:
        x = torch.cat([x[..., :1], x], dim=-1)
        return x[..., :-1:2] if truncate_seq else x[..., ::2]
    return x[..., ::2]


def pool_tensor(x: torch.Tensor, mode: str, separate_cls: bool, truncate_seq: bool) -> torch.Tensor:
    """Pool (batch, seq, dim) or (batch, seq) with window = stride = 2 (partial last window kept, eq. 5).

    With ``separate_cls`` [CLS] is pooled with itself only (the sequence is ``[CLS, CLS, x_1, ...]``), and
    ``truncate_seq`` drops the last token first so that ``T-1`` content tokens pair up. ``mode``: mean, max, min
    (min pools the attention mask: a pooled slot is valid only if all its tokens are).
    """
    if separate_cls:
        x = torch.cat([x[:, :1], x[:, :-1] if truncate_seq else x], dim=1)
    flat = x.ndim == 2
    h = rearrange(x, "b t -> b 1 t") if flat else rearrange(x, "b t d -> b d t")
    if mode == "mean":
        h = F.avg_pool1d(h, 2, 2, ceil_mode=True)
    elif mode == "max":
        h = F.max_pool1d(h, 2, 2, ceil_mode=True)
    elif mode == "min":
        h = -F.max_pool1d(-h, 2, 2, ceil_mode=True)
    else:
        raise ValueError(f"pooling mode must be 'mean', 'max' or 'min', got {mode!r}")
    return rearrange(h, "b 1 t -> b t") if flat else rearrange(h, "b d t -> b t d")


def pool_positions(pos: list[int], new_stride: int, separate_cls: bool, truncate_seq: bool) -> list[int]:
    """Positions of the pooled tokens: every second one; [CLS] placed one (new) stride before the first content token
    so the positions stay an arithmetic progression (needed by ``rel_shift``; [CLS]'s relative terms are zeroed)."""
    if separate_cls:
        rest = pos[1:-1] if truncate_seq else pos[1:]
        return [1 - new_stride] + rest[::2]
    return pos[::2]


def upsample(x: torch.Tensor, stride: int, target_len: int, separate_cls: bool, truncate_seq: bool) -> torch.Tensor:
    """Decoder upsampling (sec. 2.3): repeat each pooled token ``stride`` times; [CLS] kept alone in front.

    (batch, seq', dim) -> (batch, target_len, dim).
    """
    if stride == 1:
        return x
    if separate_cls:
        cls, x = x[:, :1], x[:, 1:]
    out = torch.repeat_interleave(x, stride, dim=1)
    if separate_cls:
        if truncate_seq:
            out = F.pad(out, (0, 0, 0, stride - 1))
        return torch.cat([cls, out[:, :target_len - 1]], dim=1)
    return out[:, :target_len]


# ------------------------------------------------------------------------------------------------------ attention

@dataclass
class AttentionInputs:
    """What one attention layer needs besides hidden states: query/key positions (arithmetic progressions with steps
    ``q_stride``/``k_stride``), token types (batch, I)/(batch, J), the key padding mask (batch, J) in {0, 1}."""

    q_pos: list[int]
    k_pos: list[int]
    q_stride: int
    k_stride: int
    q_types: torch.Tensor
    k_types: torch.Tensor
    k_mask: torch.Tensor


def _inv_freq(dim: int, device, dtype) -> torch.Tensor:
    half = dim // 2
    return 1.0 / (10000 ** (torch.arange(half, device=device, dtype=dtype) / half))


def _rel_shift_scores(qv: torch.Tensor, r_head: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
    """A.2.1 in head-major layout: ``qv`` (heads, batch, I, head_dim), ``r_head`` (heads, head_dim, R) -> a strided view
    (heads * batch, I, J) of the scores against every distance, shifted so that entry ``[i, j]`` is ``r(p_i - p_j)``.

    The scores ``(heads*batch, I, R)`` come from one ``bmm`` against ``R = shift*I + J`` distances ``max_dist,
    max_dist - k_stride, ...``; row ``i`` needs columns ``t = shift*(I - i) + j``, i.e. flat offset
    ``shift*I + i*(R - shift) + j`` of each (I, R) block: an ``as_strided`` view, no copy (Transformer-XL's shift)."""
    n_h, b, n_q, head_dim = qv.shape
    n_k = len(inputs.k_pos)
    shift = inputs.q_stride // inputs.k_stride
    r = r_head.shape[-1]
    score = torch.bmm(qv.reshape(n_h, b * n_q, head_dim), r_head)  # (N, B*I, R), a fresh contiguous tensor
    return score.as_strided((n_h * b, n_q, n_k), (n_q * r, r - shift, 1), shift * n_q)  # storage offset 0 + shift*I


def _distances(inputs: AttentionInputs, device) -> torch.Tensor:
    n_q = len(inputs.q_pos)
    shift = inputs.q_stride // inputs.k_stride
    max_dist = inputs.q_pos[0] - inputs.k_pos[0] + shift * n_q * inputs.k_stride
    min_dist = inputs.q_pos[0] - inputs.k_pos[-1]
    return torch.arange(max_dist, min_dist - 1, -inputs.k_stride, device=device)  # (R,), R = shift*I + J


def _sinusoid(pos: torch.Tensor, dim: int, dtype) -> torch.Tensor:
    ang = pos.to(dtype)[:, None] * _inv_freq(dim, pos.device, dtype)
    return torch.cat([ang.sin(), ang.cos()], -1)  # (P, dim)


def relative_position_bias(qv: torch.Tensor, r_kernel: torch.Tensor, inputs: AttentionInputs,
                           attention_type: str) -> torch.Tensor:
    """The positional term ``(q_i + v)^T W_r r(p_i - p_j)`` with ``r(d) = [sin(d w), cos(d w)]``, unscaled.

    ``qv``: (batch, I, heads, head_dim) = q + v; ``r_kernel``: (dim, heads, head_dim). Returns (batch, heads, I, J)
    (for ``rel_shift`` a strided view).
    """
    dim = r_kernel.shape[0]
    dev, dt = qv.device, qv.dtype
    if attention_type == "factorized":
        # A.2.2: sin(a-b) = sin a cos b - cos a sin b, cos(a-b) = sin a sin b + cos a cos b
        inv = _inv_freq(dim, dev, dt)
        qa = torch.tensor(inputs.q_pos, device=dev, dtype=dt)[:, None] * inv
        ka = torch.tensor(inputs.k_pos, device=dev, dtype=dt)[:, None] * inv
        phi = torch.cat([qa.sin(), qa.sin()], -1)  # (I, D)
        pi = torch.cat([qa.cos(), qa.cos()], -1)
        psi = torch.cat([ka.cos(), ka.sin()], -1)  # (J, D)
        omega = torch.cat([-ka.sin(), ka.cos()], -1)
        qw = torch.einsum("binh,dnh->bind", qv, r_kernel)  # (B, I, N, D)
        return (torch.einsum("bind,jd->bnij", qw * phi[:, None], psi)
                + torch.einsum("bind,jd->bnij", qw * pi[:, None], omega))
    r_head = torch.einsum("td,dnh->nht", _sinusoid(_distances(inputs, dev), dim, dt), r_kernel)
    b, n_q, n_h, _ = qv.shape
    out = _rel_shift_scores(rearrange(qv, "b i n h -> n b i h"), r_head, inputs)
    return rearrange(out, "(n b) i j -> b n i j", n=n_h)


class FunnelRelMultiheadAttention(nn.Module):
    """Relative multi-head attention with the token-type term; post-norm residual on the (possibly pooled) query."""

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.config = cfg
        d, n, h = cfg.dim, cfg.num_heads, cfg.head_dim
        self.q_head = nn.Linear(d, n * h, bias=False)
        self.k_head = nn.Linear(d, n * h)
        self.v_head = nn.Linear(d, n * h)
        self.r_w_bias = nn.Parameter(torch.zeros(n, h))  # u: content bias
        self.r_r_bias = nn.Parameter(torch.zeros(n, h))  # v: position bias
        self.r_kernel = nn.Parameter(torch.zeros(d, n, h))  # W_r
        self.r_s_bias = nn.Parameter(torch.zeros(n, h))  # w: segment bias
        self.seg_embed = nn.Parameter(torch.zeros(2, n, h))  # s_0 (different segment), s_1 (same segment)
        self.post_proj = nn.Linear(n * h, d)
        self.layer_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, query: torch.Tensor, kv: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        """``query`` (batch, I, dim), ``kv`` (batch, J, dim) -> (batch, I, dim): ``LayerNorm(query + S-Attn)``.

        ``score_ij = [(q_i + u)^T k_j + (q_i + v)^T W_r r(p_i - p_j) + (q_i + w)^T s_ij] / sqrt(d_head)``: the content
        term inside SDPA, the other two (and the padding) as its additive mask, :meth:`bias`.
        """
        n = self.config.num_heads
        q = rearrange(self.q_head(query), "b i (n h) -> b i n h", n=n)  # (B, I, N, H)
        k = rearrange(self.k_head(kv), "b j (n h) -> b n j h", n=n)  # (B, N, J, H)
        v = rearrange(self.v_head(kv), "b j (n h) -> b n j h", n=n)
        mask = self.bias(q, inputs)  # positional + token-type terms + padding, (B, N, I, J)
        out = sdpa(rearrange(q + self.r_w_bias, "b i n h -> b n i h"), k, v, attn_mask=mask,
                   dropout_p=self.config.attn_dropout if self.training else 0.0)
        out = self.dropout(self.post_proj(rearrange(out, "b n i h -> b i (n h)")))
        return self.layer_norm(query + out)  # post-norm residual on the (pooled) query

    def bias(self, q: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        """Additive SDPA mask (batch, heads, I, J): scaled positional + token-type terms and the padding mask.

        Built head-major, (heads * batch, I, J), in one ``baddbmm``: the positional scores (a strided view) plus a
        rank-5 product that adds the token-type term, removes [CLS]'s relations and adds the padding mask. The
        token-type term is rank 2 in (i, j): with ``s_c = (q_i + w)^T s_c`` and token types in {0, 1, 2} (2 =
        same as everything), ``seg_ij = s_1 - (s_1 - s_0) ([t_i=0][t_j=1] + [t_i=1][t_j=0])``. Returned as a
        (batch, heads, I, J) view for SDPA. ``1/sqrt(d_head)`` scales the small kernels, not the (I, J) terms.
        Equal to :meth:`reference_bias`, the equations written pair by pair (tested).
        """
        cfg = self.config
        n_h = cfg.num_heads
        b, n_q = q.shape[:2]
        n_k = inputs.k_mask.shape[1]
        dev, dt = q.device, q.dtype
        scale = 1.0 / math.sqrt(cfg.head_dim)
        sep = cfg.separate_cls
        qn = rearrange(q, "b i n h -> n b i h")
        keep_q = torch.ones(n_q, device=dev, dtype=dt)
        keep_k = torch.ones(n_k, device=dev, dtype=dt)
        if sep:  # [CLS] has no position/segment relation to anything (official cls_mask)
            keep_q[0] = 0
            keep_k[0] = 0
        qv = qn + self.r_r_bias[:, None, None]  # (N, B, I, H)
        if sep:
            qv = qv * keep_q[:, None]  # zeroes the positional term's [CLS] row
        r_kernel = self.r_kernel * scale
        if cfg.attention_type == "factorized":
            pos = relative_position_bias(rearrange(qv, "n b i h -> b i n h"), r_kernel, inputs, "factorized")
            pos = rearrange(pos, "b n i j -> (n b) i j")
        else:
            r_head = torch.einsum("td,dnh->nht", _sinusoid(_distances(inputs, dev), cfg.dim, dt), r_kernel)
            pos = _rel_shift_scores(qv, r_head, inputs)  # (N*B, I, J) strided view
        s_kernel = (self.seg_embed * scale).permute(1, 2, 0)[:, None]  # (N, 1, H, 2)
        seg = torch.matmul(qn + self.r_s_bias[:, None, None], s_kernel)  # (N, B, I, 2)
        s1, diff = seg[..., 1], seg[..., 1] - seg[..., 0]
        qt, kt = inputs.q_types, inputs.k_types
        q0, q1 = (qt == 0).to(dt) * keep_q, (qt == 1).to(dt) * keep_q  # (B, I)
        k0, k1 = (kt == 0).to(dt) * keep_k, (kt == 1).to(dt) * keep_k  # (B, J)
        neg_pad = (inputs.k_mask.to(dt) - 1.0) * MASK_VALUE  # (B, J)
        first = torch.zeros(n_k, device=dev, dtype=dt)
        first[0] = 1.0
        cols = [s1 * keep_q, -diff * q0, -diff * q1, torch.ones_like(s1)]  # (N, B, I) each
        rows = [keep_k.expand(b, n_k), k1, k0, neg_pad]  # (B, J) each
        if sep:  # remove the positional term's [CLS] column
            cols.append(-pos[:, :, 0].reshape(n_h, b, n_q))
            rows.append(first.expand(b, n_k))
        a = torch.stack(cols, -1).reshape(n_h * b, n_q, len(cols))
        rk = torch.stack(rows, 1).expand(n_h, b, len(rows), n_k).reshape(n_h * b, len(rows), n_k)
        out = torch.baddbmm(pos, a, rk)  # (N*B, I, J)
        return rearrange(out, "(n b) i j -> b n i j", n=n_h)

    def reference_bias(self, q: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        """What :meth:`bias` computes, written as the paper's equations (appendix A.2), pair by pair; for reading and
        tests (it materialises a (batch, I, J, heads, d_head) tensor).

        ``bias_ij = [(q_i + v)^T W_r r(p_i - p_j) + (q_i + w)^T s_[t_i ~ t_j]] / sqrt(d_head)``, zero in [CLS]'s row and
        column, ``-1e6`` at padded keys; ``r(d) = [sin(d w_k), cos(d w_k)]``, and ``t_i ~ t_j`` when the token types
        are equal or either is 2. ``q``: (batch, I, heads, d_head) -> (batch, heads, I, J).
        """
        cfg = self.config
        dist = torch.tensor(inputs.q_pos, device=q.device)[:, None] - torch.tensor(inputs.k_pos, device=q.device)
        r = _sinusoid(dist.flatten(), cfg.dim, q.dtype).view(*dist.shape, cfg.dim)  # (I, J, D): r(p_i - p_j)
        pos = torch.einsum("binh,dnh,ijd->bnij", q + self.r_r_bias, self.r_kernel, r)  # (q_i + v)^T W_r r(p_i - p_j)
        qt, kt = inputs.q_types[:, :, None], inputs.k_types[:, None]  # (B, I, 1), (B, 1, J)
        same = (qt == kt) | (qt == CLS_TYPE_ID) | (kt == CLS_TYPE_ID)  # (B, I, J)
        s = self.seg_embed[same.long()]  # (B, I, J, N, H): s_1 (same segment) or s_0 (different)
        seg = torch.einsum("binh,bijnh->bnij", q + self.r_s_bias, s)  # (q_i + w)^T s_[t_i ~ t_j]
        rel = (pos + seg) / math.sqrt(cfg.head_dim)
        if cfg.separate_cls:  # [CLS] has no positional or segment relation to anything
            keep_q = (torch.arange(rel.shape[2], device=q.device) > 0).to(rel.dtype)
            keep_k = (torch.arange(rel.shape[3], device=q.device) > 0).to(rel.dtype)
            rel = rel * keep_q[:, None] * keep_k
        return rel + ((inputs.k_mask.to(rel.dtype) - 1.0) * MASK_VALUE)[:, None, None, :]

class FunnelPositionwiseFFN(nn.Module):
    """``LayerNorm(h + W_2 act(W_1 h))``."""

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(cfg.dim, cfg.ffn_dim)
        self.linear_2 = nn.Linear(cfg.ffn_dim, cfg.dim)
        self.layer_norm = nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
        self.activation_dropout = nn.Dropout(cfg.activation_dropout)
        self.dropout = nn.Dropout(cfg.dropout)
        self.act = {"gelu_new": lambda x: F.gelu(x, approximate="tanh"), "gelu": F.gelu, "relu": F.relu}[cfg.activation]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        y = self.linear_2(self.activation_dropout(self.act(self.linear_1(h))))
        return self.layer_norm(h + self.dropout(y))


class FunnelLayer(nn.Module):
    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.attention = FunnelRelMultiheadAttention(cfg)
        self.ffn = FunnelPositionwiseFFN(cfg)

    def forward(self, query: torch.Tensor, kv: torch.Tensor, inputs: AttentionInputs) -> torch.Tensor:
        return self.ffn(self.attention(query, kv, inputs))


class FunnelEmbeddings(nn.Module):
    """Word embeddings + LayerNorm + dropout; no absolute positions (they are relative, in attention)."""

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=cfg.pad_token_id)
        self.layer_norm = nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        check_token_ids(input_ids, self.word_embeddings.num_embeddings)
        return self.dropout(self.layer_norm(self.word_embeddings(input_ids)))


class FunnelEncoder(nn.Module):
    """The funnel: blocks of layers, pooling at the start of every block after the first."""

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.blocks = nn.ModuleList(nn.ModuleList(FunnelLayer(cfg) for _ in range(n)) for n in cfg.block_sizes)

    def forward(self, h: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor,
                output_hidden_states: bool = False) -> tuple[torch.Tensor, torch.Tensor, int, tuple[torch.Tensor, ...]]:
        """(batch, T, d) -> (last (batch, T', d), first block's output (batch, T, d), total stride, hidden states)."""
        cfg = self.config
        sep, trunc = cfg.separate_cls, cfg.truncate_seq
        pos, stride = list(range(h.shape[1])), 1
        types, mask = token_type_ids, attention_mask.to(h.dtype)
        states = (h,) if output_hidden_states else ()
        first = h
        for b, block in enumerate(self.blocks):
            pool = b > 0 and h.shape[1] > (2 if sep else 1)
            for li, layer in enumerate(block):
                for r in range(cfg.block_repeats[b]):
                    if pool and li == 0 and r == 0:
                        q = pool_tensor(h, cfg.pooling, sep, trunc)
                        q_pos = pool_positions(pos, 2 * stride, sep, trunc)
                        q_types = stride_pool(types, sep, trunc)
                        q_mask = pool_tensor(mask, "min", sep, trunc)
                        if cfg.pool_q_only:  # eq. 5: pooled queries, full-length keys/values
                            inputs = AttentionInputs(q_pos, pos, 2 * stride, stride, q_types, types, mask)
                            h = layer(q, h, inputs)
                        else:
                            inputs = AttentionInputs(q_pos, q_pos, 2 * stride, 2 * stride, q_types, q_types, q_mask)
                            h = layer(q, q, inputs)
                        pos, stride, types, mask = q_pos, 2 * stride, q_types, q_mask
                    else:
                        h = layer(h, h, AttentionInputs(pos, pos, stride, stride, types, types, mask))
                    if output_hidden_states:
                        states += (h,)
            if b == 0:
                first = h
        return h, first, stride, states


class FunnelDecoder(nn.Module):
    """Upsample (repeat, [CLS] separate), add the first block's output, then full-length layers (sec. 2.3)."""

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.layers = nn.ModuleList(FunnelLayer(cfg) for _ in range(cfg.num_decoder_layers))

    def forward(self, last: torch.Tensor, first: torch.Tensor, stride: int, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """``last`` (batch, T', d), ``first`` (batch, T, d) -> (batch, T, d) and each layer's output."""
        h = upsample(last, stride, first.shape[1], self.config.separate_cls, self.config.truncate_seq) + first
        pos = list(range(h.shape[1]))
        inputs = AttentionInputs(pos, pos, 1, 1, token_type_ids, token_type_ids, attention_mask.to(h.dtype))
        states = (h,)
        for layer in self.layers:
            h = layer(h, h, inputs)
            states += (h,)
        return h, states


def init_weights(module: nn.Module, initializer_range: float = 0.1) -> None:
    """Official init: Linear ~ N(0, 1/(fan_in+fan_out)), biases 0; relative-attention vectors ~ U(0, 0.1);
    word embeddings ~ N(0, 1)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=math.sqrt(1.0 / (m.in_features + m.out_features)))
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, FunnelRelMultiheadAttention):
            for p in (m.r_w_bias, m.r_r_bias, m.r_kernel, m.r_s_bias, m.seg_embed):
                nn.init.uniform_(p, 0.0, initializer_range)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=1.0)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()


class FunnelBase(nn.Module):
    """Embeddings + the funnel encoder, no decoder (sequence-level tasks). Output: (batch, T', dim)."""

    hf_class = "FunnelBaseModel"
    config_class = FunnelConfig

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = FunnelEmbeddings(cfg)
        self.encoder = FunnelEncoder(cfg)
        init_weights(self)

    @staticmethod
    def example_inputs(cfg: FunnelConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return example_inputs(cfg, batch)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False) -> BaseModelOutput:
        input_ids, attention_mask, token_type_ids = _check_inputs(input_ids, attention_mask, token_type_ids)
        h, _, _, states = self.encoder(self.embeddings(input_ids), attention_mask, token_type_ids,
                                       output_hidden_states)
        return BaseModelOutput(last_hidden_state=h, hidden_states=states or None)


class FunnelModel(nn.Module):
    """Embeddings + encoder + decoder: full-length output (batch, T, dim) for token-level objectives."""

    hf_class = "FunnelModel"
    config_class = FunnelConfig

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = FunnelEmbeddings(cfg)
        self.encoder = FunnelEncoder(cfg)
        self.decoder = FunnelDecoder(cfg)
        init_weights(self)

    @staticmethod
    def example_inputs(cfg: FunnelConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return example_inputs(cfg, batch)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, output_hidden_states: bool = False) -> BaseModelOutput:
        input_ids, attention_mask, token_type_ids = _check_inputs(input_ids, attention_mask, token_type_ids)
        last, first, stride, enc_states = self.encoder(self.embeddings(input_ids), attention_mask, token_type_ids,
                                                       output_hidden_states)
        h, dec_states = self.decoder(last, first, stride, attention_mask, token_type_ids)
        return BaseModelOutput(last_hidden_state=h,
                               hidden_states=enc_states + dec_states if output_hidden_states else None)


class FunnelClassificationHead(nn.Module):
    """``W_o dropout(tanh(W_h h))``: (batch, dim) -> (batch, num_labels)."""

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.linear_hidden = nn.Linear(cfg.dim, cfg.dim)
        self.dropout = nn.Dropout(cfg.dropout)
        self.linear_out = nn.Linear(cfg.dim, cfg.num_labels)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.linear_out(self.dropout(torch.tanh(self.linear_hidden(h))))


class FunnelClassifier(nn.Module):
    """:class:`FunnelBase` + head on the pooled [CLS]: ``W_o tanh(W_h h_cls)`` -> (batch, num_labels)."""

    hf_class = "FunnelForSequenceClassification"
    config_class = FunnelConfig

    def __init__(self, cfg: FunnelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.funnel = FunnelBase(cfg)
        self.classifier = FunnelClassificationHead(cfg)
        init_weights(self.classifier)

    @staticmethod
    def example_inputs(cfg: FunnelConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return example_inputs(cfg, batch)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> ClassifierOutput:
        h = self.funnel(input_ids, attention_mask, token_type_ids).last_hidden_state[:, 0]
        logits = self.classifier(h)
        loss = None
        if labels is not None:
            _check_labels(labels, logits)
            loss = (F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype)) if self.config.num_labels == 1
                    else F.cross_entropy(logits, labels))
        return ClassifierOutput(loss=loss, logits=logits)


def example_inputs(cfg: FunnelConfig, batch: int = 2, seq: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    """Keyword inputs for any of the models: ``input_ids`` ([CLS] = 2 first), an ``attention_mask`` with the last
    row padded, ``token_type_ids`` with two segments and [CLS] of type 2; all (batch, seq)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, cfg.vocab_size, (batch, seq), generator=g)
    ids[:, 0] = 2
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[-1, seq - 3:] = 0
    types = (torch.arange(seq) >= seq // 2).long().expand(batch, seq).clone()
    types[:, 0] = CLS_TYPE_ID
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


# -------------------------------------------------------------------------------------------------------- checks

def _check_config(cfg: FunnelConfig) -> None:
    parse_blocks(cfg.blocks)
    if cfg.pooling not in ("mean", "max"):
        raise ValueError(f"pooling must be 'mean' or 'max', got {cfg.pooling!r}")
    if cfg.attention_type not in ("rel_shift", "factorized"):
        raise ValueError(f"attention_type must be 'rel_shift' or 'factorized', got {cfg.attention_type!r}")
    if cfg.activation not in ("gelu_new", "gelu", "relu"):
        raise ValueError(f"activation must be 'gelu_new', 'gelu' or 'relu', got {cfg.activation!r}")
    if cfg.dim % 2:
        raise ValueError(f"dim must be even (sin/cos halves), got {cfg.dim}")


def _check_inputs(input_ids, attention_mask, token_type_ids) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.dtype not in (torch.long,
                                                                                                 torch.int):
        raise ValueError("input_ids must be an integer tensor of shape (batch, seq), got "
                         f"{getattr(input_ids, 'shape', type(input_ids))}")
    if input_ids.shape[1] < 1:
        raise ValueError("input_ids must have seq >= 1")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    for name, t in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if t.shape != input_ids.shape:
            raise ValueError(f"{name} must have shape {tuple(input_ids.shape)} (batch, seq), got {tuple(t.shape)}")
    if token_type_ids.device.type != "meta" and token_type_ids.numel() and not torch.compiler.is_compiling() and (
            int(token_type_ids.min()) < 0 or int(token_type_ids.max()) > CLS_TYPE_ID):  # (a value check: eager only)
        raise ValueError("token_type_ids must be 0, 1 or 2 (2: same segment as everything, Funnel's [CLS] type), "
                         f"got values in [{int(token_type_ids.min())}, {int(token_type_ids.max())}]")
    return input_ids, attention_mask, token_type_ids


def _check_labels(labels: torch.Tensor, logits: torch.Tensor) -> None:
    if labels.shape != logits.shape[:1]:
        raise ValueError(f"labels must have shape ({logits.shape[0]},), got {tuple(labels.shape)}")
