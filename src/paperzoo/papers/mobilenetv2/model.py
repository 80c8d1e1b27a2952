"""MobileNetV2: inverted residuals and linear bottlenecks (Sandler et al., 2018, arXiv:1801.04381).

The network of the paper's Table 2: a 3x3/2 stem convolution to 32 channels, seven groups of inverted
residual blocks given as ``(t, c, n, s)`` (expansion factor, output channels, repeats, stride of the first
repeat), a 1x1 convolution to 1280 channels, global average pooling, dropout and a linear classifier.

An inverted residual block (paper Table 1 and Figure 3b) maps a thin ``(batch, c_in, h, w)`` tensor to
``(batch, c_out, h/s, w/s)``::

    1x1 conv c_in -> t*c_in, BN, ReLU6      (the "expansion"; absent when t == 1)
    3x3 depthwise conv stride s, BN, ReLU6
    1x1 conv t*c_in -> c_out, BN            (the "linear bottleneck": no activation)
    + input, when s == 1 and c_in == c_out  (the shortcut joins the thin bottlenecks)

Every place where public ports differ is a :class:`MobileNetV2Config` flag with the paper's (or the
paper's reference TensorFlow code's) choice as default; README.md documents each one.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F

from paperzoo.nn.outputs import BaseModelOutput, ClassifierOutput

# Paper Table 2: (expansion factor t, output channels c, repeats n, stride s of the first repeat).
PAPER_BLOCKS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)

Shortcut = Literal["bottleneck", "expansion", "none"]


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round ``value`` to the nearest multiple of ``divisor`` (at least ``min_value``), never more than 10% below.

    This is the rounding of the paper's reference code (TF-slim ``_make_divisible``), also used by
    torchvision and Hugging Face.
    """
    min_value = divisor if min_value is None else min_value
    new_value = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if new_value < 0.9 * value:
        new_value += divisor
    return int(new_value)


@dataclass(frozen=True)
class MobileNetV2Config:
    """Hyper-parameters of MobileNetV2; the defaults are the paper's 1.0/224 ImageNet network.

    Attributes:
        num_classes: classifier outputs; 1000 for ImageNet, 1001 for the TF checkpoints (class 0 is
            "background"), 0 for no classifier.
        in_channels: input image channels.
        width_multiplier: the paper's width multiplier alpha, applied to every layer's channels with
            :func:`make_divisible` rounding (multiples of ``divisor``, never more than 10% below).
        image_size: input resolution; the paper's resolution multiplier is ``image_size / 224``. Only used
            to count multiply-adds: the network accepts any size of at least :attr:`total_stride`.
        divisor: channel counts are multiples of this (8 in the paper's code).
        blocks: the ``(t, c, n, s)`` table.
        stem_channels, head_channels: the first 3x3 and the last 1x1 convolutions' widths before scaling.
        stem_stride: 2 in the paper; 1 is the small-input variant for 32x32 images (CIFAR).
        keep_head_channels: the paper (Sec. 5.1) does not shrink the last 1x1 layer for width < 1, so it
            stays at 1280; above 1 it grows with the width. False shrinks it too (TF-slim's default).
        round_expansion: round the expanded width ``t * c_in`` with :func:`make_divisible` (paper's
            reference TF code and Hugging Face); False uses ``round(t * c_in)`` as torchvision does. Only
            matters for a non-integer ``t`` or a divisor that does not divide the bottleneck widths.
        round_width_first: round ``c * width_multiplier`` to an integer before :func:`make_divisible`
            (Hugging Face) rather than passing the float (TF-slim, torchvision).
        tf_padding: TensorFlow "SAME" padding (asymmetric for stride 2: one extra pixel at the bottom and
            right), as in the TF checkpoints and Hugging Face's default; False pads symmetrically by k//2.
        norm_eps: BatchNorm epsilon (1e-3 in TF and Hugging Face, 1e-5 in PyTorch's default).
        bn_momentum: PyTorch-convention BatchNorm momentum (weight of the *new* batch statistic). TF's
            decay 0.997 is PyTorch momentum 0.003. Hugging Face passes 0.997 here (see README).
        dropout: dropout probability before the classifier (paper's code: keep 0.8, i.e. drop 0.2).
        linear_bottleneck: the paper's linear projection; False adds ReLU6 after it (ablation, Fig. 6a).
        shortcut: ``"bottleneck"`` joins thin bottlenecks (paper), ``"expansion"`` joins the expanded
            tensors of consecutive blocks, ``"none"`` removes all shortcuts (ablation, Fig. 6b).
        expand_ratio: if set, replaces t in every group whose table t is not 1 (the first group keeps t=1).
        activation: ``"relu6"`` (paper) or ``"relu"``.
    """

    num_classes: int = 1000
    in_channels: int = 3
    width_multiplier: float = 1.0
    image_size: int = 224
    divisor: int = 8
    blocks: tuple[tuple[int, int, int, int], ...] = PAPER_BLOCKS
    stem_channels: int = 32
    head_channels: int = 1280
    stem_stride: int = 2
    keep_head_channels: bool = True
    round_expansion: bool = True
    round_width_first: bool = False
    tf_padding: bool = True
    norm_eps: float = 1e-3
    bn_momentum: float = 0.003
    dropout: float = 0.2
    linear_bottleneck: bool = True
    shortcut: Shortcut = "bottleneck"
    expand_ratio: float | None = None
    activation: Literal["relu6", "relu"] = "relu6"

    def __post_init__(self) -> None:
        if self.width_multiplier <= 0:
            raise ValueError(f"width_multiplier must be > 0, got {self.width_multiplier}")
        if self.stem_stride not in (1, 2):
            raise ValueError(f"stem_stride must be 1 or 2, got {self.stem_stride}")
        if self.shortcut not in ("bottleneck", "expansion", "none"):
            raise ValueError(f"shortcut must be 'bottleneck', 'expansion' or 'none', got {self.shortcut!r}")
        if self.activation not in ("relu6", "relu"):
            raise ValueError(f"activation must be 'relu6' or 'relu', got {self.activation!r}")
        if self.expand_ratio is not None and self.expand_ratio <= 0:
            raise ValueError(f"expand_ratio must be > 0, got {self.expand_ratio}")
        for row in self.blocks:
            if len(row) != 4 or row[3] not in (1, 2):
                raise ValueError(f"each block row must be (t, c, n, s) with s in (1, 2), got {row}")

    @property
    def total_stride(self) -> int:
        """The product of every stride (32 for the paper's table, 16 with ``stem_stride=1``): one cell of the final
        feature map, and the smallest input side. Below it the last stride-2 layers halve a 1x1 map, so their 3x3
        windows read one real pixel in nine and the rest is padding."""
        stride = self.stem_stride
        for _, _, n, s in self.blocks:
            stride *= s if n > 0 else 1
        return stride

    @property
    def resolution_multiplier(self) -> float:
        """The paper's rho: ``image_size / 224``."""
        return self.image_size / 224

    def scaled(self, channels: int) -> int:
        """``channels`` times the width multiplier, rounded to a multiple of ``divisor``."""
        value = channels * self.width_multiplier
        if self.round_width_first:
            value = int(round(value))
        return make_divisible(value, self.divisor)

    def expanded(self, in_channels: int, t: float) -> int:
        """The width of a block's expanded (inner) tensor."""
        if self.round_expansion:
            return make_divisible(int(round(in_channels * t)) if self.round_width_first else in_channels * t,
                                  self.divisor)
        return int(round(in_channels * t))

    @property
    def last_channels(self) -> int:
        """Width of the final 1x1 convolution (1280 at width 1.0)."""
        if self.keep_head_channels and self.width_multiplier < 1.0:
            return self.head_channels
        return self.scaled(self.head_channels)

    def block_specs(self) -> list[tuple[int, int, int, int, float]]:
        """Every inverted residual block as ``(in_channels, expanded, out_channels, stride, t)``."""
        specs = []
        c_in = self.scaled(self.stem_channels)
        for t, c, n, s in self.blocks:
            if self.expand_ratio is not None and t != 1:
                t = self.expand_ratio
            c_out = self.scaled(c)
            for i in range(n):
                hidden = c_in if t == 1 else self.expanded(c_in, t)
                specs.append((c_in, hidden, c_out, s if i == 0 else 1, t))
                c_in = c_out
        return specs

    @classmethod
    def preset(cls, name: str, **overrides) -> MobileNetV2Config:
        """A named preset: ``tiny`` (tests: the paper's table at width 0.35 on 32x32 images, 10 classes; Hugging
        Face can express it), ``small`` (CIFAR-10 32x32 reproduction), ``cifar`` (the full network on 32x32
        inputs), or a paper width ``"1.4"``, ``"1.0"``, ``"0.75"``, ``"0.5"``, ``"0.35"``."""
        presets = {
            "tiny": dict(num_classes=10, width_multiplier=0.35, image_size=32, tf_padding=False, bn_momentum=0.1,
                         dropout=0.0),
            "small": dict(num_classes=10, width_multiplier=0.5, image_size=32, stem_stride=1, tf_padding=False,
                          bn_momentum=0.1, norm_eps=1e-5, dropout=0.2),
            "cifar": dict(num_classes=10, image_size=32, stem_stride=1, tf_padding=False, bn_momentum=0.1,
                          norm_eps=1e-5),
        }
        for w in ("1.4", "1.0", "0.75", "0.5", "0.35"):
            presets[w] = dict(width_multiplier=float(w))
        if name not in presets:
            raise ValueError(f"unknown preset {name!r}; expected one of {sorted(presets)}")
        return replace(cls(**presets[name]), **overrides)


def _activation(name: str) -> nn.Module:
    return nn.ReLU6(inplace=True) if name == "relu6" else nn.ReLU(inplace=True)


class ConvNormAct(nn.Module):
    """Conv2d (no bias) -> BatchNorm2d -> optional ReLU6. ``(batch, c_in, h, w) -> (batch, c_out, h', w')``.

    With ``tf_padding`` a stride-2 convolution pads like TF "SAME" (computed from the input size at each
    call, extra pixel at bottom/right); for stride 1 and odd kernels "SAME" equals symmetric padding, so
    those layers use the convolution's own padding and pay nothing extra.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, groups: int = 1,
                 act: str | None = "relu6", tf_padding: bool = False, norm_eps: float = 1e-3,
                 bn_momentum: float = 0.003) -> None:
        super().__init__()
        self.same_pad = tf_padding and (stride > 1 or kernel_size % 2 == 0)
        padding = 0 if self.same_pad else (kernel_size - 1) // 2
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, groups=groups, bias=False)
        self.bn: nn.Module = nn.BatchNorm2d(out_channels, eps=norm_eps, momentum=bn_momentum)
        self.act: nn.Module = _activation(act) if act else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.same_pad:
            x = F.pad(x, _same_padding(x.shape[-2:], self.conv.kernel_size, self.conv.stride))
        return self.act(self.bn(self.conv(x)))


def _same_padding(size: tuple[int, int] | torch.Size, kernel: tuple[int, ...], stride: tuple[int, ...]) -> list[int]:
    """TF "SAME" padding ``[left, right, top, bottom]`` for an input of spatial ``size`` (h, w)."""
    pads = []
    for n, k, s in zip(size, kernel, stride, strict=True):
        total = max(k - (s if n % s == 0 else n % s), 0)
        pads.append((total // 2, total - total // 2))
    (top, bottom), (left, right) = pads
    return [left, right, top, bottom]


class InvertedResidual(nn.Module):
    """Paper Table 1: expansion 1x1 (if t != 1) -> depthwise 3x3/s -> linear 1x1 projection.

    Input ``(batch, in_channels, h, w)``, output ``(batch, out_channels, h/stride, w/stride)``. The
    shortcut is added when ``use_residual`` (stride 1, in == out, and ``shortcut == "bottleneck"``);
    the ``"expansion"`` shortcut is handled by :class:`MobileNetV2Model`, which needs two blocks.
    """

    def __init__(self, in_channels: int, hidden: int, out_channels: int, stride: int, config: MobileNetV2Config):
        super().__init__()
        kw = dict(tf_padding=config.tf_padding, norm_eps=config.norm_eps, bn_momentum=config.bn_momentum)
        self.in_channels, self.out_channels, self.stride = in_channels, out_channels, stride
        self.eligible = stride == 1 and in_channels == out_channels
        self.use_residual = self.eligible and config.shortcut == "bottleneck"
        self.expand = (ConvNormAct(in_channels, hidden, 1, act=config.activation, **kw)
                       if hidden != in_channels else None)
        self.depthwise = ConvNormAct(hidden, hidden, 3, stride, groups=hidden, act=config.activation, **kw)
        self.project = ConvNormAct(hidden, out_channels, 1,
                                   act=None if config.linear_bottleneck else config.activation, **kw)

    def expansion(self, x: torch.Tensor) -> torch.Tensor:
        """The expanded tensor ``(batch, hidden, h, w)`` (``x`` itself when t == 1)."""
        return x if self.expand is None else self.expand(x)

    def reduce(self, h: torch.Tensor) -> torch.Tensor:
        """Depthwise and projection: ``(batch, hidden, h, w) -> (batch, out_channels, h/s, w/s)``."""
        return self.project(self.depthwise(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.expansion(x)  # 1x1 conv, BN, ReLU6: (b, c_in, h, w) -> (b, t*c_in, h, w)
        h = self.depthwise(h)  # 3x3 depthwise /s, BN, ReLU6: -> (b, t*c_in, h/s, w/s)
        out = self.project(h)  # linear bottleneck: 1x1 conv, BN, no activation -> (b, c_out, h/s, w/s)
        return x + out if self.use_residual else out  # shortcut between the thin bottlenecks


def _init_weights(module: nn.Module) -> None:
    """torchvision's / the reference code's initialisation: He-normal convs, N(0, 0.01) linear, BN = identity."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)


class MobileNetV2Model(nn.Module):
    """The MobileNetV2 feature extractor: stem, inverted residual blocks, 1x1 head conv, global pooling.

    ``pixel_values`` ``(batch, in_channels, H, W)`` -> ``BaseModelOutput`` with ``last_hidden_state``
    ``(batch, last_channels, H/32, W/32)`` (H/16 with ``stem_stride=1``) and ``pooler_output``
    ``(batch, last_channels)``.
    """

    config_class = MobileNetV2Config

    @staticmethod
    def example_inputs(config: MobileNetV2Config, batch: int = 2) -> dict[str, torch.Tensor]:
        """Random ``pixel_values`` ``(batch, in_channels, image_size, image_size)``."""
        return {"pixel_values": torch.randn(batch, config.in_channels, config.image_size, config.image_size)}

    def __init__(self, config: MobileNetV2Config) -> None:
        super().__init__()
        self.config = config
        kw = dict(tf_padding=config.tf_padding, norm_eps=config.norm_eps, bn_momentum=config.bn_momentum)
        stem = config.scaled(config.stem_channels)
        self.stem = ConvNormAct(config.in_channels, stem, 3, config.stem_stride, act=config.activation, **kw)
        self.blocks = nn.ModuleList(InvertedResidual(i, h, o, s, config) for i, h, o, s, _ in config.block_specs())
        last_in = self.blocks[-1].out_channels if len(self.blocks) else stem
        self.head = ConvNormAct(last_in, config.last_channels, 1, act=config.activation, **kw)
        self.pool = nn.AdaptiveAvgPool2d(1)
        _init_weights(self)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``(batch, in_channels, H, W) -> (batch, last_channels, H/32, W/32)``, unvalidated (hot path)."""
        x = self.stem(x)
        if self.config.shortcut == "expansion":
            carry = None  # the previous eligible block's expanded tensor
            for block in self.blocks:
                h = block.expansion(x)
                if carry is not None:
                    h = h + carry
                carry = h if block.eligible else None
                x = block.reduce(h)
        else:
            for block in self.blocks:
                x = block(x)
        return self.head(x)

    def forward(self, pixel_values: torch.Tensor | None = None, **kwargs) -> BaseModelOutput:
        x = self.features(_check_pixels(pixel_values, self.config, self.stem.conv.weight.dtype))
        return BaseModelOutput(last_hidden_state=x, pooler_output=self.pool(x).flatten(1))


class MobileNetV2ForImageClassification(nn.Module):
    """MobileNetV2 with dropout and a linear classifier on the pooled features.

    ``pixel_values`` ``(batch, in_channels, H, W)`` -> ``ClassifierOutput`` with ``logits``
    ``(batch, num_classes)`` and, when ``labels`` ``(batch,)`` are given, the cross-entropy ``loss``.
    """

    config_class = MobileNetV2Config

    @staticmethod
    def example_inputs(config: MobileNetV2Config, batch: int = 2) -> dict[str, torch.Tensor]:
        """Random ``pixel_values`` ``(batch, in_channels, image_size, image_size)``."""
        return {"pixel_values": torch.randn(batch, config.in_channels, config.image_size, config.image_size)}

    def __init__(self, config: MobileNetV2Config) -> None:
        super().__init__()
        self.config = config
        self.mobilenet_v2 = MobileNetV2Model(config)
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = (nn.Linear(config.last_channels, config.num_classes) if config.num_classes > 0
                           else nn.Identity())
        _init_weights(self.classifier)

    def forward(self, pixel_values: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                **kwargs) -> ClassifierOutput:
        x = self.mobilenet_v2.features(_check_pixels(pixel_values, self.config,
                                                     self.mobilenet_v2.stem.conv.weight.dtype))
        logits = self.classifier(self.dropout(torch.flatten(self.mobilenet_v2.pool(x), 1)))
        loss = F.cross_entropy(logits, _check_labels(labels, len(logits))) if labels is not None else None
        return ClassifierOutput(loss=loss, logits=logits)


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (BatchNorm running statistics are buffers and not counted)."""
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def count_madds(model: nn.Module, image_size: int | tuple[int, int] = 224, in_channels: int = 3) -> int:
    """Multiply-adds of every Conv2d and Linear for one image, measured with forward hooks.

    A convolution costs ``out_elements * (c_in / groups) * k_h * k_w``, a linear layer ``in * out``; biases,
    BatchNorm, activations, additions and pooling are not counted (the paper's convention).
    """
    h, w = (image_size, image_size) if isinstance(image_size, int) else image_size
    total = 0

    def hook(m: nn.Module, _inp: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        nonlocal total
        if isinstance(m, nn.Conv2d):
            total += out.numel() * (m.in_channels // m.groups) * math.prod(m.kernel_size)
        else:
            total += out.numel() * m.in_features

    # run shapes only: a copy on the meta device computes no numbers
    ghost = copy.deepcopy(model).to("meta").eval()
    for m in ghost.modules():
        if isinstance(m, nn.Conv2d | nn.Linear):
            m.register_forward_hook(hook)
    ghost(pixel_values=torch.zeros(1, in_channels, h, w, device="meta"))
    return total


# ----------------------------------------------------------------------------------------------- preprocessing

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 ``(B, 3, H, W)`` -> float, scaled to [0, 1] and standardised with CIFAR-10's channel statistics:
    the input the recipe's CIFAR-10 models expect.

    Returned in ``channels_last`` memory format: with the model in that format too, the depthwise convolutions
    train about 1.8x faster on CPU (same values; only the strides differ).
    """
    x = images.float().div_(255)
    mean = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous(memory_format=torch.channels_last)


# ----------------------------------------------------------------------------------------------- input checks


def _check_pixels(pixel_values: torch.Tensor | None, config: MobileNetV2Config, dtype: torch.dtype) -> torch.Tensor:
    in_channels = config.in_channels
    if pixel_values is None:
        raise ValueError("pixel_values is required: a float tensor (batch, channels, height, width)")
    if pixel_values.dim() != 4 or pixel_values.shape[1] != in_channels:
        raise ValueError(f"pixel_values must be (batch, {in_channels}, height, width), got {tuple(pixel_values.shape)}")
    if not pixel_values.is_floating_point():
        raise ValueError(f"pixel_values must be a floating-point tensor, got {pixel_values.dtype}")
    _check_dtype(pixel_values, dtype)
    h, w = pixel_values.shape[-2:]
    s = config.total_stride
    if h < s or w < s:
        raise ValueError(f"pixel_values must be at least {s}x{s} (height x width): the model's total stride is {s}, "
                         f"so a smaller image leaves its last stride-2 layers a 1x1 map of padding; got {h}x{w}")
    return pixel_values


def _check_dtype(x: torch.Tensor, dtype: torch.dtype) -> None:
    """The model's dtype, or (under autocast, which casts for the convolutions) float32/bfloat16/float16."""
    if x.dtype == dtype or (torch.is_autocast_enabled(x.device.type) and x.dtype in _AUTOCAST_INPUTS):
        return
    raise ValueError(f"pixel_values must have the model's dtype {dtype}, got {x.dtype}: cast the input "
                     f"(pixel_values.to({dtype})) or the model (model.to({x.dtype}))")


_AUTOCAST_INPUTS = (torch.float32, torch.bfloat16, torch.float16)


def _check_labels(labels: torch.Tensor, batch: int) -> torch.Tensor:
    if labels.shape != (batch,) or labels.is_floating_point():
        raise ValueError(f"labels must be integer class ids ({batch},), got {labels.dtype} {tuple(labels.shape)}")
    return labels
