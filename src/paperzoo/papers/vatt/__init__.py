"""VATT (Akbari et al., 2021): transformers for multimodal self-supervised learning from raw video, audio and text,
trained contrastively (NCE video-audio, MIL-NCE video-text), with DropToken."""

from paperzoo.registry import Paper, register

from .evaluate import linear_probe, retrieval_metrics
from .model import (
    PRESETS,
    SIZES,
    VATT,
    AggToken,
    CommonSpaceHeads,
    DropToken,
    FactorizedPositions,
    VATTConfig,
    VATTOutput,
    VoxelTokenizer,
    WaveformTokenizer,
    interpolate_table,
)
from .objective import VATTLoss, all_gather_with_grad, mil_nce_loss, nce_loss

__all__ = ["PRESETS", "SIZES", "AggToken", "CommonSpaceHeads", "DropToken", "FactorizedPositions", "VATT",
           "VATTConfig", "VATTLoss", "VATTOutput", "VoxelTokenizer", "WaveformTokenizer", "all_gather_with_grad",
           "interpolate_table", "linear_probe", "mil_nce_loss", "nce_loss", "retrieval_metrics"]

register(Paper(
    name="vatt",
    title="VATT: Transformers for Multimodal Self-Supervised Learning from Raw Video, Audio and Text",
    arxiv="2104.11178",
    year=2021,
    status="checked",
    models=("VATT",),
    recipes={"vatt": "paperzoo.papers.vatt.recipe:run"},
    benches={"vatt": "paperzoo.bench.vatt:run"},
    claims=(
        "Contrastive pretraining (NCE video-audio, MIL-NCE video-text) gives features that a linear probe reads "
        "far better than the same encoders at random initialisation.",
        "DropToken at 50% roughly halves the training cost for a small loss of accuracy.",
        "A modality-agnostic shared backbone is competitive with modality-specific ones at a fraction of the "
        "parameters.",
    ),
    presets=("tiny", "small"),
))
