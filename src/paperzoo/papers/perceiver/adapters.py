"""Input adapters: raw arrays -> ``(batch, M, C)`` input elements with positions (Perceiver, sec. 3.2).

Each adapter returns ``(x, x_raw)``: ``x`` the elements the latents cross-attend to (positions included) and
``x_raw`` the same elements without positions (Perceiver IO decoders may use them as queries). No convolution
anywhere: pixels, patches and waveform frames are flattened values. Positions are concatenated Fourier features
(:func:`paperzoo.nn.posenc.fourier_position_grid`: ``[pos, sin(pi f pos), cos(pi f pos)]`` with ``f =
linspace(1, R/2, K)`` per axis), concatenated learned vectors, or nothing; bytes add learned positions (as
Perceiver IO's language model and Hugging Face).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from paperzoo.nn.embedding import check_token_ids
from paperzoo.nn.posenc import FourierPositionEncoding

__all__ = ["GridAdapter", "PixelAdapter", "PatchAdapter", "AudioAdapter", "BytesAdapter", "FeatureAdapter",
           "build_adapter"]


class GridAdapter(nn.Module):
    """Shared part: flattened grid values ``(batch, M, c)`` + positions over ``grid`` -> ``(batch, M, c + p)``."""

    def __init__(self, grid: tuple[int, ...], values: int, position: str = "fourier", num_bands: int = 16,
                 max_resolution: tuple[int, ...] | None = None, learned_dim: int = 64, init_std: float = 0.02):
        super().__init__()
        self.grid, self.values, self.position = tuple(grid), values, position
        self.fourier = self.learned = None
        if position == "fourier":
            self.fourier = FourierPositionEncoding(self.grid, num_bands, max_resolution=max_resolution)
            pos_dim = self.fourier.out_dim
        elif position == "learned":
            n = 1
            for s in self.grid:
                n *= s
            self.learned = nn.Parameter(torch.randn(n, learned_dim) * init_std)
            pos_dim = learned_dim
        elif position == "none":
            pos_dim = 0
        else:
            raise ValueError(f"position must be 'fourier', 'learned' or 'none', got {position!r}")
        self.out_dim = values + pos_dim

    def with_positions(self, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pos = self.fourier.grid if self.fourier is not None else self.learned
        if pos is None:
            return v, v
        return torch.cat([v, pos.to(v.dtype).expand(v.shape[0], -1, -1)], dim=-1), v


class PixelAdapter(GridAdapter):
    """Raw pixels: ``(batch, channels, H, W)`` float -> ``(batch, H*W, channels + pos)`` (row-major pixels)."""

    def __init__(self, shape: tuple[int, int, int], **kw):
        self.shape = tuple(shape)
        c, h, w = self.shape
        super().__init__((h, w), c, **kw)

    def forward(self, images: torch.Tensor):
        _check_images(images, self.shape)
        return self.with_positions(rearrange(images, "b c h w -> b (h w) c"))


class PatchAdapter(GridAdapter):
    """Image patches: ``(batch, channels, H, W)`` -> ``(batch, (H/p)*(W/p), p*p*channels + pos)``, values ordered
    ``(p_row p_col channel)``; positions over the patch grid."""

    def __init__(self, shape: tuple[int, int, int], patch_size: int, **kw):
        self.shape, self.p = tuple(shape), patch_size
        c, h, w = self.shape
        if h % patch_size or w % patch_size:
            raise ValueError(f"image size {h}x{w} must be divisible by patch_size={patch_size}")
        super().__init__((h // patch_size, w // patch_size), c * patch_size**2, **kw)

    def forward(self, images: torch.Tensor):
        _check_images(images, self.shape)
        v = rearrange(images, "b c (h p) (w q) -> b (h w) (p q c)", p=self.p, q=self.p)
        return self.with_positions(v)


class AudioAdapter(GridAdapter):
    """Raw waveform: ``(batch, T)`` float -> ``(batch, T/p, p + pos)``: frames of ``p`` consecutive samples with 1D
    positions over the frames (``p = 1``: one element per sample)."""

    def __init__(self, num_samples: int, patch_size: int = 1, **kw):
        if num_samples % patch_size:
            raise ValueError(f"num_samples={num_samples} must be divisible by patch_size={patch_size}")
        self.num_samples, self.p = num_samples, patch_size
        super().__init__((num_samples // patch_size,), patch_size, **kw)

    def forward(self, wave: torch.Tensor):
        _check_wave(wave, self.num_samples)
        return self.with_positions(rearrange(wave, "b (t p) -> b t p", p=self.p))


class BytesAdapter(nn.Module):
    """UTF-8 bytes (or any ids): ``(batch, seq)`` long in ``[0, vocab_size)``, ``seq <= max_len`` ->
    ``(batch, seq, dim)``.

    ``position="learned"``: ``embed(ids) + pos[:seq]`` (Perceiver IO's language model, HF's
    ``PerceiverTextPreprocessor``); ``"fourier"``: 1D Fourier features of the ``max_len`` grid concatenated;
    ``"none"``: the embeddings only. ``embed`` is shared with the MLM output head (tied logits).
    """

    def __init__(self, vocab_size: int, dim: int, max_len: int, position: str = "learned", num_bands: int = 16,
                 init_std: float = 0.02):
        super().__init__()
        self.vocab_size, self.dim, self.max_len, self.position = vocab_size, dim, max_len, position
        self.embed = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.embed.weight, std=init_std)
        self.pos = self.fourier = None
        if position == "learned":
            self.pos = nn.Parameter(torch.randn(max_len, dim) * init_std)
        elif position == "fourier":
            self.fourier = FourierPositionEncoding((max_len,), num_bands)
        self.out_dim = dim + (self.fourier.out_dim if self.fourier is not None else 0)

    def forward(self, ids: torch.Tensor):
        _check_ids(ids, self.max_len)
        check_token_ids(ids, self.vocab_size)
        e = self.embed(ids)
        s = ids.shape[1]
        if self.pos is not None:
            return e + self.pos[:s], e
        if self.fourier is not None:
            return torch.cat([e, self.fourier.grid[:s].to(e.dtype).expand(e.shape[0], -1, -1)], -1), e
        return e, e


class FeatureAdapter(nn.Module):
    """Ready-made input elements ``(batch, M, input_dim)`` passed through (no positions added)."""

    def __init__(self, input_dim: int):
        super().__init__()
        self.out_dim = input_dim

    def forward(self, x: torch.Tensor):
        _check_features(x, self.out_dim)
        return x, x


def build_adapter(cfg) -> nn.Module:
    """The adapter described by a :class:`~.model.PerceiverConfig`."""
    grid_kw = dict(position=cfg.position, num_bands=cfg.num_bands, max_resolution=cfg.max_resolution,
                   learned_dim=cfg.learned_pos_dim, init_std=cfg.init_std)
    if cfg.input in ("pixels", "patches"):
        if len(cfg.input_shape) != 3:
            raise ValueError(f"input_shape must be (channels, H, W) for images, got {cfg.input_shape}")
        if cfg.input == "pixels":
            return PixelAdapter(cfg.input_shape, **grid_kw)
        return PatchAdapter(cfg.input_shape, cfg.patch_size, **grid_kw)
    if len(cfg.input_shape) != 1:
        raise ValueError(f"input_shape must be (length,) for input={cfg.input!r}, got {cfg.input_shape}")
    if cfg.input == "audio":
        return AudioAdapter(cfg.input_shape[0], cfg.patch_size, **grid_kw)
    if cfg.input == "bytes":
        return BytesAdapter(cfg.vocab_size, cfg.byte_dim, cfg.input_shape[0], cfg.position, cfg.num_bands,
                            cfg.init_std)
    return FeatureAdapter(cfg.input_dim)


# ----------------------------------------------------------------------------------------------------- input checks
def _check_images(images: torch.Tensor, shape: tuple[int, ...]) -> None:
    if images.ndim != 4 or tuple(images.shape[1:]) != shape or not images.is_floating_point():
        raise ValueError(f"expected float images (batch, {', '.join(map(str, shape))}), "
                         f"got {images.dtype} {tuple(images.shape)}")


def _check_wave(wave: torch.Tensor, num_samples: int) -> None:
    if wave.ndim != 2 or wave.shape[1] != num_samples or not wave.is_floating_point():
        raise ValueError(f"expected a float waveform (batch, T={num_samples}), got {wave.dtype} {tuple(wave.shape)}")


def _check_ids(ids: torch.Tensor, max_len: int) -> None:
    if ids.ndim != 2 or ids.dtype not in (torch.int64, torch.int32) or ids.shape[1] > max_len:
        raise ValueError(f"expected integer byte ids (batch, seq <= {max_len}), got {ids.dtype} {tuple(ids.shape)}")


def _check_features(x: torch.Tensor, dim: int) -> None:
    if x.ndim != 3 or x.shape[-1] != dim or not x.is_floating_point():
        raise ValueError(f"expected float inputs (batch, M, {dim}), got {x.dtype} {tuple(x.shape)}")
