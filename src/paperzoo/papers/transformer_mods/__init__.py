"""Do Transformer Modifications Transfer? (Narang et al. 2021): the modifications as configuration of the shared
core, a seeded grid over them, and our answer to the paper's Table 1."""

from paperzoo.registry import Paper, register

from .model import ModsClassifier, ModsConfig, ModsLM

__all__ = ["ModsClassifier", "ModsConfig", "ModsLM"]

register(Paper(
    name="transformer-mods",
    title="Do Transformer Modifications Transfer Across Implementations and Applications?",
    arxiv="2102.11972",
    year=2021,
    status="checked",
    models=("ModsLM", "ModsClassifier"),
    recipes={"transformer-mods": "paperzoo.papers.transformer_mods.recipe:run"},
    benches={"transformer-mods": "paperzoo.bench.transformer_mods:run"},
    claims=("Most transformer modifications do not meaningfully improve on a well-tuned baseline; the ones that "
            "help are simple (GLU-family activations, RMSNorm) or add parameters (Switch).",),
    presets=("tiny", "quick", "small", "full", "full-mlm"),
))
