"""Perceiver and Perceiver IO: a latent array cross-attends to large inputs (raw pixels, audio, bytes)."""

from paperzoo.papers.perceiver.adapters import AudioAdapter, BytesAdapter, FeatureAdapter, PatchAdapter, PixelAdapter
from paperzoo.papers.perceiver.decoders import (
    ClassificationDecoder,
    CrossAttentionDecoder,
    MaskedLMDecoder,
    MeanPoolClassifier,
)
from paperzoo.papers.perceiver.model import Perceiver, PerceiverConfig, PerceiverEncoder, PerceiverLayer
from paperzoo.registry import Paper, register

__all__ = ["AudioAdapter", "BytesAdapter", "ClassificationDecoder", "CrossAttentionDecoder", "FeatureAdapter",
           "MaskedLMDecoder", "MeanPoolClassifier", "PatchAdapter", "Perceiver", "PerceiverConfig", "PerceiverEncoder",
           "PerceiverLayer", "PixelAdapter"]

register(Paper(
    name="perceiver",
    title="Perceiver: General Perception with Iterative Attention (and Perceiver IO)",
    arxiv="2103.03206",
    year=2021,
    status="checked",
    models=("Perceiver",),  # adapters, encoder, layers and decoders are its parts, built from its config
    recipes={"perceiver": "paperzoo.papers.perceiver.recipe:run"},
    benches={"perceiver": "paperzoo.bench.perceiver:run"},
    claims=(
        "A latent cross-attention architecture classifies raw pixels and raw audio competitively with a "
        "same-budget transformer, without convolutional priors (Perceiver, sec. 4).",
        "Its cost grows linearly with the input size M (cross-attention is O(MN), the latent stack O(N^2)).",
    ),
    presets=("tiny", "small"),
))
