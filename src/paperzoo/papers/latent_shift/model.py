"""The two networks Latent Shift needs: a convolutional autoencoder (E, D) and a classifier f, for 28x28 grey images.

The paper's autoencoder is a ResNet autoencoder trained on chest X-rays (224 px, latent 512 x 3 x 3) and its
classifiers are torchxrayvision DenseNets; neither is downloadable here, so both are trained by the recipe on the
lesion set (:mod:`paperzoo.data.lesions`). Both contain BatchNorm: explain with them in eval mode.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class AutoencoderConfig:
    """``channels`` of the encoder's three stride-2 stages (28 -> 14 -> 7 -> 4), ``latent_channels`` of the
    (latent_channels, 4, 4) code, ``in_channels`` of the images. The decoder mirrors the encoder and ends in a
    sigmoid: inputs and outputs lie in [0, 1]."""

    channels: tuple[int, int, int] = (16, 32, 64)
    latent_channels: int = 16
    in_channels: int = 1

    def __post_init__(self) -> None:
        _check_ae_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> AutoencoderConfig:
        if name not in AE_PRESETS:
            raise ValueError(f"preset must be one of {sorted(AE_PRESETS)}, got {name!r}")
        return cls(**{**AE_PRESETS[name], **overrides})


AE_PRESETS: dict[str, dict] = {"tiny": {"channels": (8, 8, 16), "latent_channels": 8}, "small": {}}


def _block(cin: int, cout: int, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class Autoencoder(nn.Module):
    """``encode`` (batch, C, 28, 28) in [0, 1] -> z (batch, latent_channels, 4, 4); ``decode`` z -> (batch, C, 28, 28)
    in [0, 1]; ``forward`` = decode(encode(x)). ``input_range`` is what :class:`LatentShift` checks inputs against."""

    config_class = AutoencoderConfig
    input_range = (0.0, 1.0)

    def __init__(self, config: AutoencoderConfig):
        super().__init__()
        self.config = config
        c1, c2, c3 = config.channels
        self.encoder = nn.Sequential(
            *_block(config.in_channels, c1, 2),  # (batch, c1, 14, 14)
            *_block(c1, c2, 2),  # (batch, c2, 7, 7)
            *_block(c2, c3, 2),  # (batch, c3, 4, 4)
            nn.Conv2d(c3, config.latent_channels, 1),  # (batch, latent, 4, 4)
        )
        self.decoder = nn.Sequential(
            nn.Conv2d(config.latent_channels, c3, 1), nn.BatchNorm2d(c3), nn.ReLU(),
            nn.ConvTranspose2d(c3, c2, 3, 2, 1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(),  # (batch, c2, 7, 7)
            nn.ConvTranspose2d(c2, c1, 4, 2, 1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(),  # (batch, c1, 14, 14)
            nn.ConvTranspose2d(c1, c1, 4, 2, 1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(),  # (batch, c1, 28, 28)
            nn.Conv2d(c1, config.in_channels, 3, 1, 1), nn.Sigmoid(),
        )

    @classmethod
    def example_inputs(cls, config: AutoencoderConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return {"x": torch.rand(batch, config.in_channels, 28, 28)}

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        _check_images(x, self.config.in_channels, "Autoencoder.encode")
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


@dataclass(frozen=True)
class ClassifierConfig:
    """``channels`` of the three conv stages (28 -> 14 -> 7), ``num_targets`` multi-label outputs (logits),
    ``in_channels``. ReLUs are separate non-in-place ``nn.ReLU`` modules (Captum's GuidedBackprop overrides them)."""

    channels: tuple[int, int, int] = (16, 32, 64)
    num_targets: int = 2
    in_channels: int = 1

    def __post_init__(self) -> None:
        if len(self.channels) != 3 or not all(type(c) is int and c >= 1 for c in self.channels):
            raise ValueError(f"ClassifierConfig.channels must be three positive ints, got {self.channels!r}")
        for name in ("num_targets", "in_channels"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"ClassifierConfig.{name} must be a positive int, got {getattr(self, name)!r}")

    @classmethod
    def preset(cls, name: str, **overrides) -> ClassifierConfig:
        if name not in CLS_PRESETS:
            raise ValueError(f"preset must be one of {sorted(CLS_PRESETS)}, got {name!r}")
        return cls(**{**CLS_PRESETS[name], **overrides})


CLS_PRESETS: dict[str, dict] = {"tiny": {"channels": (8, 8, 16)}, "small": {}}


class Classifier(nn.Module):
    """conv-BN-ReLU, maxpool, conv-BN-ReLU, maxpool, (conv-BN-ReLU) x 2, global average pool, Linear.

    Input (batch, C, 28, 28) in [0, 1], output logits (batch, num_targets) (a sigmoid per target gives its
    probability; the model itself never applies one).
    """

    config_class = ClassifierConfig

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        c1, c2, c3 = config.channels
        self.features = nn.Sequential(
            *_block(config.in_channels, c1), nn.MaxPool2d(2),  # (batch, c1, 14, 14)
            *_block(c1, c2), nn.MaxPool2d(2),  # (batch, c2, 7, 7)
            *_block(c2, c3), *_block(c3, c3),  # (batch, c3, 7, 7)
        )
        self.head = nn.Linear(c3, config.num_targets)

    @classmethod
    def example_inputs(cls, config: ClassifierConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return {"x": torch.rand(batch, config.in_channels, 28, 28)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_images(x, self.config.in_channels, "Classifier")
        h = self.features(x - 0.5)  # centred inputs
        return self.head(h.mean((2, 3)))  # (batch, num_targets)


# ----------------------------------------------------------------------------------------------------- checks
def _check_ae_config(c: AutoencoderConfig) -> None:
    if len(c.channels) != 3 or not all(type(n) is int and n >= 1 for n in c.channels):
        raise ValueError(f"AutoencoderConfig.channels must be three positive ints, got {c.channels!r}")
    for name in ("latent_channels", "in_channels"):
        if type(getattr(c, name)) is not int or getattr(c, name) < 1:
            raise ValueError(f"AutoencoderConfig.{name} must be a positive int, got {getattr(c, name)!r}")


def _check_images(x: torch.Tensor, channels: int, who: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or tuple(x.shape[1:]) != (channels, 28, 28) \
            or not x.is_floating_point():
        got = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{who} expects float images (batch, {channels}, 28, 28), got {got}")
