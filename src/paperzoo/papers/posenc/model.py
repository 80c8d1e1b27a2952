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
SIZES = {"tiny": dict(dim=32, num_layers=2, num_heads=2, max_len=32),  # the transformer of each preset
         "small": dict(dim=96, num_layers=3, num_heads=4, max_len=128)}


@dataclass(frozen=True)
class CharLMConfig:
    """A character LM: ``vocab_size`` symbols, ``transformer`` the stack (its ``max_len`` is the training length,
    the number of learned positions). ``causal=False`` builds a bidirectional encoder (the permutation test).
    ``learned_init_std``: init std of a learned position table (0.02 as GPT/BERT; the sinusoid's rms is 0.71)."""

    vocab_size: int = 65
    learned_init_std: float = 0.02
    transformer: TransformerConfig = field(default_factory=lambda: TransformerConfig(
        dim=128, num_layers=4, num_heads=4, prenorm=True, position="none", max_len=128, causal=True))

    @classmethod
    def preset(cls, name: str, position: str = "sinusoidal", vocab_size: int = 65, causal: bool = True
               ) -> CharLMConfig:
        """``tiny`` (tests: dim 32, 2 layers, L=32) or ``small`` (the study: dim 96, 3 layers, 4 heads, L=128), with
        the ``position`` encoding (default the paper's sinusoid)."""
        _check_preset(name, position)
        t = TransformerConfig(**SIZES[name], prenorm=True, position=position, causal=causal,
                              t5_max_distance=SIZES[name]["max_len"])
        return cls(vocab_size=vocab_size, transformer=t)

    def with_position(self, position: str, learned_init_std: float = 0.02) -> CharLMConfig:
        """This config with another encoding (and init std of a learned table)."""
        _check_std(learned_init_std)
        return replace(self, transformer=replace(self.transformer, position=position),
                       learned_init_std=learned_init_std)


class CharLM(nn.Module):
    """``forward(input_ids (batch, seq) int) -> logits (batch, seq, vocab_size)``.

    With ``position="learned"`` a ``seq`` beyond ``max_len`` raises ``ValueError`` (no learned row); every other
    encoding accepts any length.
    """

    config_class = CharLMConfig

    def __init__(self, config: CharLMConfig):
        super().__init__()
        self.config = config
        t = config.transformer
        self.embed = TokenEmbeddings(config.vocab_size, t.dim, position="none", type_vocab_size=0, norm_eps=None)
        self.encoder = TransformerEncoder(t)
        if t.position == "learned" and config.learned_init_std != 0.02:  # the table's own init is std 0.02
            nn.init.normal_(self.encoder.abs_pos.weight, std=config.learned_init_std)
        self.head = nn.Linear(t.dim, config.vocab_size, bias=False)

    @staticmethod
    def example_inputs(config: CharLMConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        """``{"input_ids": (batch, max_len)}`` of random symbols."""
        return {"input_ids": torch.randint(0, config.vocab_size, (batch, config.transformer.max_len))}

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        _check_input_ids(input_ids)
        x = self.embed(input_ids)  # (batch, seq, dim); absolute encodings are added inside the encoder
        x = self.encoder(x).last_hidden_state  # (batch, seq, dim), causal
        return self.head(x)  # (batch, seq, vocab_size)


# ----------------------------------------------------------------------------------------------------- checks


def _check_preset(name: str, position: str) -> None:
    if name not in SIZES:
        raise ValueError(f"preset must be one of {tuple(SIZES)}, got {name!r}")
    if position not in ENCODINGS:
        raise ValueError(f"position must be one of {ENCODINGS}, got {position!r}")


def _check_std(std: float) -> None:
    if not std > 0:
        raise ValueError(f"learned_init_std must be > 0, got {std}")


def _check_input_ids(input_ids: torch.Tensor) -> None:
    if input_ids.ndim != 2 or input_ids.is_floating_point():
        raise ValueError(f"input_ids must be an integer (batch, seq) tensor, got {input_ids.dtype} "
                         f"of shape {tuple(input_ids.shape)}")
