"""Positional encodings compared in one small causal character LM (Vaswani et al. 2017 and successors)."""

from paperzoo.registry import Paper, register

from .model import CharLM, CharLMConfig

__all__ = ["CharLM", "CharLMConfig"]

register(Paper(
    name="posenc",
    title="Attention Is All You Need (positional encodings: sinusoidal vs learned)",
    arxiv="1706.03762",
    year=2017,
    status="checked",
    models=("CharLM",),
    recipes={"posenc": "paperzoo.papers.posenc.recipe:run"},
    claims=("Sinusoidal and learned positional embeddings give nearly identical results (Vaswani et al. 2017, "
            "Table 3 row E).",
            "Relative schemes (T5 bias, rotary, ALiBi) extrapolate beyond the training length; learned absolute "
            "positions cannot (Press et al. 2022).",
            "A causal LM learns without positional encodings: the causal mask leaks position (Haviv et al. 2022).",
            "Without positional information a bidirectional encoder is permutation-equivariant."),
    presets=("tiny", "small"),
))
