"""SmallCNN: two conv blocks and an MLP head for 28x28 grey images."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class SmallCNNConfig:
    """``channels`` of the two conv blocks, ``hidden`` width of the MLP head, ``num_classes``, head ``dropout``.

    The model is small enough for tests at its one size, so the presets ``tiny`` and ``small`` are the same
    config (the recipe's ``tiny`` differs from ``small`` by data and steps, not by model).
    """

    channels: tuple[int, int] = (32, 64)
    hidden: int = 128
    num_classes: int = 10
    dropout: float = 0.25

    def __post_init__(self) -> None:
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> SmallCNNConfig:
        """``tiny`` (tests) or ``small`` (the reproduction): the same config; keyword overrides on top."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return cls(**{**PRESETS[name], **overrides})


PRESETS: dict[str, dict] = {"tiny": {}, "small": {}}


class SmallCNN(nn.Module):
    """(conv3x3-BN-ReLU-maxpool) x 2 -> flatten -> Linear-ReLU-Dropout -> Linear.

    Input (batch, 1, 28, 28) float, output logits (batch, num_classes).
    """

    config_class = SmallCNNConfig

    def __init__(self, config: SmallCNNConfig):
        super().__init__()
        self.config = config
        c1, c2 = config.channels
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        )  # (batch, c2, 7, 7)
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(c2 * 7 * 7, config.hidden), nn.ReLU(inplace=True), nn.Dropout(config.dropout),
            nn.Linear(config.hidden, config.num_classes),
        )

    @classmethod
    def example_inputs(cls, config: SmallCNNConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(batch, 1, 28, 28)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_images(x)
        return self.head(self.features(x))


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: SmallCNNConfig) -> None:
    if len(c.channels) != 2 or not all(type(n) is int and n >= 1 for n in c.channels):
        raise ValueError(f"SmallCNNConfig.channels must be two positive ints, got {c.channels!r}")
    for name in ("hidden", "num_classes"):
        if type(getattr(c, name)) is not int or getattr(c, name) < 1:
            raise ValueError(f"SmallCNNConfig.{name} must be a positive int, got {getattr(c, name)!r}")
    if not 0.0 <= c.dropout < 1.0:
        raise ValueError(f"SmallCNNConfig.dropout must be in [0, 1), got {c.dropout!r}")


def _check_images(x: torch.Tensor) -> None:
    if x.dim() != 4 or x.shape[1:] != (1, 28, 28) or not x.is_floating_point():
        raise ValueError(f"SmallCNN expects float images (batch, 1, 28, 28), got {x.dtype} {tuple(x.shape)}")
