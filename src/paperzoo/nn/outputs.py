"""Model outputs whose field names follow Hugging Face's, so converted models are drop-in."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch


@dataclass
class ModelOutput:
    """Base output: attribute access, ``out["name"]``, ``out[0]`` over the fields that are not None."""

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None)

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, str):
            return getattr(self, key)
        return self.to_tuple()[key]


@dataclass
class BaseModelOutput(ModelOutput):
    """``last_hidden_state``: (batch, seq, dim); ``hidden_states``: each layer's input and the last output."""

    last_hidden_state: torch.Tensor
    pooler_output: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


@dataclass
class ClassifierOutput(ModelOutput):
    """``logits``: (batch, classes) or (batch, seq, classes); ``loss`` when labels were given."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    aux_loss: torch.Tensor | None = None
