"""A small causal transformer language model whose only varying part is the positional encoding.

``CharLM``: token embedding -> :class:`~paperzoo.nn.transformer.TransformerEncoder` (pre-norm, causal mask,
``position`` one of none / sinusoidal / learned / t5 / rotary / alibi) -> linear head over the vocabulary.
Absolute encodings are added to the token embeddings by the encoder; T5 and ALiBi biases are computed once per
forward and shared by all layers; rotary rotates q and k in every layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import nn

from paperzoo.nn.embedding import TokenEmbeddings
from paperzoo.nn.transformer import POSITIONS, TransformerConfig, TransformerEncoder

ENCODINGS = POSITIONS  # ("none", "sinusoidal", "learned", "t5", "rotary", "alibi")


@dataclass(frozen=True)
class CharLMConfig:
    """A character LM: ``vocab_size`` symbols, ``transformer`` the stack (its ``max_len`` is the training length,
    the number of learned positions). ``causal=False`` builds a bidirectional encoder (the permutation test).
    ``learned_init_std``: init std of a learned position table (0.02 as GPT/BERT; the sinusoid's rms is 0.71)."""

    vocab_size: int = 65
    learned_init_std: float = 0.02
    transformer: TransformerConfig = field(default_factory=lambda: TransformerConfig(
        dim=128, depth=4, num_heads=4, prenorm=True, position="none", max_len=128, causal=True))

    @classmethod
    def preset(cls, name: str, position: str, vocab_size: int = 65, causal: bool = True) -> CharLMConfig:
        """``tiny`` (tests: dim 32, 2 layers, L=32) or ``small`` (the study: dim 96, 3 layers, 4 heads, L=128)."""
        sizes = {"tiny": dict(dim=32, depth=2, num_heads=2, max_len=32),
                 "small": dict(dim=96, depth=3, num_heads=4, max_len=128)}
        if name not in sizes:
            raise ValueError(f"preset must be one of {tuple(sizes)}, got {name!r}")
        if position not in ENCODINGS:
            raise ValueError(f"position must be one of {ENCODINGS}, got {position!r}")
        t = TransformerConfig(**sizes[name], prenorm=True, position=position, causal=causal,
                              t5_max_distance=sizes[name]["max_len"])
        return cls(vocab_size=vocab_size, transformer=t)

    def with_position(self, position: str, learned_init_std: float = 0.02) -> CharLMConfig:
        if not learned_init_std > 0:
            raise ValueError(f"learned_init_std must be > 0, got {learned_init_std}")
        return replace(self, transformer=replace(self.transformer, position=position),
                       learned_init_std=learned_init_std)


class CharLM(nn.Module):
    """``forward(input_ids (batch, seq) int) -> logits (batch, seq, vocab_size)``.

    With ``position="learned"`` a ``seq`` beyond ``max_len`` raises ``ValueError`` (no learned row); every other
    encoding accepts any length.
    """

    def __init__(self, cfg: CharLMConfig):
        super().__init__()
        self.cfg = cfg
        t = cfg.transformer
        self.embed = TokenEmbeddings(cfg.vocab_size, t.dim, position="none", type_vocab_size=0, norm_eps=None)
        self.encoder = TransformerEncoder(t)
        if t.position == "learned" and cfg.learned_init_std != 0.02:  # the table's own init is std 0.02
            nn.init.normal_(self.encoder.abs_pos.weight, std=cfg.learned_init_std)
        self.head = nn.Linear(t.dim, cfg.vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        if input_ids.ndim != 2 or input_ids.is_floating_point():
            raise ValueError(f"input_ids must be an integer (batch, seq) tensor, got {input_ids.dtype} "
                             f"of shape {tuple(input_ids.shape)}")
        return self.head(self.encoder(self.embed(input_ids)).last_hidden_state)
