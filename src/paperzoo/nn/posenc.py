"""Positional encodings: sinusoidal, learned, T5 relative bias, rotary, ALiBi, Fourier features, factorised.

Absolute encodings return a ``(seq, dim)`` table to add to token embeddings; relative ones return an additive
attention bias ``(heads, q_len, k_len)`` (T5, ALiBi) or rotate queries and keys (RoPE).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from einops import rearrange, repeat
from torch import Tensor, nn

__all__ = [
    "sinusoidal_table",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "T5RelativePositionBias",
    "RotaryEmbedding",
    "rotary_permutation",
    "alibi_slopes",
    "ALiBi",
    "fourier_features",
    "fourier_position_grid",
    "FourierPositionEncoding",
    "FactorizedPositionalEmbedding",
    "frequency_encoding",
    "frequency_encoding_dim",
]


def _check_int(name: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def _check_positions(seq_len: int, offset: int) -> None:
    _check_int("seq_len", seq_len, 0)
    _check_int("offset", offset, 0)


def _exact_dtype(device: torch.device | str | None) -> torch.dtype:
    """float64 where the device supports it (tables are computed once; fp32 loses ~1e-3 at positions ~1e4)."""
    return torch.float32 if device is not None and torch.device(device).type == "mps" else torch.float64


# ----------------------------------------------------------------------------------------------------- sinusoidal


def sinusoidal_table(
    n_pos: int, dim: int, base: float = 10000.0, interleaved: bool = False, offset: int = 0, device=None
) -> Tensor:
    """Vaswani et al. (2017), sec. 3.5: ``PE(p, 2i) = sin(p / base^(2i/d))``, ``PE(p, 2i+1) = cos(p / base^(2i/d))``.

    Returns a float32 ``(n_pos, dim)`` table for positions ``offset .. offset + n_pos - 1``. ``interleaved=True`` is
    the paper's layout (sin, cos alternating per frequency); the default concatenated layout is
    ``[sin(all freqs), cos(all freqs)]`` (tensor2tensor, fairseq), the same features in another channel order.
    """
    _check_positions(n_pos, offset)
    if _check_int("dim", dim, 2) % 2:
        raise ValueError(f"dim must be even for sin/cos pairs, got {dim}")
    if not base > 0:
        raise ValueError(f"base must be > 0, got {base}")
    dt = _exact_dtype(device)
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=dt, device=device) / dim)  # (dim/2,)
    angle = torch.arange(offset, offset + n_pos, dtype=dt, device=device)[:, None] * inv_freq  # (n_pos, dim/2)
    sin, cos = angle.sin(), angle.cos()
    table = rearrange([sin, cos], "two n f -> n (f two)") if interleaved else torch.cat((sin, cos), dim=-1)
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal absolute positions (Vaswani et al., 2017, sec. 3.5); see :func:`sinusoidal_table`.

    ``forward(seq_len, offset=0) -> (seq_len, dim)`` for positions ``offset .. offset + seq_len - 1``, any length:
    the table is a non-persistent buffer (``max_len`` rows up front, 0 by default) that grows on demand.
    """

    def __init__(self, dim: int, max_len: int | None = None, base: float = 10000.0, interleaved: bool = False):
        super().__init__()
        self.dim, self.base, self.interleaved = dim, base, interleaved
        self.register_buffer("table", sinusoidal_table(max_len or 0, dim, base, interleaved), persistent=False)

    def forward(self, seq_len: int, offset: int = 0) -> Tensor:
        _check_positions(seq_len, offset)
        end = offset + seq_len
        if end > self.table.shape[0]:
            n = max(end, 2 * self.table.shape[0])
            table = sinusoidal_table(n, self.dim, self.base, self.interleaved, device=self.table.device)
            self.table = table.to(self.table.dtype)  # keep a .half()/.to(dtype) conversion
        return self.table[offset:end]


# -------------------------------------------------------------------------------------------------------- learned


class LearnedPositionalEmbedding(nn.Module):
    """Learned absolute positions (BERT, GPT): a trainable table ``E`` of shape ``(max_len, dim)``; ``pe(p) = E[p]``.

    ``forward(seq_len, offset=0) -> (seq_len, dim)``. Positions at or beyond ``max_len`` have no learned row, so
    asking for them raises ``ValueError`` rather than silently clamping or wrapping.
    """

    def __init__(self, max_len: int, dim: int, init_std: float = 0.02):
        super().__init__()
        self.max_len = _check_int("max_len", max_len, 1)
        self.weight = nn.Parameter(torch.randn(max_len, _check_int("dim", dim, 1)) * init_std)

    def forward(self, seq_len: int, offset: int = 0) -> Tensor:
        _check_positions(seq_len, offset)
        if offset + seq_len > self.max_len:
            raise ValueError(
                f"learned absolute positions cannot extrapolate beyond max_len={self.max_len} "
                f"(asked for positions {offset}..{offset + seq_len - 1})"
            )
        return self.weight[offset : offset + seq_len]


# ---------------------------------------------------------------------------------------------------- T5 relative


class T5RelativePositionBias(nn.Module):
    """T5's bucketed relative position bias (Raffel et al., 2020, sec. 2.1): ``bias[h, i, j] = B[bucket(j - i), h]``.

    ``forward(q_len, k_len, offset=0) -> (num_heads, q_len, k_len)`` float bias to add to the attention logits; query
    ``i`` sits at position ``offset + i``, key ``j`` at ``j``. T5 computes the table once, in the first layer of a
    stack, and **shares this one module across all layers** (create one instance, pass its output to every layer;
    an encoder-decoder has one for the encoder and a causal one for the decoder).
    T5 attention also uses **no 1/sqrt(d) scaling** (it is folded into the initialisation): call attention with
    ``scale=1.0`` to reproduce T5. The table is ``relative_attention_bias`` (an ``nn.Embedding(num_buckets, heads)``),
    named as in Hugging Face's T5.
    """

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True):
        super().__init__()
        _check_int("num_heads", num_heads, 1)
        half = _check_int("num_buckets", num_buckets, 2) // (2 if bidirectional else 1)
        if half // 2 < 1:
            raise ValueError(f"num_buckets must be >= {4 if bidirectional else 2}, got {num_buckets}")
        if _check_int("max_distance", max_distance, 1) <= half // 2:
            raise ValueError(f"max_distance must exceed the exact range {half // 2}, got {max_distance}")
        self.num_heads, self.num_buckets, self.max_distance = num_heads, num_buckets, max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    @staticmethod
    def relative_position_bucket(
        relative_position: Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
    ) -> Tensor:
        """Map ``relative_position = key_pos - query_pos`` (long tensor, any shape) to buckets in ``[0, num_buckets)``.

        Bidirectional: half the buckets for keys after the query (``rel > 0``), half for the rest. Causal: only
        ``n = max(-rel, 0)`` counts (the future shares bucket 0). Within a direction of ``N`` buckets, ``n < N/2``
        gets its own bucket; larger ``n`` gets ``N/2 + floor(log(n / (N/2)) / log(max_distance / (N/2)) * N/2)``,
        clipped to ``N - 1``. The log is taken in float32, as in T5's code, so released checkpoints see the same
        buckets.
        """
        if not isinstance(relative_position, Tensor) or relative_position.is_floating_point():
            raise ValueError(f"relative_position must be an integer tensor, got {type(relative_position).__name__}")
        rel = relative_position.long()
        if bidirectional:
            num_buckets //= 2
            offset = (rel > 0).long() * num_buckets
            n = rel.abs()
        else:
            offset = torch.zeros_like(rel)
            n = (-rel).clamp(min=0)
        max_exact = num_buckets // 2
        log_ratio = torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
        large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
        return offset + torch.where(n < max_exact, n, large)

    def buckets(self, q_len: int, k_len: int, offset: int = 0, device=None) -> Tensor:
        """``(q_len, k_len)`` bucket ids for queries at ``offset + i`` and keys at ``j``."""
        _check_positions(q_len, offset)
        _check_int("k_len", k_len, 0)
        device = device if device is not None else self.relative_attention_bias.weight.device
        q = torch.arange(offset, offset + q_len, device=device)
        k = torch.arange(k_len, device=device)
        rel = k[None, :] - q[:, None]
        return self.relative_position_bucket(rel, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, q_len: int, k_len: int, offset: int = 0, device=None) -> Tensor:
        bias = self.relative_attention_bias(self.buckets(q_len, k_len, offset, device))  # (q, k, heads)
        return rearrange(bias, "q k h -> h q k")


# --------------------------------------------------------------------------------------------------------- rotary


def rotary_permutation(head_dim: int) -> Tensor:
    """Index permutation ``perm`` (long, ``(head_dim,)``) from the interleaved to the half-split RoPE layout.

    Interleaved RoPE rotates pairs ``(2i, 2i+1)`` by frequency ``i``; half-split rotates ``(i, i + d/2)``. So
    ``rope_half(x[..., perm]) == rope_interleaved(x)[..., perm]`` with ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``:
    permuting the output rows of each head's W_q and W_k by ``perm`` turns an interleaved-layout checkpoint into a
    half-split one with identical attention scores. ``perm.argsort()`` goes back.
    """
    if _check_int("head_dim", head_dim, 2) % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


class RotaryEmbedding(nn.Module):
    """Rotary position embedding, RoPE (Su et al., 2021, sec. 3.4): rotate each channel pair of q and k at position
    ``p`` by the angle ``p * theta_i``, ``theta_i = base^(-2i/d)``, so ``<R_m q, R_n k>`` depends on ``m - n`` only.

    ``forward(q, k, offset=0) -> (q, k)``, q ``(batch, heads, q_seq, head_dim)``, k ``(batch, heads, k_seq, head_dim)``;
    positions start at ``offset`` for both, or at ``q_offset`` / ``k_offset`` when given (cached decoding:
    ``q_offset=past_len, k_offset=0``). Computed in float32 (float64 inputs: float64) and cast back to the input dtype.
    Layouts: ``interleaved=True`` pairs ``(2i, 2i+1)`` (original RoFormer, GPT-J); the default half-split pairs
    ``(i, i + d/2)`` (GPT-NeoX, Llama, Hugging Face). They are not interchangeable: see :func:`rotary_permutation`.
    """

    def __init__(self, head_dim: int, base: float = 10000.0, interleaved: bool = False):
        super().__init__()
        if _check_int("head_dim", head_dim, 2) % 2:
            raise ValueError(f"head_dim must be even, got {head_dim}")
        self.head_dim, self.base, self.interleaved = head_dim, base, interleaved
        self._cache: dict[tuple[torch.device, torch.dtype], tuple[Tensor, Tensor]] = {}  # positions 0..n-1

    def cos_sin(self, seq_len: int, offset: int = 0, device=None, dtype=torch.float32) -> tuple[Tensor, Tensor]:
        """``(seq_len, head_dim)`` cos and sin tables (float32 by default), channel-aligned with the layout.

        Cached per (device, dtype); computed from ``base`` in float64 and rounded once (no buffer that ``.half()``
        could round)."""
        _check_positions(seq_len, offset)
        device = torch.device(device) if device is not None else torch.device("cpu")
        key, end = (device, dtype), offset + seq_len
        if key not in self._cache or self._cache[key][0].shape[0] < end:
            n = max(end, 2 * self._cache[key][0].shape[0] if key in self._cache else 0)
            exact = _exact_dtype(device)
            inv_freq = self.base ** (-torch.arange(0, self.head_dim, 2, dtype=exact, device=device) / self.head_dim)
            angle = torch.arange(n, dtype=exact, device=device)[:, None] * inv_freq  # (n, d/2)
            pattern = "n f -> n (f two)" if self.interleaved else "n f -> n (two f)"
            self._cache[key] = tuple(repeat(t.to(dtype), pattern, two=2) for t in (angle.cos(), angle.sin()))
        cos, sin = self._cache[key]
        return cos[offset:end], sin[offset:end]

    def _rotate_pairs(self, x: Tensor) -> Tensor:
        """The 90-degree turn of each pair: (a, b) -> (-b, a)."""
        if self.interleaved:
            a, b = rearrange(x, "... (f two) -> two ... f", two=2)
            return rearrange([-b, a], "two ... f -> ... (f two)")
        a, b = x.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        """Rotate one tensor ``(..., seq, head_dim)`` whose first position is ``offset``."""
        if x.ndim < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"expected (..., seq, head_dim={self.head_dim}), got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise ValueError(f"expected a floating-point tensor, got {x.dtype}")
        dtype = torch.promote_types(x.dtype, torch.float32)  # at least fp32; float64 stays float64
        cos, sin = self.cos_sin(x.shape[-2], offset, device=x.device, dtype=dtype)
        xf = x.to(dtype)
        return (xf * cos + self._rotate_pairs(xf) * sin).to(x.dtype)

    def forward(
        self, q: Tensor, k: Tensor, offset: int = 0, q_offset: int | None = None, k_offset: int | None = None
    ) -> tuple[Tensor, Tensor]:
        for name, t in (("q", q), ("k", k)):
            if t.ndim != 4 or t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must be (batch, heads, seq, head_dim={self.head_dim}), got shape {tuple(t.shape)}"
                )
        q_offset = offset if q_offset is None else q_offset
        k_offset = offset if k_offset is None else k_offset
        return self.rotate(q, q_offset), self.rotate(k, k_offset)


# ---------------------------------------------------------------------------------------------------------- ALiBi


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi head slopes (Press et al., 2022, sec. 3), float32 ``(num_heads,)``.

    For ``n`` a power of two: the geometric sequence ``2^(-8i/n)``, ``i = 1..n``. Otherwise, with ``m`` the largest
    power of two below ``n``: the ``m`` slopes of ``m`` heads, then the first ``n - m`` of every other slope of
    ``2m`` heads (``slopes(2m)[0::2]``), which interleave between the first ones.
    """
    _check_int("num_heads", num_heads, 1)

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]

    m = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = power_of_two(m) + power_of_two(2 * m)[0::2][: num_heads - m]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(nn.Module):
    """Attention with linear biases (Press et al., 2022, sec. 3): ``bias[h, i, j] = -m_h * (i - j)``.

    ``forward(q_len, k_len, offset=0) -> (num_heads, q_len, k_len)`` float bias for queries at ``offset + i`` and
    keys at ``j``, added to the (scaled) attention logits. ``causal=True`` gives the paper's form: its future entries
    (``j > i``) are positive and **must be removed by a causal mask**; on the allowed entries it equals the paper's
    code, which adds ``m_h * j`` (a per-row constant apart). ``causal=False`` gives the symmetric
    ``-m_h * |i - j|``, the usual adaptation for bidirectional encoders (not in the paper, which is causal only).
    Slopes from :func:`alibi_slopes`.
    """

    def __init__(self, num_heads: int, causal: bool = True):
        super().__init__()
        self.num_heads, self.causal = num_heads, causal
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def forward(self, q_len: int, k_len: int, offset: int = 0, device=None) -> Tensor:
        _check_positions(q_len, offset)
        _check_int("k_len", k_len, 0)
        slopes = self.slopes.to(device) if device is not None else self.slopes
        i = torch.arange(offset, offset + q_len, device=slopes.device, dtype=torch.float32)
        j = torch.arange(k_len, device=slopes.device, dtype=torch.float32)
        dist = i[:, None] - j[None, :]
        if not self.causal:
            dist = dist.abs()
        return -slopes[:, None, None] * dist


# ------------------------------------------------------------------------------------------------ Fourier features


def fourier_features(
    pos: Tensor,
    num_bands: int,
    max_resolution: Sequence[int],
    concat_pos: bool = True,
    sine_only: bool = False,
) -> Tensor:
    """Perceiver's Fourier position features (Jaegle et al., 2021, sec. 3.2; DeepMind's released code).

    ``pos``: ``(..., d)`` in ``[-1, 1]``. For axis ``a`` the frequencies are ``f_{a,k} = linspace(1, R_a/2, K)``
    (``R_a = max_resolution[a]``, ``K = num_bands``, Nyquist at ``R_a/2``). Output channels, in this order (the
    released code's, also Hugging Face's): ``[x (d, if concat_pos), sin(pi f x) (d*K), cos(pi f x) (d*K, unless
    sine_only)]``, where each ``d*K`` block is axis-major (all bands of axis 0, then of axis 1, ...).
    Shape ``(..., d*(2K) + d)`` with the defaults.
    """
    if not pos.is_floating_point() or pos.ndim < 1:
        raise ValueError(f"pos must be a floating-point (..., d) tensor, got {pos.dtype} of shape {tuple(pos.shape)}")
    _check_int("num_bands", num_bands, 1)
    d = pos.shape[-1]
    if len(max_resolution) != d:
        raise ValueError(f"max_resolution must have d={d} entries (one per axis), got {list(max_resolution)}")
    freqs = torch.stack(
        [torch.linspace(1.0, r / 2, num_bands, dtype=torch.float64) for r in max_resolution]
    ).to(pos.device, pos.dtype)  # (d, K)
    scaled = rearrange(pos[..., :, None] * freqs, "... d k -> ... (d k)") * math.pi
    feats = [scaled.sin()] if sine_only else [scaled.sin(), scaled.cos()]
    return torch.cat(([pos] if concat_pos else []) + feats, dim=-1)


def frequency_encoding(x: Tensor, num_freqs: int, include_input: bool = True, pi: bool = False,
                       window: Tensor | None = None) -> Tensor:
    """NeRF's positional encoding gamma(p) (Mildenhall et al., 2020, eq. 4), in the official code's layout.

    ``gamma(p) = [p, sin(2^0 s p), cos(2^0 s p), ..., sin(2^(L-1) s p), cos(2^(L-1) s p)]`` with ``s = 1``
    (bmild/nerf: no pi, on purpose for scenes within about +-1.5) or ``s = pi`` (``pi=True``, the paper's eq. 4).
    ``x``: ``(..., d)``; returns ``(..., d * (include_input + 2L))``: 63 for xyz at L = 10, 27 for directions at
    L = 4. ``window`` (``(L,)``, Nerfies' coarse-to-fine weights in [0, 1]) scales each frequency's sin and cos; the
    raw input is never windowed.
    """
    _check_frequency_input(x, num_freqs, window)
    freqs = 2.0 ** torch.arange(num_freqs, dtype=x.dtype, device=x.device)  # (L,)
    if pi:
        freqs = freqs * math.pi
    scaled = x[..., None, :] * freqs[:, None]  # (..., L, d)
    feats = torch.stack([scaled.sin(), scaled.cos()], dim=-2)  # (..., L, 2, d): sin then cos per frequency
    if window is not None:
        feats = feats * window.to(feats.dtype)[:, None, None]
    feats = feats.flatten(-3)  # (..., 2Ld)
    return torch.cat([x, feats], dim=-1) if include_input else feats


def frequency_encoding_dim(d: int, num_freqs: int, include_input: bool = True) -> int:
    """Channels of :func:`frequency_encoding`: ``d * (include_input + 2 * num_freqs)``."""
    return d * (int(include_input) + 2 * num_freqs)


def _check_frequency_input(x: Tensor, num_freqs: int, window: Tensor | None) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.ndim < 1:
        raise ValueError(f"x must be a floating-point (..., d) tensor, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} of shape {tuple(getattr(x, 'shape', ()))}")
    _check_int("num_freqs", num_freqs, 0)
    if window is not None and tuple(window.shape) != (num_freqs,):
        raise ValueError(f"window must have shape ({num_freqs},) (one weight per frequency), got {tuple(window.shape)}")


def _linear_positions(shape: Sequence[int], device=None) -> Tensor:
    """``(prod(shape), d)`` grid of positions, ``linspace(-1, 1, size)`` per axis, row-major (last axis fastest)."""
    axes = [torch.linspace(-1.0, 1.0, n, device=device) for n in shape]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(shape))


def fourier_position_grid(
    shape: Sequence[int],
    num_bands: int,
    concat_pos: bool = True,
    max_resolution: Sequence[int] | None = None,
    sine_only: bool = False,
    device=None,
) -> Tensor:
    """Fourier features of a 1D/2D/3D (any-D) grid: ``(prod(shape), channels)``, positions flattened row-major.

    Positions are ``linspace(-1, 1, size)`` per axis; ``max_resolution`` defaults to ``shape`` (as in Perceiver).
    """
    shape = tuple(shape)
    if not shape or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in shape):
        raise ValueError(f"shape must be a non-empty tuple of positive ints, got {shape!r}")
    pos = _linear_positions(shape, device)
    return fourier_features(pos, num_bands, max_resolution or shape, concat_pos, sine_only)


class FourierPositionEncoding(nn.Module):
    """Perceiver's Fourier position encoding of a fixed grid (see :func:`fourier_features`), cached as a buffer.

    ``forward(batch_size=None) -> (prod(shape), out_dim)``, or ``(batch_size, prod(shape), out_dim)`` expanded.
    ``out_dim = d * (2 * num_bands) + d`` by default (``d * num_bands`` fewer with ``sine_only``, ``d`` fewer
    without ``concat_pos``).
    """

    def __init__(
        self,
        shape: Sequence[int],
        num_bands: int,
        concat_pos: bool = True,
        max_resolution: Sequence[int] | None = None,
        sine_only: bool = False,
    ):
        super().__init__()
        self.shape = tuple(shape)
        grid = fourier_position_grid(self.shape, num_bands, concat_pos, max_resolution, sine_only)
        self.register_buffer("grid", grid, persistent=False)
        self.out_dim = grid.shape[-1]

    def forward(self, batch_size: int | None = None) -> Tensor:
        if batch_size is None:
            return self.grid
        return repeat(self.grid, "n c -> b n c", b=_check_int("batch_size", batch_size, 1))


# ------------------------------------------------------------------------------------------------------ factorised


class FactorizedPositionalEmbedding(nn.Module):
    """Factorised learned positions for a grid, e.g. VATT's (time, height, width) video patches (Akbari et al.,
    2021, sec. 3): ``pe(t, h, w) = E_t[t] + E_h[h] + E_w[w]``, one learned table per axis, ``tables[a]`` of shape
    ``(shape[a], dim)``.

    ``forward(shape=None) -> (prod(shape), dim)``, flattened row-major, i.e. ``(t h w)`` order. A smaller ``shape``
    (per-axis ``<=`` the built one) uses the leading rows of each table.
    """

    def __init__(self, shape: Sequence[int], dim: int, init_std: float = 0.02):
        super().__init__()
        self.shape = tuple(_check_int("shape entry", n, 1) for n in shape)
        if not self.shape:
            raise ValueError("shape must have at least one axis")
        self.dim = _check_int("dim", dim, 1)
        self.tables = nn.ParameterList([nn.Parameter(torch.randn(n, dim) * init_std) for n in self.shape])

    def forward(self, shape: Sequence[int] | None = None) -> Tensor:
        shape = self.shape if shape is None else tuple(shape)
        ok = len(shape) == len(self.shape) and all(
            type(n) is int and 1 <= n <= m for n, m in zip(shape, self.shape, strict=True)
        )
        if not ok:
            raise ValueError(f"shape must have {len(self.shape)} axes with 1 <= size <= {self.shape}, got {shape}")
        ndim, out = len(shape), 0
        for axis, (n, table) in enumerate(zip(shape, self.tables, strict=True)):  # loop over axes (<= 3), not positions
            view = [1] * ndim + [self.dim]
            view[axis] = n
            out = out + table[:n].view(view)
        return out.reshape(-1, self.dim)
