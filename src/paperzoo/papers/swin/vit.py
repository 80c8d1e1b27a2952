"""A plain ViT (Dosovitskiy et al., 2021) on the shared core, the baseline Swin is compared with.

``pixel_values (B, C, H, W)`` -> patches of ``patch_size`` embedded by a strided conv, plus a learned 2-D position
embedding (bicubically resized for other sizes), a pre-norm :class:`~paperzoo.nn.transformer.TransformerEncoder`
with global self-attention (cost quadratic in the number of patches), mean pooling (or a class token) and a
linear head. Same stem, pooling and head conventions as our Swin, so a comparison isolates the attention pattern
and the hierarchy.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from paperzoo.nn.outputs import BaseModelOutput, ClassifierOutput
from paperzoo.nn.transformer import TransformerConfig, TransformerEncoder

from .model import _check_labels, _check_pixel_values

__all__ = ["ViTConfig", "ViT", "vit_flops"]


@dataclass(frozen=True)
class ViTConfig:
    """ViT hyper-parameters; ``pool`` is ``"mean"`` (global average, as Swin) or ``"cls"`` (the ViT paper)."""

    image_size: int = 32
    patch_size: int = 2
    in_channels: int = 3
    dim: int = 128
    num_layers: int = 6
    num_heads: int = 4
    mlp_ratio: float = 4.0
    drop_path_rate: float = 0.1
    dropout: float = 0.0
    pool: str = "mean"
    num_classes: int = 10
    norm_eps: float = 1e-5

    def __post_init__(self):
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> ViTConfig:
        """``tiny`` (tests), ``small`` (the CIFAR-10 reproduction: 1.40M parameters, 96M MACs at 32x32, matched to
        ``SwinConfig.preset("small")``), ``vit-s`` (ViT-S/16)."""
        presets = {"tiny": cls(dim=32, num_layers=2, num_heads=2, drop_path_rate=0.0),
                   "small": cls(patch_size=4, dim=128, num_layers=7, num_heads=4, drop_path_rate=0.1),
                   "vit-s": cls(image_size=224, patch_size=16, dim=384, num_layers=12, num_heads=6,
                                num_classes=1000)}
        if name not in presets:
            raise ValueError(f"preset must be one of {sorted(presets)}, got {name!r}")
        return dataclasses.replace(presets[name], **overrides)


class ViT(nn.Module):
    """Vision Transformer classifier; ``forward(pixel_values, labels=None) -> ClassifierOutput`` and
    :meth:`encode` ``-> BaseModelOutput`` with ``last_hidden_state (B, tokens, dim)``."""

    config_class = ViTConfig

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = cfg = config
        self.patch_embed = nn.Conv2d(cfg.in_channels, cfg.dim, cfg.patch_size, cfg.patch_size)
        g = cfg.image_size // cfg.patch_size
        self.pos_embed = nn.Parameter(torch.randn(1, g, g, cfg.dim) * 0.02)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim)) if cfg.pool == "cls" else None
        self.encoder = TransformerEncoder(TransformerConfig(
            dim=cfg.dim, num_layers=cfg.num_layers, num_heads=cfg.num_heads, ffn_dim=int(cfg.dim * cfg.mlp_ratio),
            norm_eps=cfg.norm_eps, prenorm=True, dropout=cfg.dropout, drop_path=cfg.drop_path_rate))
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    @staticmethod
    def example_inputs(config: ViTConfig, batch: int = 2) -> dict[str, Tensor]:
        """``{"pixel_values": (batch, in_channels, image_size, image_size)}`` of standard normal noise."""
        return {"pixel_values": torch.randn(batch, config.in_channels, config.image_size, config.image_size)}

    def encode(self, pixel_values: Tensor) -> BaseModelOutput:
        _check_pixel_values(pixel_values, self.config.in_channels, self.patch_embed.weight.dtype,
                            self.config.patch_size, f"one patch of patch_size {self.config.patch_size}")
        p = self.config.patch_size
        h, w = pixel_values.shape[-2:]
        if h % p or w % p:
            pixel_values = F.pad(pixel_values, (0, -w % p, 0, -h % p))
        x = rearrange(self.patch_embed(pixel_values), "b c h w -> b h w c")  # (B, H/p, W/p, dim)
        pos = self.pos_embed
        if pos.shape[1:3] != x.shape[1:3]:
            pos = rearrange(F.interpolate(rearrange(pos, "1 h w c -> 1 c h w"), size=x.shape[1:3], mode="bicubic",
                                          align_corners=False), "1 c h w -> 1 h w c")
        x = rearrange(x + pos, "b h w c -> b (h w) c")
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1)
        x = self.encoder(x).last_hidden_state  # (B, tokens, dim): global attention, cost ~ tokens^2
        pooled = x[:, 0] if self.cls_token is not None else x.mean(1)
        return BaseModelOutput(last_hidden_state=x, pooler_output=pooled)

    def forward(self, pixel_values: Tensor, labels: Tensor | None = None, **_) -> ClassifierOutput:
        logits = self.head(self.encode(pixel_values).pooler_output)
        loss = None
        if labels is not None:
            _check_labels(labels, logits.shape[0])
            loss = F.cross_entropy(logits, labels)
        return ClassifierOutput(loss=loss, logits=logits)


def vit_flops(cfg: ViTConfig, height: int, width: int) -> int:
    """Forward multiply-adds on one image (the convention of :func:`~paperzoo.papers.swin.model.swin_flops`):
    patch embedding, per block ``4 n C^2`` (qkv, proj) + ``2 n^2 C`` (attention) + ``2 n C hidden`` (MLP), head."""
    p, c = cfg.patch_size, cfg.dim
    n = math.ceil(height / p) * math.ceil(width / p) + (cfg.pool == "cls")
    hidden = int(c * cfg.mlp_ratio)
    block = 4 * n * c * c + 2 * n * n * c + 2 * n * c * hidden
    return n * c * cfg.in_channels * p * p + cfg.num_layers * block + c * cfg.num_classes


# ----------------------------------------------------------------------------------------------------- checks


def _check_config(cfg: ViTConfig) -> None:
    if cfg.pool not in ("mean", "cls"):
        raise ValueError(f"pool must be 'mean' or 'cls', got {cfg.pool!r}")
    if cfg.dim % cfg.num_heads:
        raise ValueError(f"dim ({cfg.dim}) must be divisible by num_heads ({cfg.num_heads})")
