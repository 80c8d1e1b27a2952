"""Switch Transformers (Fedus, Zoph & Shazeer, 2021): top-1 routed expert FFNs at equal FLOPs per token."""

from paperzoo.papers.switch.model import SwitchLM, SwitchLMConfig
from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig
from paperzoo.registry import Paper, register

__all__ = ["SwitchLM", "SwitchLMConfig", "SwitchMoE", "SwitchMoEConfig"]

register(Paper(
    name="switch",
    title="Switch Transformers: Scaling to Trillion Parameter Models with Simple and Efficient Sparsity",
    arxiv="2101.03961",
    year=2021,
    status="checked",
    models=("SwitchMoE", "SwitchLM"),
    recipes={"switch": "paperzoo.papers.switch.recipe:run"},
    benches={"switch": "paperzoo.bench.switch:run"},
    claims=(
        "At equal FLOPs per token and equal steps, a Switch LM reaches a lower validation perplexity than the "
        "dense model, and reaches the dense model's final perplexity in fewer steps (paper: up to 7x at scale).",
        "The load-balancing loss keeps expert load near uniform; without it, load collapses onto few experts.",
        "Raising the capacity factor lowers the fraction of dropped tokens (1.0 > 1.25 > 2.0).",
    ),
    presets=("tiny", "mini", "small", "medium"),
))
