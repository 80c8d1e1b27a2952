"""Swin Transformer (Liu et al., 2021): shifted-window attention, hierarchical backbone, linear cost in area."""

from paperzoo.registry import Paper, register

from .model import SwinConfig, SwinForImageClassification, SwinModel
from .vit import ViT, ViTConfig

__all__ = ["SwinConfig", "SwinModel", "SwinForImageClassification", "ViT", "ViTConfig"]

register(Paper(
    name="swin",
    title="Swin Transformer: Hierarchical Vision Transformer using Shifted Windows",
    arxiv="2103.14030",
    year=2021,
    status="checked",
    models=("SwinModel", "SwinForImageClassification", "ViT"),
    recipes={"swin": "paperzoo.papers.swin.recipe:run"},
    benches={"swin": "paperzoo.bench.swin:run"},
    claims=(
        "Shifted-window attention has cost linear in image area, unlike global self-attention (quadratic).",
        "At matched parameters and FLOPs, Swin is more accurate than a plain ViT on small images (CIFAR-10 here).",
    ),
    presets=("tiny", "small", "long"),
))
