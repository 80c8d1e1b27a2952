"""VATT (Akbari et al., 2021): transformers on raw video, audio and text, with DropToken and common-space heads.

In the paper's order (sec. 3; official code google-research ``vatt/``):

1. **Tokenisers** (sec. 3.1): video ``(B, C, T, H, W)`` -> Conv3d, kernel = stride = (t, h, w) -> ``T/t * H/h * W/w``
   voxel tokens; audio ``(B, L)`` -> Conv1d, kernel = stride = 128 samples -> ``L / 128`` tokens; text -> a word
   embedding (the paper's frozen word2vec is not available offline: learned here).
2. **Positions** (sec. 3.1, ``SpatioTemporalEmbeddings``): learnable per-axis tables, ``pe(i, j, k) = E_t[i] + E_h[j]
   + E_w[k]`` (audio: one table), ``x <- Dropout(x + LayerNorm(pe))``; a grid other than the configured maximum
   uses the tables linearly interpolated to it.
3. **DropToken** (sec. 3.3, ``_random_patch_selection``): in training, video and audio only, after the positions:
   one random permutation of the token positions for the whole batch, keep its first ``int(keep * max_tokens)``
   (``max_tokens`` from the configured maximum grid, so a shorter input keeps all its tokens).
4. **[AGG]**: a learnable token prepended after DropToken, without position; its final hidden state (after the
   final LayerNorm) is the pooled feature.
5. **Backbones** (sec. 3.2): pre-LN GELU transformers, one per modality (text with T5's relative bias), or the
   modality-agnostic variant: one shared transformer with per-modality projections, positions and [AGG] tokens
   (text with an absolute 1-D table there) and per-modality post-projections.
6. **Common spaces** (sec. 3.4, FAC): video -> va by Linear-BN-ReLU-Linear-BN (512), va -> vt by ReLU-Linear-BN
   (256); audio -> va Linear (512); text -> vt Linear (256).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from paperzoo.nn.attention import as_keep_mask
from paperzoo.nn.embedding import check_token_ids
from paperzoo.nn.norm import LayerNorm
from paperzoo.nn.outputs import ModelOutput
from paperzoo.nn.posenc import FactorizedPositionalEmbedding
from paperzoo.nn.transformer import TransformerConfig, TransformerEncoder

__all__ = ["SIZES", "PRESETS", "AggToken", "CommonSpaceHeads", "DropToken", "FactorizedPositions", "VATT",
           "VATTConfig", "VATTOutput", "VoxelTokenizer", "WaveformTokenizer", "interpolate_table"]

# the paper's Table 1 backbones: (num_layers, dim, num_heads, ffn_dim)
SIZES = {"small": (6, 512, 8, 2048), "base": (12, 768, 12, 3072), "medium": (12, 1024, 16, 4096),
         "large": (24, 1024, 16, 4096)}
BACKBONES = ("specific", "shared")


def backbone(size: str | tuple[int, int, int, int], position: str = "none", dropout: float = 0.1,
             norm_eps: float = 1e-6) -> TransformerConfig:
    """A VATT transformer: pre-LN, GELU, final LayerNorm; ``size`` a name of :data:`SIZES` or (layers, dim, heads,
    ffn_dim)."""
    layers, dim, heads, ffn = SIZES[size] if isinstance(size, str) else size
    return TransformerConfig(dim=dim, num_layers=layers, num_heads=heads, ffn_dim=ffn, activation="gelu",
                             norm="layernorm", norm_eps=norm_eps, prenorm=True, dropout=dropout,
                             attn_dropout=0.0, position=position, t5_num_buckets=32, t5_max_distance=128,
                             final_norm=True)


@dataclass(frozen=True)
class VATTConfig:
    """The whole model.

    Inputs: ``frames`` x ``size`` x ``size`` video with ``channels`` in [-1, 1], cut into ``video_patch`` = (t, h, w)
    voxels; ``audio_samples`` of raw waveform cut into ``audio_patch`` samples; captions of at most ``text_len``
    word ids from a vocabulary of ``vocab_size`` (0 = padding), embedded in ``word_dim``.
    ``video`` / ``audio`` / ``text``: the modality-specific transformers (``backbone="specific"``); with
    ``backbone="shared"`` one transformer ``shared`` serves all three (``post_dim``: its per-modality output
    projections). ``keep_rate``: DropToken's kept fraction of the maximum token count (the paper pretrains with
    0.5; 1.0 keeps all); ``per_sample_drop``: an independent permutation per sample instead of one per batch.
    ``va_dim`` / ``vt_dim``: the common spaces.
    """

    frames: int = 32
    size: int = 224
    channels: int = 3
    video_patch: tuple[int, int, int] = (4, 16, 16)
    audio_samples: int = 153_600
    audio_patch: int = 128
    vocab_size: int = 2**16
    text_len: int = 16
    word_dim: int = 300
    video: TransformerConfig = field(default_factory=lambda: backbone("medium"))
    audio: TransformerConfig = field(default_factory=lambda: backbone("base"))
    text: TransformerConfig = field(default_factory=lambda: backbone("small", position="t5"))
    backbone: str = "specific"
    shared: TransformerConfig = field(default_factory=lambda: backbone("medium"))
    post_dim: int = 1024
    pos_dropout: float = 0.1
    keep_rate: float = 0.5
    per_sample_drop: bool = False
    va_dim: int = 512
    vt_dim: int = 256
    bn_momentum: float = 0.1  # torch's convention: TF's decay 0.9
    bn_eps: float = 1e-5

    def __post_init__(self) -> None:
        object.__setattr__(self, "video_patch", tuple(self.video_patch))
        _check_config(self)

    @property
    def video_grid(self) -> tuple[int, int, int]:
        """The maximum (configured) voxel grid (T/t, H/h, W/w)."""
        t, h, w = self.video_patch
        return self.frames // t, self.size // h, self.size // w

    @property
    def audio_tokens(self) -> int:
        return self.audio_samples // self.audio_patch

    @classmethod
    def preset(cls, name: str, **overrides) -> VATTConfig:
        """The paper's models ``bbs``, ``mbs`` (the default, ViT-Medium + WaT-Base + T5-Small), ``lbs`` and
        ``ma-medium`` (the modality-agnostic one), the CPU reproduction's ``small`` and the tests' ``tiny``."""
        if name not in PRESETS:
            raise ValueError(f"unknown VATT preset {name!r}; valid: {', '.join(PRESETS)}")
        return dataclasses.replace(PRESETS[name](), **overrides)


def _paper(video: str, audio: str, text: str = "small", shared: bool = False) -> VATTConfig:
    if shared:
        return VATTConfig(backbone="shared", shared=backbone(video))
    return VATTConfig(video=backbone(video), audio=backbone(audio), text=backbone(text, position="t5"))


def _cpu(dim: int, layers: int, heads: int, text_layers: int, **kw) -> VATTConfig:
    """A CPU model on AV-MNIST-style clips: 8 frames of 32 px (4x4x4 voxel grid), 8192 samples at 8 kHz (64 tokens).

    Without dropout: at this size and budget the pooled features' dependence on the clip is small at first, and the
    dropout noise (0.1 in the paper), amplified by the heads' BatchNorm, drowns it: the contrastive losses stayed at
    chance for 300 steps with dropout and fell from the first 100 without (measured on 256 clips, see the README).
    """
    t = (layers, dim, heads, 4 * dim)
    return VATTConfig(frames=8, size=32, channels=1, video_patch=(2, 8, 8), audio_samples=8192, audio_patch=128,
                      vocab_size=64, text_len=16, word_dim=dim, video=backbone(t, dropout=0.0),
                      audio=backbone(t, dropout=0.0),
                      text=backbone((text_layers, dim, heads, 4 * dim), position="t5", dropout=0.0),
                      shared=backbone(t, dropout=0.0), post_dim=dim, pos_dropout=0.0, **kw)


PRESETS = {
    "tiny": lambda: _cpu(32, 1, 2, 1, va_dim=32, vt_dim=16),
    "small": lambda: _cpu(32, 2, 2, 2),
    "bbs": lambda: _paper("base", "base"),
    "mbs": lambda: _paper("medium", "base"),
    "lbs": lambda: _paper("large", "base"),
    "ma-medium": lambda: _paper("medium", "medium", shared=True),
}


# ----------------------------------------------------------------------------------------------------- tokenisers
class VoxelTokenizer(nn.Module):
    """``(B, C, T, H, W) -> (B, T/t * H/h * W/w, dim)``: a Conv3d with kernel = stride = (t, h, w) (``proj``), computed
    as one matmul over the non-overlapping voxels (the same numbers; faster than a strided convolution on CPU, in
    bf16 above all); also returns the grid ``(T/t, H/h, W/w)`` (tokens flattened in ``(t h w)`` order). Trailing
    frames or pixels that do not fill a voxel are dropped, as by the convolution."""

    def __init__(self, channels: int, dim: int, patch: tuple[int, int, int]):
        super().__init__()
        self.patch = tuple(patch)
        self.proj = nn.Conv3d(channels, dim, kernel_size=self.patch, stride=self.patch)

    def forward(self, video: Tensor) -> tuple[Tensor, tuple[int, int, int]]:
        t, h, w = self.patch
        grid = (video.shape[2] // t, video.shape[3] // h, video.shape[4] // w)
        v = video[:, :, :grid[0] * t, :grid[1] * h, :grid[2] * w]
        x = rearrange(v, "b c (T t) (H h) (W w) -> b (T H W) (c t h w)", t=t, h=h, w=w)
        return F.linear(x, self.proj.weight.flatten(1), self.proj.bias), grid  # (B, T' H' W', dim)


class WaveformTokenizer(nn.Module):
    """``(B, L) -> (B, L / patch, dim)``: a Conv1d on the raw waveform with kernel = stride = ``patch`` (``proj``),
    computed as one matmul over the non-overlapping windows (trailing samples that fill no window are dropped)."""

    def __init__(self, dim: int, patch: int):
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv1d(1, dim, kernel_size=patch, stride=patch)

    def forward(self, audio: Tensor) -> tuple[Tensor, tuple[int]]:
        n = audio.shape[1] // self.patch
        x = audio[:, :n * self.patch].reshape(audio.shape[0], n, self.patch)  # (B, L', patch)
        return F.linear(x, self.proj.weight.flatten(1), self.proj.bias), (n,)


# ----------------------------------------------------------------------------------------------------- positions
def interpolate_table(table: Tensor, n: int) -> Tensor:
    """A positional table ``(m, dim)`` resampled to ``n`` rows by linear interpolation with the end rows kept
    (``align_corners``): a constant table stays constant, a linear one stays linear."""
    if n == table.shape[0]:
        return table
    return F.interpolate(table.T[None], size=n, mode="linear", align_corners=True)[0].T


class FactorizedPositions(nn.Module):
    """VATT's positional encoding for a grid of tokens: ``x <- Dropout(x + LayerNorm(sum_a E_a[i_a]))``.

    One learnable table per axis (``shape`` the configured maximum grid, init truncated normal with sigma
    ``dim ** -0.5``), summed over the grid by :class:`paperzoo.nn.posenc.FactorizedPositionalEmbedding`; a grid other
    than ``shape`` uses every table interpolated to its size (:func:`interpolate_table`), never a crop.
    """

    def __init__(self, shape: tuple[int, ...], dim: int, dropout: float = 0.1, eps: float = 1e-6):
        super().__init__()
        self.shape = tuple(shape)
        self.pe = FactorizedPositionalEmbedding(self.shape, dim)
        for t in self.pe.tables:
            nn.init.trunc_normal_(t, std=dim**-0.5, a=-2 * dim**-0.5, b=2 * dim**-0.5)
        self.norm = LayerNorm(dim, eps)
        self.dropout = nn.Dropout(dropout)

    def encoding(self, grid: tuple[int, ...] | None = None) -> Tensor:
        """``(prod(grid), dim)``: the summed tables at ``grid`` (interpolated if it is not the built one), before
        the LayerNorm."""
        grid = self.shape if grid is None else tuple(grid)
        if len(grid) != len(self.shape) or any(n < 1 for n in grid):
            raise ValueError(f"grid must have {len(self.shape)} positive sizes, got {grid}")
        if grid == self.shape:
            return self.pe()
        dim = self.pe.dim
        out = 0
        for axis, (n, table) in enumerate(zip(grid, self.pe.tables, strict=True)):  # <= 3 axes, not positions
            view = [1] * len(grid) + [dim]
            view[axis] = n
            out = out + interpolate_table(table, n).view(view)
        return out.reshape(-1, dim)

    def forward(self, x: Tensor, grid: tuple[int, ...] | None = None) -> Tensor:
        """x (B, prod(grid), dim) -> the same with positions added."""
        return self.dropout(x + self.norm(self.encoding(grid)).to(x.dtype))


# ----------------------------------------------------------------------------------------------------- DropToken
class DropToken(nn.Module):
    """DropToken (sec. 3.3) as the official ``_random_patch_selection``: in training, permute the token positions
    with one random permutation shared by the whole batch (``per_sample``: one per sample) and keep the first
    ``int(keep_rate * max_tokens)``; identity in eval mode or at ``keep_rate = 1``. ``max_tokens`` is the configured
    maximum, so an input with at most that many tokens keeps them all (still permuted, as the official code)."""

    def __init__(self, keep_rate: float, max_tokens: int, per_sample: bool = False):
        super().__init__()
        if not 0.0 < keep_rate <= 1.0:
            raise ValueError(f"keep_rate must be in (0, 1] (the kept fraction), got {keep_rate}")
        self.keep_rate, self.max_tokens, self.per_sample = keep_rate, max_tokens, per_sample
        self.keep = max(1, int(keep_rate * max_tokens))

    def forward(self, x: Tensor) -> Tensor:
        """x (B, N, dim) -> (B, min(N, keep), dim)."""
        if not self.training or self.keep_rate >= 1.0:
            return x
        b, n, _ = x.shape
        if self.per_sample:  # argsort of uniform noise: an independent permutation per sample
            idx = torch.rand(b, n, device=x.device).argsort(dim=1)[:, :self.keep]
            return x.gather(1, idx[..., None].expand(-1, -1, x.shape[-1]))
        idx = torch.randperm(n, device=x.device)[:self.keep]  # one permutation, tiled over the batch
        return x[:, idx]

    def extra_repr(self) -> str:
        return f"keep_rate={self.keep_rate}, keep={self.keep} of max {self.max_tokens}, per_sample={self.per_sample}"


class AggToken(nn.Module):
    """The learnable [AGG] token (glorot-uniform init), prepended without a position: ``(B, N, d) -> (B, 1 + N, d)``."""

    def __init__(self, dim: int):
        super().__init__()
        self.token = nn.Parameter(torch.empty(1, 1, dim))
        bound = math.sqrt(6.0 / (1 + dim))
        nn.init.uniform_(self.token, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.token.to(x.dtype).expand(x.shape[0], -1, -1), x], dim=1)


# ----------------------------------------------------------------------------------------------------- heads
class CommonSpaceHeads(nn.Module):
    """FAC (sec. 3.4): video -> va (Linear-BN-ReLU-Linear-BN), va -> vt (ReLU-Linear-BN), audio -> va (Linear),
    text -> vt (Linear). Returns un-normalised embeddings (the loss L2-normalises them)."""

    def __init__(self, cfg: VATTConfig, video_dim: int, audio_dim: int, text_dim: int):
        super().__init__()
        va, vt = cfg.va_dim, cfg.vt_dim

        def bn(n: int) -> nn.BatchNorm1d:
            return nn.BatchNorm1d(n, momentum=cfg.bn_momentum, eps=cfg.bn_eps)

        self.video_to_va = nn.Sequential(nn.Linear(video_dim, va, bias=False), bn(va), nn.ReLU(),
                                         nn.Linear(va, va, bias=False), bn(va))
        self.va_to_vt = nn.Sequential(nn.ReLU(), nn.Linear(va, vt, bias=False), bn(vt))
        self.audio_to_va = nn.Linear(audio_dim, va)
        self.text_to_vt = nn.Linear(text_dim, vt)

    def forward(self, video: Tensor, audio: Tensor, text: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """pooled features video (B, dv), audio (B, da), text (B*K, dt) -> (video_va, video_vt, audio_va, text_vt)."""
        v_va = self.video_to_va(video)  # (B, va)
        return v_va, self.va_to_vt(v_va), self.audio_to_va(audio), self.text_to_vt(text)


# ----------------------------------------------------------------------------------------------------- the model
class _Stream(nn.Module):
    """One modality's input side: tokeniser -> (pre-projection) -> positions -> DropToken -> [AGG]."""

    def __init__(self, tokenizer: nn.Module, dim: int, grid: tuple[int, ...], cfg: VATTConfig, drop: bool,
                 pre_proj: bool, eps: float):
        super().__init__()
        self.tokenizer = tokenizer
        self.pre_proj = nn.Sequential(nn.Linear(dim, dim), nn.GELU()) if pre_proj else None
        self.pos = FactorizedPositions(grid, dim, cfg.pos_dropout, eps)
        n = math.prod(grid)
        self.drop = DropToken(cfg.keep_rate, n, cfg.per_sample_drop) if drop else None
        self.agg = AggToken(dim)

    def forward(self, x: Tensor) -> Tensor:
        x, grid = self.tokenizer(x)
        if self.pre_proj is not None:
            x = self.pre_proj(x)
        x = self.pos(x, grid)
        if self.drop is not None:
            x = self.drop(x)
        return self.agg(x)  # (B, 1 + kept, dim)


class _Words(nn.Module):
    """Word ids (B, S) -> embeddings (B, S, dim) by a learned table (``tokenizer`` protocol: returns the grid)."""

    def __init__(self, vocab_size: int, word_dim: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        self.proj = nn.Linear(word_dim, dim, bias=False) if word_dim != dim else None

    def forward(self, ids: Tensor) -> tuple[Tensor, tuple[int]]:
        x = self.embed(ids)
        return (x if self.proj is None else self.proj(x)), (ids.shape[1],)


@dataclass
class VATTOutput(ModelOutput):
    """Pooled features (the [AGG] outputs): ``video`` (B, dv), ``audio`` (B, da), ``text`` (B, K, dt); common-space
    embeddings (not normalised): ``video_va`` (B, va), ``video_vt`` (B, vt), ``audio_va`` (B, va), ``text_vt``
    (B, K, vt)."""

    video_va: Tensor
    video_vt: Tensor
    audio_va: Tensor
    text_vt: Tensor
    video: Tensor
    audio: Tensor
    text: Tensor


class VATT(nn.Module):
    """VATT with modality-specific backbones or the modality-agnostic shared one (``cfg.backbone``).

    ``forward(video (B, C, T, H, W) float, audio (B, L) float, text (B, K, S) int64 word ids, 0 = padding)`` ->
    :class:`VATTOutput`. ``encode_video`` / ``encode_audio`` / ``encode_text`` return the pooled features alone.
    """

    config_class = VATTConfig

    def __init__(self, cfg: VATTConfig):
        super().__init__()
        self.cfg = cfg
        shared = cfg.backbone == "shared"
        bv, ba, bt = (cfg.shared,) * 3 if shared else (cfg.video, cfg.audio, cfg.text)
        self.video_in = _Stream(VoxelTokenizer(cfg.channels, bv.dim, cfg.video_patch), bv.dim, cfg.video_grid, cfg,
                                True, shared, bv.norm_eps)
        self.audio_in = _Stream(WaveformTokenizer(ba.dim, cfg.audio_patch), ba.dim, (cfg.audio_tokens,), cfg, True,
                                shared, ba.norm_eps)
        if shared:  # text with an absolute 1-D table in the shared model (no relative bias there)
            self.text_in = _Stream(_Words(cfg.vocab_size, cfg.word_dim, bt.dim), bt.dim, (cfg.text_len,), cfg, False,
                                   True, bt.norm_eps)
            self.text_agg = self.text_pre = None
            self.backbone = TransformerEncoder(cfg.shared)
            self.post = nn.ModuleDict({m: nn.Sequential(nn.Linear(bt.dim, cfg.post_dim), nn.GELU())
                                       for m in ("video", "audio", "text")})
            dims = (cfg.post_dim,) * 3
        else:  # the official text side: word embedding, [AGG] in word space, then Dense(d, no bias) + GELU
            self.text_in = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
            self.text_agg = AggToken(cfg.word_dim)
            self.text_pre = nn.Sequential(nn.Linear(cfg.word_dim, bt.dim, bias=False), nn.GELU())
            self.backbones = nn.ModuleDict({"video": TransformerEncoder(bv), "audio": TransformerEncoder(ba),
                                            "text": TransformerEncoder(bt)})
            self.post = None
            dims = (bv.dim, ba.dim, bt.dim)
        self.heads = CommonSpaceHeads(cfg, *dims)

    @staticmethod
    def example_inputs(cfg: VATTConfig, batch: int = 2) -> dict[str, Tensor]:
        g = torch.Generator().manual_seed(0)
        text = torch.randint(2, cfg.vocab_size, (batch, 2, cfg.text_len), generator=g)
        text[:, :, cfg.text_len // 2:] = 0
        return {"video": torch.rand(batch, cfg.channels, cfg.frames, cfg.size, cfg.size, generator=g) * 2 - 1,
                "audio": torch.randn(batch, cfg.audio_samples, generator=g) * 0.1, "text": text}

    def _encoder(self, modality: str) -> TransformerEncoder:
        return self.backbone if self.post is not None else self.backbones[modality]

    def _pool(self, modality: str, x: Tensor, keep: Tensor | None = None) -> Tensor:
        h = self._encoder(modality)(x, key_padding_mask=keep).last_hidden_state[:, 0]  # the [AGG] output
        return h if self.post is None else self.post[modality](h)

    def encode_video(self, video: Tensor) -> Tensor:
        """video (B, C, T, H, W) in [-1, 1] -> pooled features (B, d)."""
        _check_video(video, self.cfg)
        return self._pool("video", self.video_in(video))

    def encode_audio(self, audio: Tensor) -> Tensor:
        """audio (B, L) raw waveform -> pooled features (B, d)."""
        _check_audio(audio, self.cfg)
        return self._pool("audio", self.audio_in(audio))

    def encode_text(self, text: Tensor) -> Tensor:
        """text (B, S) or (B, K, S) word ids (0 = padding) -> pooled features (B, d) or (B, K, d)."""
        _check_text(text, self.cfg)
        shape = text.shape[:-1]
        ids = text.reshape(-1, text.shape[-1])  # (B K, S)
        if not torch.compiler.is_compiling():  # trailing all-padding columns change nothing (they are masked): cut
            used = int((ids != 0).any(0).nonzero().max()) + 1 if bool((ids != 0).any()) else 1  # them (eager only:
            ids = ids[:, :used]  # a data-dependent length would break a compiled graph)
        keep = torch.cat([ids.new_ones(ids.shape[0], 1, dtype=torch.bool), as_keep_mask(ids)], 1)  # [AGG] + words
        if self.post is not None:  # the absolute table covers text_len words: pad to it, never interpolate
            ids = F.pad(ids, (0, self.cfg.text_len - ids.shape[1]))
            keep = torch.cat([ids.new_ones(ids.shape[0], 1, dtype=torch.bool), as_keep_mask(ids)], 1)
            x = self.text_in(ids)
        else:
            x = self.text_pre(self.text_agg(self.text_in(ids)))
        if not torch.compiler.is_compiling() and bool(keep.all()):
            keep = None  # no padding: SDPA's mask-free path (eager only, like the shared text encoder)
        return self._pool("text", x, keep).reshape(*shape, -1)

    def forward(self, video: Tensor, audio: Tensor, text: Tensor) -> VATTOutput:
        v, a, t = self.encode_video(video), self.encode_audio(audio), self.encode_text(text)
        if t.ndim == 2:
            t = t[:, None]
        if not (v.shape[0] == a.shape[0] == t.shape[0]):
            raise ValueError(f"video, audio and text must share the batch size, got {v.shape[0]}, {a.shape[0]}, "
                             f"{t.shape[0]}")
        b, k = t.shape[:2]
        v_va, v_vt, a_va, t_vt = self.heads(v, a, t.reshape(b * k, -1))
        return VATTOutput(v_va, v_vt, a_va, t_vt.reshape(b, k, -1), v, a, t)


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(cfg: VATTConfig) -> None:
    if cfg.backbone not in BACKBONES:
        raise ValueError(f"backbone must be one of {BACKBONES}, got {cfg.backbone!r}")
    if len(cfg.video_patch) != 3 or any(p < 1 for p in cfg.video_patch):
        raise ValueError(f"video_patch must be three positive sizes (t, h, w), got {cfg.video_patch}")
    t, h, w = cfg.video_patch
    if cfg.frames % t or cfg.size % h or cfg.size % w:
        raise ValueError(f"frames ({cfg.frames}) and size ({cfg.size}) must be multiples of video_patch "
                         f"{cfg.video_patch}")
    if cfg.audio_samples % cfg.audio_patch:
        raise ValueError(f"audio_samples ({cfg.audio_samples}) must be a multiple of audio_patch ({cfg.audio_patch})")
    if not 0.0 < cfg.keep_rate <= 1.0:
        raise ValueError(f"keep_rate must be in (0, 1] (DropToken's kept fraction), got {cfg.keep_rate}")
    if cfg.backbone == "specific" and cfg.text.position != "t5":
        raise ValueError(f"the modality-specific text backbone uses T5's relative bias: position='t5', "
                         f"got {cfg.text.position!r}")
    if cfg.backbone == "shared" and cfg.shared.position != "none":
        raise ValueError(f"the shared backbone takes positions from its inputs: position='none', "
                         f"got {cfg.shared.position!r}")


def _check_video(video: Tensor, cfg: VATTConfig) -> None:
    if not isinstance(video, Tensor) or video.ndim != 5 or video.shape[1] != cfg.channels:
        raise ValueError(f"video must have shape (batch, channels={cfg.channels}, frames, height, width), got "
                         f"{tuple(getattr(video, 'shape', ()))}")
    if not video.is_floating_point():
        raise ValueError(f"video must be a floating-point tensor in [-1, 1], got {video.dtype}")
    t, h, w = cfg.video_patch
    if video.shape[2] < t or video.shape[3] < h or video.shape[4] < w:
        raise ValueError(f"video must have at least one {cfg.video_patch} voxel, got {tuple(video.shape[2:])}")


def _check_audio(audio: Tensor, cfg: VATTConfig) -> None:
    if not isinstance(audio, Tensor) or audio.ndim != 2 or audio.shape[1] < cfg.audio_patch:
        raise ValueError(f"audio must have shape (batch, samples >= audio_patch={cfg.audio_patch}), got "
                         f"{tuple(getattr(audio, 'shape', ()))}")
    if not audio.is_floating_point():
        raise ValueError(f"audio must be a floating-point waveform, got {audio.dtype}")


def _check_text(text: Tensor, cfg: VATTConfig) -> None:
    if not isinstance(text, Tensor) or text.ndim not in (2, 3) or not 1 <= text.shape[-1] <= cfg.text_len:
        raise ValueError(f"text must have shape (batch, words <= {cfg.text_len}) or (batch, captions, words), got "
                         f"{tuple(getattr(text, 'shape', ()))}")
    if text.dtype != torch.int64:
        raise ValueError(f"text must be int64 word ids, got {text.dtype}")
    check_token_ids(text, cfg.vocab_size, "text")
