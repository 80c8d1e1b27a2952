"""Perceiver and Perceiver IO: a latent array cross-attends to large inputs (raw pixels, audio, bytes)."""

from paperzoo.registry import Paper, register

register(Paper(
    name="perceiver",
    title="Perceiver: General Perception with Iterative Attention (and Perceiver IO)",
    arxiv="2103.03206",
    year=2021,
    status="verified",
    models=("Perceiver", "PerceiverEncoder", "PerceiverLayer", "CrossAttentionDecoder", "ClassificationDecoder",
            "MaskedLMDecoder", "PixelAdapter", "PatchAdapter", "AudioAdapter", "BytesAdapter"),
    recipes={"perceiver": "paperzoo.papers.perceiver.recipe:run"},
    benches={"perceiver": "paperzoo.bench.perceiver:run"},
    claims=(
        "A latent cross-attention architecture classifies raw pixels and raw audio competitively with a "
        "same-budget transformer, without convolutional priors (Perceiver, sec. 4).",
        "Its cost grows linearly with the input size M (cross-attention is O(MN), the latent stack O(N^2)).",
    ),
    presets=("tiny", "small"),
))
