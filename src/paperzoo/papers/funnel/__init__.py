"""Funnel-Transformer (Dai, Lai, Yang & Le, 2020): filtering out sequential redundancy by pooling between blocks."""

from paperzoo.registry import Paper, register

from .model import FunnelBase, FunnelClassifier, FunnelConfig, FunnelModel

__all__ = ["FunnelBase", "FunnelClassifier", "FunnelConfig", "FunnelModel"]

register(Paper(
    name="funnel",
    title="Funnel-Transformer: Filtering out Sequential Redundancy for Efficient Language Processing",
    arxiv="2006.03236",
    year=2020,
    status="checked",
    models=("FunnelModel", "FunnelBase", "FunnelClassifier"),
    recipes={"funnel": "paperzoo.papers.funnel.recipe:run"},
    benches={"funnel": "paperzoo.bench.funnel:run", "funnel-costs": "paperzoo.bench.funnel:costs"},
    claims=(
        "With comparable or fewer FLOPs, a Funnel encoder (pooling the sequence between blocks, pooled queries "
        "attending to full-length keys) beats a standard Transformer on sequence-level tasks (paper Tables 1-3: "
        "GLUE, text classification).",
        "Funnel is comparatively weaker on token-level tasks, which need the upsampling decoder (paper Table 4).",
    ),
    presets=("tiny", "small", "base"),
))
