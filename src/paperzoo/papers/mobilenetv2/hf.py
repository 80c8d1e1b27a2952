"""Weight conversion between paperzoo's MobileNetV2 and Hugging Face's ``MobileNetV2Model`` /
``MobileNetV2ForImageClassification`` (both padding modes, any depth multiplier).

Layout map (HF name -> paperzoo name):

* ``conv_stem.first_conv``                       -> ``stem``
* ``conv_stem.conv_3x3`` / ``conv_stem.reduce_1x1`` -> ``blocks.0.depthwise`` / ``blocks.0.project``
  (HF folds the first, t=1 bottleneck into its stem)
* ``layer.{i}.expand_1x1|conv_3x3|reduce_1x1``   -> ``blocks.{i+1}.expand|depthwise|project``
* ``conv_1x1``                                   -> ``head``;  ``*.convolution|normalization`` -> ``*.conv|bn``

HF builds its BatchNorm layers with ``momentum=0.997`` whatever the config says. In PyTorch's convention
that is the weight of the *new* batch statistic, so HF's running statistics are ~the last batch's; the
value is TF's decay 0.997, i.e. PyTorch momentum 0.003. :func:`from_hf` keeps HF's value by default so the
converted model behaves exactly like the HF one, also in training; pass ``bn_momentum=0.003`` to
:func:`mobilenetv2_from_hf` to get the TF behaviour.
"""

from __future__ import annotations

from typing import Any

import torch

from paperzoo.hf import register_converter
from paperzoo.papers.mobilenetv2.model import (
    PAPER_BLOCKS,
    MobileNetV2Config,
    MobileNetV2ForImageClassification,
    MobileNetV2Model,
)

HF_BN_MOMENTUM = 0.997  # hard-coded in transformers' MobileNetV2ConvLayer


def config_from_hf(hf_config: Any, bn_momentum: float = HF_BN_MOMENTUM) -> MobileNetV2Config:
    """The :class:`MobileNetV2Config` equivalent to a ``transformers.MobileNetV2Config``."""
    if hf_config.output_stride != 32:
        raise ValueError(f"only output_stride=32 is supported (no dilated convolutions), got {hf_config.output_stride}")
    if not hf_config.first_layer_is_expansion:
        raise ValueError("first_layer_is_expansion=False (an extra 1x1 conv in the stem) is not supported")
    if hf_config.min_depth != hf_config.depth_divisible_by:
        raise ValueError(f"min_depth must equal depth_divisible_by ({hf_config.depth_divisible_by}), "
                         f"got {hf_config.min_depth}")
    if hf_config.hidden_act not in ("relu6", "relu"):
        raise ValueError(f"hidden_act must be 'relu6' or 'relu', got {hf_config.hidden_act!r}")
    return MobileNetV2Config(
        num_classes=hf_config.num_labels,
        in_channels=hf_config.num_channels,
        width_multiplier=float(hf_config.depth_multiplier),
        image_size=hf_config.image_size if isinstance(hf_config.image_size, int) else hf_config.image_size[0],
        divisor=hf_config.depth_divisible_by,
        blocks=PAPER_BLOCKS,
        keep_head_channels=hf_config.finegrained_output,
        round_expansion=True,
        round_width_first=True,
        tf_padding=hf_config.tf_padding,
        norm_eps=hf_config.layer_norm_eps,
        bn_momentum=bn_momentum,
        dropout=float(hf_config.classifier_dropout_prob),
        expand_ratio=None if float(hf_config.expand_ratio) == 6.0 else float(hf_config.expand_ratio),
        activation=hf_config.hidden_act,
    )


def config_to_hf(config: MobileNetV2Config) -> Any:
    """The ``transformers.MobileNetV2Config`` for a paperzoo config; raises ValueError if HF cannot express it."""
    from transformers import MobileNetV2Config as HFConfig

    problems = []
    if config.blocks != PAPER_BLOCKS:
        problems.append("blocks must be the paper's table")
    if (config.stem_channels, config.head_channels, config.stem_stride) != (32, 1280, 2):
        problems.append("stem_channels=32, head_channels=1280, stem_stride=2 are fixed in HF")
    if not config.linear_bottleneck or config.shortcut != "bottleneck":
        problems.append("HF has only linear bottlenecks with shortcuts between bottlenecks")
    if not config.round_expansion:
        problems.append("HF always rounds the expanded width (round_expansion=True)")
    if problems:
        raise ValueError("config not expressible in transformers.MobileNetV2Config: " + "; ".join(problems))
    return HFConfig(
        num_channels=config.in_channels, image_size=config.image_size, depth_multiplier=config.width_multiplier,
        depth_divisible_by=config.divisor, min_depth=config.divisor,
        expand_ratio=6.0 if config.expand_ratio is None else config.expand_ratio,
        finegrained_output=config.keep_head_channels, hidden_act=config.activation, tf_padding=config.tf_padding,
        classifier_dropout_prob=config.dropout, layer_norm_eps=config.norm_eps, num_labels=config.num_classes,
    )


def _layer_map(num_blocks: int, has_expand: list[bool]) -> dict[str, str]:
    """paperzoo ConvNormAct prefix -> HF MobileNetV2ConvLayer prefix (both relative to the backbone)."""
    m = {"stem": "conv_stem.first_conv", "blocks.0.depthwise": "conv_stem.conv_3x3",
         "blocks.0.project": "conv_stem.reduce_1x1", "head": "conv_1x1"}
    for i in range(1, num_blocks):
        if has_expand[i]:
            m[f"blocks.{i}.expand"] = f"layer.{i - 1}.expand_1x1"
        m[f"blocks.{i}.depthwise"] = f"layer.{i - 1}.conv_3x3"
        m[f"blocks.{i}.project"] = f"layer.{i - 1}.reduce_1x1"
    return m


_LEAVES = {"conv.weight": "convolution.weight", "bn.weight": "normalization.weight", "bn.bias": "normalization.bias",
           "bn.running_mean": "normalization.running_mean", "bn.running_var": "normalization.running_var",
           "bn.num_batches_tracked": "normalization.num_batches_tracked"}


def _key_map(backbone: MobileNetV2Model, ours_prefix: str, hf_prefix: str) -> dict[str, str]:
    blocks = list(backbone.blocks)
    if not blocks or blocks[0].expand is not None:
        raise ValueError("the first block must be the t=1 bottleneck (no expansion conv) to match HF's stem")
    layers = _layer_map(len(blocks), [b.expand is not None for b in blocks])
    return {f"{ours_prefix}{ours}.{leaf}": f"{hf_prefix}{hf}.{hf_leaf}"
            for ours, hf in layers.items() for leaf, hf_leaf in _LEAVES.items()}


def _copy(src: dict[str, torch.Tensor], dst_module: torch.nn.Module, key_map: dict[str, str]) -> None:
    """Copy ``src[key_map[k]]`` into ``dst_module``'s ``k`` for every k; every destination key must be filled."""
    dst = dst_module.state_dict()
    missing = set(dst) - set(key_map)
    if missing:
        raise ValueError(f"unmapped parameters: {sorted(missing)[:5]}")
    new = {}
    for k, sk in key_map.items():
        if src[sk].shape != dst[k].shape:
            raise ValueError(f"shape mismatch {k} {tuple(dst[k].shape)} vs {sk} {tuple(src[sk].shape)}")
        new[k] = src[sk].detach().clone()
    dst_module.load_state_dict(new)


def mobilenetv2_from_hf(hf_model: Any, bn_momentum: float = HF_BN_MOMENTUM) -> torch.nn.Module:
    """paperzoo model (same class kind, same weights, same train/eval mode) from an HF MobileNetV2 model."""
    config = config_from_hf(hf_model.config, bn_momentum=bn_momentum)
    if type(hf_model).__name__ == "MobileNetV2ForImageClassification":
        model = MobileNetV2ForImageClassification(config)
        key_map = _key_map(model.mobilenet_v2, "mobilenet_v2.", "mobilenet_v2.")
        if config.num_classes > 0:
            key_map.update({"classifier.weight": "classifier.weight", "classifier.bias": "classifier.bias"})
    else:
        model = MobileNetV2Model(config)
        key_map = _key_map(model, "", "")
    param = next(hf_model.parameters())
    model = model.to(device=param.device, dtype=param.dtype)  # HF's dtype and device, as the text converters
    _copy(hf_model.state_dict(), model, key_map)
    return model.train(hf_model.training)


def mobilenetv2_to_hf(model: torch.nn.Module) -> Any:
    """HF ``MobileNetV2ForImageClassification`` or ``MobileNetV2Model`` with the weights of ``model``."""
    import transformers

    hf_config = config_to_hf(model.config)
    if isinstance(model, MobileNetV2ForImageClassification):
        hf = transformers.MobileNetV2ForImageClassification(hf_config)
        key_map = _key_map(model.mobilenet_v2, "mobilenet_v2.", "mobilenet_v2.")
        if model.config.num_classes > 0:
            key_map.update({"classifier.weight": "classifier.weight", "classifier.bias": "classifier.bias"})
    else:
        hf = transformers.MobileNetV2Model(hf_config)
        key_map = _key_map(model, "", "")
    param = next(model.parameters())
    hf = hf.to(device=param.device, dtype=param.dtype)
    _copy(model.state_dict(), hf, {v: k for k, v in key_map.items()})
    return hf.train(model.training)


register_converter("MobileNetV2ForImageClassification", MobileNetV2ForImageClassification,
                   mobilenetv2_from_hf, mobilenetv2_to_hf)
register_converter("MobileNetV2Model", MobileNetV2Model, mobilenetv2_from_hf, mobilenetv2_to_hf)
