"""MobileNetV2: Inverted Residuals and Linear Bottlenecks (Sandler et al., 2018, arXiv:1801.04381)."""

from paperzoo.papers.mobilenetv2.model import MobileNetV2Config, MobileNetV2ForImageClassification, MobileNetV2Model
from paperzoo.registry import Paper, register

__all__ = ["MobileNetV2Config", "MobileNetV2ForImageClassification", "MobileNetV2Model"]

register(Paper(
    name="mobilenetv2",
    title="MobileNetV2: Inverted Residuals and Linear Bottlenecks",
    arxiv="1801.04381",
    year=2018,
    status="checked",
    models=("MobileNetV2Model", "MobileNetV2ForImageClassification"),
    recipes={"mobilenetv2": "paperzoo.papers.mobilenetv2.recipe:run"},
    benches={"mobilenetv2": "paperzoo.bench.mobilenetv2:run"},
    claims=(
        "A linear bottleneck (no ReLU6 after the 1x1 projection) gives higher accuracy than a non-linear one "
        "(paper Fig. 6a).",
        "Shortcuts between the thin bottlenecks give higher accuracy than shortcuts between the expanded layers "
        "or no shortcuts (paper Fig. 6b).",
        "MobileNetV2 1.0/224 has 3.4M parameters and 300M multiply-adds (paper Table 4).",
    ),
    presets=("tiny", "small", "cifar"),
))
