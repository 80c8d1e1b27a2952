"""SmallCNN: two conv blocks and an MLP head for 28x28 grey images."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class SmallCNNConfig:
    channels: tuple[int, int] = (32, 64)
    hidden: int = 128
    num_classes: int = 10
    dropout: float = 0.25


class SmallCNN(nn.Module):
    """(conv3x3-BN-ReLU-maxpool) x 2 -> flatten -> Linear-ReLU-Dropout -> Linear.

    Input (batch, 1, 28, 28) float, output logits (batch, num_classes).
    """

    def __init__(self, cfg: SmallCNNConfig = SmallCNNConfig()):
        super().__init__()
        c1, c2 = cfg.channels
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(c2 * 7 * 7, cfg.hidden), nn.ReLU(inplace=True), nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, cfg.num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1:] != (1, 28, 28) or not x.is_floating_point():
            raise ValueError(f"SmallCNN expects float images (batch, 1, 28, 28), got {x.dtype} {tuple(x.shape)}")
        return self.head(self.features(x))
