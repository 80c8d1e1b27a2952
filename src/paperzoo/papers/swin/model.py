"""Swin Transformer (Liu et al., 2021, arXiv:2103.14030): shifted-window attention on a hierarchical backbone.

An image is cut into ``patch_size`` patches and embedded linearly (sec. 3.1). Each stage is a stack of blocks
that alternate regular windows (W-MSA) and windows shifted by ``M // 2`` (SW-MSA), eq. (3)::

    z' = x + DropPath(W-MSA(LN(x)));   x = z' + DropPath(MLP(LN(z')))

Self-attention runs inside non-overlapping ``M x M`` windows with a learned relative position bias, eq. (4)::

    Attention(Q, K, V) = SoftMax(Q K^T / sqrt(d) + B) V,   B = B_hat[dy + M - 1, dx + M - 1]

from a table ``B_hat`` of ``(2M - 1)^2 x heads``. Shifted windows are a cyclic shift by ``-M // 2`` and a mask
between tokens that came from different regions (sec. 3.2, Fig. 4). Patch merging concatenates 2x2 neighbours
(4C), normalises and projects to 2C between stages, so feature maps have strides 4, 8, 16, 32.

Any input size from the total stride ``patch_size * 2^(stages - 1)`` up (:attr:`SwinConfig.total_stride`; below it
the last stages hold no token made of real pixels): the map of a block is padded to a multiple of the window and,
by default, the padded tokens are
masked so that they never attend to real tokens nor are attended to (``mask_padding=True``). Hugging Face and
the official code pad with zeros without masking; ``mask_padding=False`` reproduces that (used for parity).
When a stage's map is not larger than the window (``min(H, W) <= M``), the window shrinks to ``min(H, W)`` and
the shift is dropped, as in the official code; the smaller window reads the centre of the same bias table.
Masks are cached per (map size, window, shift, device, dtype); the bias is one additive float mask per window
passed to ``scaled_dot_product_attention`` and broadcast over the batch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from paperzoo.nn.attention import sdpa
from paperzoo.nn.ffn import FeedForward
from paperzoo.nn.outputs import BaseModelOutput, ClassifierOutput
from paperzoo.nn.transformer import DropPath

__all__ = ["SwinConfig", "SwinModel", "SwinForImageClassification", "SwinStage", "WindowAttention", "SwinBlock",
           "PatchMerging", "window_partition", "window_reverse", "relative_position_index", "shift_window_mask",
           "interpolate_bias_table", "swin_flops"]


@dataclass(frozen=True)
class SwinConfig:
    """Swin hyper-parameters (paper Table 7 / sec. 3.3). ``image_size`` only sizes the absolute position
    embedding (``ape``) and the reference FLOP count; the model accepts any input size of at least
    :attr:`total_stride` (32 for the paper's models).

    ``dim`` is the width C of the first stage (stage i has ``C * 2^i``); ``dropout`` applies to the embedding
    and to both branches of every block, ``attn_dropout`` to the attention weights, ``drop_path_rate`` is the
    stochastic-depth rate of the last block (growing linearly from 0). ``mask_padding``: mask window padding (ours,
    default) or pad with zeros and attend to it (official, HF).
    """

    image_size: int = 224
    patch_size: int = 4
    in_channels: int = 3
    dim: int = 96
    depths: tuple[int, ...] = (2, 2, 6, 2)
    num_heads: tuple[int, ...] = (3, 6, 12, 24)
    window_size: int = 7
    mlp_ratio: float = 4.0
    qkv_bias: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    drop_path_rate: float = 0.1
    ape: bool = False
    norm_eps: float = 1e-5
    num_classes: int = 1000
    mask_padding: bool = True

    def __post_init__(self):
        _check_config(self)

    @property
    def total_stride(self) -> int:
        """``patch_size * 2^(stages - 1)``: the pixels per side of one last-stage token, and the smallest input side.
        Below it a patch merging concatenates zero padding into a 1x1 map, so the last stage has no token made of
        real pixels (the window shrinks with the map and sets no minimum, as in the official code)."""
        return self.patch_size * 2 ** (len(self.depths) - 1)

    @property
    def num_features(self) -> int:
        """Width of the last stage, ``dim * 2^(stages - 1)``."""
        return self.dim * 2 ** (len(self.depths) - 1)

    @classmethod
    def preset(cls, name: str, **overrides) -> SwinConfig:
        """``tiny`` (CPU tests), ``small`` (the CIFAR-10 reproduction: 32x32 images, patch 2, window 4),
        ``swin-t``/``-s``/``-b`` (the paper's sizes)."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return cls(**{**PRESETS[name], **overrides})


PRESETS: dict[str, dict] = {  # SwinConfig fields of each preset
    "tiny": dict(image_size=32, patch_size=2, dim=32, depths=(2, 2), num_heads=(2, 4), window_size=4,
                 drop_path_rate=0.0, num_classes=10),
    # 1.33M parameters, 106M MACs at 32x32: matched to ViTConfig.preset("small")
    "small": dict(image_size=32, patch_size=2, dim=64, depths=(2, 6), num_heads=(2, 4), window_size=4,
                  drop_path_rate=0.1, num_classes=10),
    "swin-t": dict(dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), drop_path_rate=0.2),
    "swin-s": dict(dim=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24), drop_path_rate=0.3),
    "swin-b": dict(dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32), drop_path_rate=0.5),
}


# ----------------------------------------------------------------------------------------------- window helpers


def window_partition(x: Tensor, m: int) -> Tensor:
    """``(B, H, W, C) -> (B, nW, m*m, C)`` with ``nW = (H/m)(W/m)`` windows in row-major order."""
    return rearrange(x, "b (nh m1) (nw m2) c -> b (nh nw) (m1 m2) c", m1=m, m2=m)


def window_reverse(x: Tensor, m: int, h: int, w: int) -> Tensor:
    """Inverse of :func:`window_partition`: ``(B, nW, m*m, C) -> (B, H, W, C)``."""
    return rearrange(x, "b (nh nw) (m1 m2) c -> b (nh m1) (nw m2) c", nh=h // m, m1=m)


def relative_position_index(m: int, table_window: int | None = None, device=None) -> Tensor:
    """``(m*m, m*m)`` indices into a ``(2M-1)^2`` bias table: ``(dy + M - 1) * (2M - 1) + dx + M - 1`` (eq. 4).

    ``table_window`` (M, default m) lets a shrunken window ``m < M`` read the centre of a larger table.
    """
    big = table_window or m
    ys, xs = torch.meshgrid(torch.arange(m, device=device), torch.arange(m, device=device), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()
    dy, dx = ys[:, None] - ys[None, :], xs[:, None] - xs[None, :]
    return (dy + big - 1) * (2 * big - 1) + dx + big - 1


def shift_window_mask(h: int, w: int, m: int, shift: int, mask_padding: bool, device=None,
                      dtype: torch.dtype = torch.float32) -> Tensor | None:
    """Additive mask ``(nW, m*m, m*m)`` (0 or -inf) for a map of ``h x w`` real tokens padded to multiples of m.

    Each padded-and-rolled position gets a label: its shift region (3 per axis, Fig. 4) and, with
    ``mask_padding``, whether it is padding; tokens attend only to tokens with the same label. Every token
    keeps itself, so no row is fully masked. ``None`` when neither shift nor masked padding applies.
    """
    hp, wp = math.ceil(h / m) * m, math.ceil(w / m) * m
    padded = mask_padding and (hp, wp) != (h, w)
    if shift == 0 and not padded:
        return None
    ys, xs = torch.arange(hp, device=device), torch.arange(wp, device=device)
    if shift:  # region of each rolled position: [0, P-m), [P-m, P-s), [P-s, P)
        ry = (ys >= hp - m).long() + (ys >= hp - shift).long()
        rx = (xs >= wp - m).long() + (xs >= wp - shift).long()
        label = ry[:, None] * 3 + rx[None, :]
    else:
        label = torch.zeros(hp, wp, dtype=torch.long, device=device)
    if padded:
        pad = (ys[:, None] >= h) | (xs[None, :] >= w)  # in the original frame; roll it like the features
        label = label * 2 + torch.roll(pad, (-shift, -shift), (0, 1)).long()
    label = rearrange(label, "(nh m1) (nw m2) -> (nh nw) (m1 m2)", m1=m, m2=m)
    same = label[:, :, None] == label[:, None, :]
    return torch.zeros(same.shape, device=device, dtype=dtype).masked_fill_(~same, float("-inf"))


def interpolate_bias_table(table: Tensor, new_window: int) -> Tensor:
    """Bicubic resize of a ``((2M-1)^2, heads)`` bias table to ``((2M'-1)^2, heads)`` for a new window M'
    (as the paper's fine-tuning at 384^2, sec. 3.3)."""
    if table.ndim != 2:
        raise ValueError(f"expected a bias table ((2M-1)^2, heads), got shape {tuple(table.shape)}")
    side = math.isqrt(table.shape[0])
    if side * side != table.shape[0]:
        raise ValueError(f"bias table rows must be a square (2M-1)^2, got {table.shape[0]}")
    new_side = 2 * new_window - 1
    if new_side == side:
        return table.clone()
    grid = rearrange(table, "(a b) h -> 1 h a b", a=side)
    grid = F.interpolate(grid.float(), size=(new_side, new_side), mode="bicubic", align_corners=False)
    return rearrange(grid, "1 h a b -> (a b) h").to(table.dtype)


# ---------------------------------------------------------------------------------------------------- modules


class WindowAttention(nn.Module):
    """Multi-head self-attention inside windows with a relative position bias (eq. 4).

    ``(B, nW, N, C) -> (B, nW, N, C)`` for ``N = m*m`` tokens per window; ``mask`` ``(nW, N, N)`` or None.
    q, k, v come from one fused projection; the bias plus mask is one additive float mask
    ``(nW or 1, heads, N, N)`` that ``scaled_dot_product_attention`` broadcasts over the batch.
    """

    def __init__(self, dim: int, num_heads: int, window_size: int, qkv_bias: bool = True, attn_drop: float = 0.0):
        super().__init__()
        self.dim, self.num_heads, self.window_size, self.attn_drop = dim, num_heads, window_size, attn_drop
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window_size - 1) ** 2, num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self._index: dict[tuple[int, torch.device], Tensor] = {}

    def bias(self, m: int) -> Tensor:
        """The relative position bias ``(heads, m*m, m*m)`` for a window of side ``m <= M``."""
        dev = self.relative_position_bias_table.device
        if (m, dev) not in self._index:
            self._index[(m, dev)] = relative_position_index(m, self.window_size, dev).flatten()
        b = self.relative_position_bias_table[self._index[(m, dev)]]
        return rearrange(b, "(i j) h -> h i j", i=m * m)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        b, nw, n, _ = x.shape
        # (B*nW, heads, N, d) strided views of one projection: 4-D inputs reach the fused SDPA kernels
        q, k, v = rearrange(self.qkv(x), "b w n (t h d) -> t (b w) h n d", t=3, h=self.num_heads)
        bias = self.bias(math.isqrt(n)).to(q.dtype)
        if mask is None:
            attn_mask = bias[None]
        else:  # one mask per window, repeated over the batch, plus the bias, in one op: (B*nW, heads, N, N)
            attn_mask = torch.add(mask[None, :, None].expand(b, -1, -1, -1, -1), bias).view(b * nw, -1, n, n)
        o = sdpa(q, k, v, attn_mask=attn_mask, dropout_p=self.attn_drop if self.training else 0.0)
        return self.proj(rearrange(o, "(b w) h n d -> b w n (h d)", b=b))


class SwinBlock(nn.Module):
    """One Swin block (eq. 3) on a ``(B, H, W, C)`` map; ``shift`` is 0 (W-MSA) or ``M // 2`` (SW-MSA)."""

    def __init__(self, cfg: SwinConfig, dim: int, num_heads: int, shift: int, drop_path: float):
        super().__init__()
        self.window_size, self.shift = cfg.window_size, shift
        self.norm1 = nn.LayerNorm(dim, eps=cfg.norm_eps)
        self.attn = WindowAttention(dim, num_heads, cfg.window_size, cfg.qkv_bias, cfg.attn_dropout)
        self.norm2 = nn.LayerNorm(dim, eps=cfg.norm_eps)
        self.mlp = FeedForward(dim, int(dim * cfg.mlp_ratio), activation="gelu")
        self.drop = nn.Dropout(cfg.dropout)
        self.drop_path = DropPath(drop_path)

    def window_and_shift(self, h: int, w: int) -> tuple[int, int]:
        """Window side and shift for an ``h x w`` map: shrink and drop the shift when ``min(h, w) <= M``."""
        if min(h, w) <= self.window_size:
            return min(h, w), 0
        return self.window_size, self.shift

    def attention(self, y: Tensor, masks: MaskCache) -> Tensor:
        """(S)W-MSA on a normalised map ``(B, H, W, C)``: pad, cyclic shift, windows, attend, undo.

        The cyclic shift and the window partition are one gather by a cached permutation (and its inverse on
        the way back); ``torch.roll`` copies once per axis and is several times slower than a gather on CPU.
        """
        b, h, w, c = y.shape
        m, s = self.window_and_shift(h, w)
        hp, wp = math.ceil(h / m) * m, math.ceil(w / m) * m
        if (hp, wp) != (h, w):
            y = F.pad(y, (0, 0, 0, wp - w, 0, hp - h))
        mask = masks.get(h, w, m, s, y.device, y.dtype)
        if s:
            order, inverse = masks.shift_order(hp, wp, m, s, y.device)
            windows = _Permute.apply(y.reshape(b, hp * wp, c), order, inverse)
            out = self.attn(windows.view(b, -1, m * m, c), mask)
            y = _Permute.apply(out.reshape(b, hp * wp, c), inverse, order).view(b, hp, wp, c)
        else:
            y = window_reverse(self.attn(window_partition(y, m), mask), m, hp, wp)
        return y[:, :h, :w] if (hp, wp) != (h, w) else y

    def forward(self, x: Tensor, masks: MaskCache) -> Tensor:
        x = x + self.drop_path(self.drop(self.attention(self.norm1(x), masks)))  # z' = x + (S)W-MSA(LN(x))
        return x + self.drop_path(self.drop(self.mlp(self.norm2(x))))  # x = z' + MLP(LN(z'))   (eq. 3)


class MaskCache:
    """Shift/padding masks keyed by (h, w, window, shift, mask_padding, device, dtype); built once, reused."""

    def __init__(self, mask_padding: bool = True):
        self.mask_padding = mask_padding
        self._masks: dict[tuple, Tensor | None] = {}

    def get(self, h: int, w: int, m: int, s: int, device, dtype) -> Tensor | None:
        key = (h, w, m, s, self.mask_padding, device, dtype)
        if key not in self._masks:
            self._masks[key] = shift_window_mask(h, w, m, s, self.mask_padding, device, dtype)
        return self._masks[key]

    def shift_order(self, hp: int, wp: int, m: int, s: int, device) -> tuple[Tensor, Tensor]:
        """``order``: for each position of the shifted, windowed sequence, its index in the row-major
        ``hp x wp`` map (roll by ``-s`` then :func:`window_partition`); ``inverse``: the inverse permutation."""
        key = ("order", hp, wp, m, s, device)
        if key not in self._masks:
            grid = torch.roll(torch.arange(hp * wp, device=device).view(hp, wp), (-s, -s), (0, 1))
            order = rearrange(grid, "(nh m1) (nw m2) -> (nh nw m1 m2)", m1=m, m2=m)
            self._masks[key] = (order, torch.argsort(order))
        return self._masks[key]

    def __len__(self) -> int:
        return len(self._masks)


class _Permute(torch.autograd.Function):
    """``x[:, order]`` for a permutation ``order`` of dim 1; the backward is the gather by ``inverse`` (no scatter)."""

    @staticmethod
    def forward(ctx, x: Tensor, order: Tensor, inverse: Tensor) -> Tensor:
        ctx.save_for_backward(inverse)
        return x.index_select(1, order)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(1, inverse), None, None


class PatchMerging(nn.Module):
    """``(B, H, W, C) -> (B, ceil(H/2), ceil(W/2), 2C)``: concatenate 2x2 neighbours (odd sizes zero-padded),
    LayerNorm(4C), linear 4C -> 2C without bias (sec. 3.1). Channel order x[0::2,0::2], x[1::2,0::2],
    x[0::2,1::2], x[1::2,1::2] as the official code."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim, eps=eps)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        _, h, w, _ = x.shape
        if h % 2 or w % 2:
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        x = rearrange(x, "b (h i) (w j) c -> b h w (j i c)", i=2, j=2)
        return self.reduction(self.norm(x))


class SwinStage(nn.Module):
    """One stage of Fig. 3(a): patch merging (every stage but the first), then ``depth`` blocks alternating
    W-MSA and SW-MSA. ``(B, H, W, C_in) -> (B, H', W', dim)`` with ``H' = ceil(H/2)``, ``dim = 2 C_in`` after a
    merge; the first stage keeps its input map (the linear embedding precedes it in :class:`SwinModel`)."""

    def __init__(self, cfg: SwinConfig, dim: int, depth: int, num_heads: int, drop_paths: list[float],
                 merge: bool):
        super().__init__()
        self.patch_merging = PatchMerging(dim // 2, cfg.norm_eps) if merge else None
        self.blocks = nn.ModuleList(SwinBlock(cfg, dim, num_heads, 0 if i % 2 == 0 else cfg.window_size // 2,
                                              drop_paths[i]) for i in range(depth))

    def forward(self, x: Tensor, masks: MaskCache) -> Tensor:
        if self.patch_merging is not None:
            x = self.patch_merging(x)  # (B, H, W, C) -> (B, H/2, W/2, 2C)
        for block in self.blocks:  # W-MSA, SW-MSA, W-MSA, ...
            x = block(x, masks)
        return x


@dataclass
class SwinModelOutput(BaseModelOutput):
    """:class:`BaseModelOutput` plus HF Swin's ``reshaped_hidden_states``: the ``hidden_states`` as ``(B, C, H, W)``."""

    reshaped_hidden_states: tuple[Tensor, ...] | None = None


class SwinModel(nn.Module):
    """Swin backbone. ``pixel_values (B, C_in, H, W)`` of any size ``>= config.total_stride``, in the model's dtype ->
    ``last_hidden_state (B, ceil(H/32) * ceil(W/32), 8C)`` (final LayerNorm) and ``pooler_output (B, 8C)``
    (mean over tokens). With ``output_hidden_states``: the embedded map and each stage's output (strides 4 to 32,
    the maps a dense head uses; HF's Swin instead records each stage after the next stage's patch merging, so only
    its first and last entries are the same tensors), in HF's two layouts:
    ``hidden_states`` as tokens ``(B, H_i * W_i, C_i)`` and ``reshaped_hidden_states`` as maps ``(B, C_i, H_i, W_i)``.
    :meth:`features` returns the stage maps at strides 4/8/16/32 for dense tasks, in that same NCHW layout
    (``features(x) == forward(x, output_hidden_states=True).reshaped_hidden_states[1:]``)."""

    config_class = SwinConfig

    def __init__(self, config: SwinConfig):
        super().__init__()
        self.config = config
        c = config.dim
        self.patch_embed = nn.Conv2d(config.in_channels, c, config.patch_size, config.patch_size)
        self.patch_norm = nn.LayerNorm(c, eps=1e-5)
        g = config.image_size // config.patch_size
        self.pos_embed = nn.Parameter(torch.zeros(1, g, g, c)) if config.ape else None
        if self.pos_embed is not None:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.pos_drop = nn.Dropout(config.dropout)
        total = sum(config.depths)
        dpr = [config.drop_path_rate * i / max(total - 1, 1) for i in range(total)]
        starts = [sum(config.depths[:i]) for i in range(len(config.depths))]
        self.stages = nn.ModuleList(
            SwinStage(config, c * 2**i, d, config.num_heads[i], dpr[starts[i]:starts[i] + d], merge=i > 0)
            for i, d in enumerate(config.depths))
        self.norm = nn.LayerNorm(config.num_features, eps=config.norm_eps)
        self.masks = MaskCache(config.mask_padding)
        self.apply(_init_weights)

    @staticmethod
    def example_inputs(config: SwinConfig, batch: int = 2) -> dict[str, Tensor]:
        """``{"pixel_values": (batch, in_channels, image_size, image_size)}`` of standard normal noise."""
        return {"pixel_values": torch.randn(batch, config.in_channels, config.image_size, config.image_size)}

    def embed(self, pixel_values: Tensor) -> Tensor:
        """Patch partition + linear embedding (sec. 3.1; image zero-padded to a multiple of the patch)
        -> ``(B, H/p, W/p, C)``."""
        _check_pixel_values(pixel_values, self.config.in_channels, self.patch_embed.weight.dtype,
                            self.config.total_stride, "the total stride: patch_size "
                            f"{self.config.patch_size} x 2^{len(self.config.depths) - 1} patch mergings")
        p = self.config.patch_size
        h, w = pixel_values.shape[-2:]
        if h % p or w % p:
            pixel_values = F.pad(pixel_values, (0, -w % p, 0, -h % p))
        x = self.patch_norm(rearrange(self.patch_embed(pixel_values), "b c h w -> b h w c"))  # (B, H/p, W/p, C)
        if self.pos_embed is not None:
            pos = self.pos_embed
            if pos.shape[1:3] != x.shape[1:3]:
                pos = rearrange(F.interpolate(rearrange(pos, "1 h w c -> 1 c h w"), size=x.shape[1:3],
                                              mode="bicubic", align_corners=False), "1 c h w -> 1 h w c")
            x = x + pos
        return self.pos_drop(x)

    def features(self, pixel_values: Tensor) -> list[Tensor]:
        """Backbone API: each stage's output, ``(B, C * 2^i, H / (p * 2^i), W / (p * 2^i))`` (strides 4, 8, 16,
        32 with ``p = 4``; sizes rounded up)."""
        outs, x = [], self.embed(pixel_values)
        for stage in self.stages:
            x = stage(x, self.masks)
            outs.append(rearrange(x, "b h w c -> b c h w"))
        return outs

    def forward(self, pixel_values: Tensor, output_hidden_states: bool = False, **_) -> SwinModelOutput:
        x = self.embed(pixel_values)  # (B, H/4, W/4, C)
        hidden = [x]
        for stage in self.stages:  # strides 4, 8, 16, 32; widths C, 2C, 4C, 8C
            x = stage(x, self.masks)
            hidden.append(x)
        x = self.norm(rearrange(x, "b h w c -> b (h w) c"))  # (B, tokens, 8C)
        if not output_hidden_states:
            return SwinModelOutput(last_hidden_state=x, pooler_output=x.mean(1))
        return SwinModelOutput(last_hidden_state=x, pooler_output=x.mean(1),
                               hidden_states=tuple(rearrange(h, "b h w c -> b (h w) c") for h in hidden),
                               reshaped_hidden_states=tuple(rearrange(h, "b h w c -> b c h w") for h in hidden))

    def set_window_size(self, window_size: int) -> None:
        """Change M (e.g. 7 -> 12 to fine-tune at 384^2): bias tables are resized bicubically (sec. 3.3)."""
        self.config = dataclasses.replace(self.config, window_size=window_size)
        for stage in self.stages:
            for i, block in enumerate(stage.blocks):
                a = block.attn
                a.relative_position_bias_table = nn.Parameter(interpolate_bias_table(
                    a.relative_position_bias_table.data, window_size))
                a.window_size, a._index = window_size, {}
                block.window_size, block.shift = window_size, 0 if i % 2 == 0 else window_size // 2
        self.masks = MaskCache(self.config.mask_padding)

    def set_mask_padding(self, mask_padding: bool) -> None:
        """Mask window padding (True, ours) or attend to zero padding like the official code and HF (False)."""
        self.config = dataclasses.replace(self.config, mask_padding=mask_padding)
        self.masks = MaskCache(mask_padding)


class SwinForImageClassification(nn.Module):
    """Swin backbone + linear head on the mean-pooled last stage: ``pixel_values -> logits (B, classes)``;
    ``labels (B,)`` adds the cross-entropy ``loss``."""

    config_class = SwinConfig
    example_inputs = SwinModel.example_inputs

    def __init__(self, config: SwinConfig):
        super().__init__()
        self.config = config
        self.swin = SwinModel(config)
        self.head = nn.Linear(config.num_features, config.num_classes) if config.num_classes > 0 else nn.Identity()
        _init_weights(self.head)

    def forward(self, pixel_values: Tensor, labels: Tensor | None = None, **_) -> ClassifierOutput:
        logits = self.head(self.swin(pixel_values).pooler_output)  # (B, classes)
        loss = None
        if labels is not None:
            _check_labels(labels, logits.shape[0])
            loss = F.cross_entropy(logits, labels)
        return ClassifierOutput(loss=loss, logits=logits)


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


def swin_flops(cfg: SwinConfig, height: int, width: int) -> int:
    """Forward multiply-adds of the Swin backbone + head on one ``height x width`` image (the paper's "FLOPs",
    counted as MACs like the official code): patch embedding, qkv/proj, attention ``2 N^2 C`` per window, MLP,
    patch merging, head. Norms, softmax and biases are ignored."""
    p, c = cfg.patch_size, cfg.dim
    h, w = math.ceil(height / p), math.ceil(width / p)
    total = h * w * c * cfg.in_channels * p * p
    for i, depth in enumerate(cfg.depths):
        dim = c * 2**i
        m = min(h, w) if min(h, w) <= cfg.window_size else cfg.window_size
        hp, wp = math.ceil(h / m) * m, math.ceil(w / m) * m
        n = m * m
        per_block = hp * wp * (3 * dim * dim + dim * dim) + (hp * wp // n) * 2 * n * n * dim
        per_block += h * w * 2 * dim * int(dim * cfg.mlp_ratio)
        total += depth * per_block
        if i < len(cfg.depths) - 1:
            h, w = math.ceil(h / 2), math.ceil(w / 2)
            total += h * w * 4 * dim * 2 * dim
    return total + cfg.num_features * cfg.num_classes


# ----------------------------------------------------------------------------------------------------- checks


def _check_config(cfg: SwinConfig) -> None:
    if len(cfg.depths) != len(cfg.num_heads) or not cfg.depths:
        raise ValueError(f"depths and num_heads must be non-empty and of equal length, got {cfg.depths} "
                         f"and {cfg.num_heads}")
    for i, h in enumerate(cfg.num_heads):
        if (cfg.dim * 2**i) % h:
            raise ValueError(f"stage {i} width {cfg.dim * 2**i} must be divisible by num_heads={h}")
    for name in ("patch_size", "window_size", "dim", "in_channels"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(cfg, name)}")
    for name in ("dropout", "attn_dropout", "drop_path_rate"):
        if not 0.0 <= getattr(cfg, name) < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {getattr(cfg, name)}")


def _check_pixel_values(pixel_values: Tensor, channels: int, dtype: torch.dtype, min_size: int, why: str) -> None:
    """Rank, channels, a floating dtype that is the model's (or one autocast casts), both sides >= ``min_size``."""
    if not isinstance(pixel_values, Tensor) or pixel_values.ndim != 4:
        raise ValueError(f"pixel_values must be a 4-D tensor (batch, {channels}, height, width), "
                         f"got {getattr(pixel_values, 'shape', type(pixel_values))}")
    if pixel_values.shape[1] != channels:
        raise ValueError(f"pixel_values must have {channels} channels (dim 1), got shape {tuple(pixel_values.shape)}")
    if not pixel_values.is_floating_point():
        raise ValueError(f"pixel_values must be floating point, got {pixel_values.dtype}")
    autocast = torch.is_autocast_enabled(pixel_values.device.type) and pixel_values.dtype in _AUTOCAST_INPUTS
    if pixel_values.dtype != dtype and not autocast:
        raise ValueError(f"pixel_values must have the model's dtype {dtype}, got {pixel_values.dtype}: cast the "
                         f"input (pixel_values.to({dtype})) or the model (model.to({pixel_values.dtype}))")
    h, w = pixel_values.shape[-2:]
    if h < min_size or w < min_size:
        raise ValueError(f"pixel_values must be at least {min_size}x{min_size} (height x width), {why}; got {h}x{w}")


_AUTOCAST_INPUTS = (torch.float32, torch.bfloat16, torch.float16)  # autocast casts these for the matmuls


def _check_labels(labels: Tensor, batch: int) -> None:
    if labels.ndim != 1 or labels.shape[0] != batch:
        raise ValueError(f"labels must have shape ({batch},), got {tuple(labels.shape)}")
