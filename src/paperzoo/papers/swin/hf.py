"""Hugging Face interop for Swin: ``SwinModel`` and ``SwinForImageClassification`` <-> paperzoo.

Converted models keep HF's behaviour on inputs whose maps are not window multiples: HF (like the official code)
pads with zeros and lets padded tokens take part in attention, so :func:`from_hf` sets ``mask_padding=False``;
call ``model.swin.set_mask_padding(True)`` (or ``model.set_mask_padding(True)`` on a backbone) for ours.
Differences that only matter in training: HF applies stochastic depth to the attention branch only, we apply it
to both branches (the paper and the official code). Both HF weight layouts are read: transformers 5
(``attention.q_proj``, ``mlp.fc1``) and 4 (``attention.self.query``, ``intermediate.dense``).
"""

from __future__ import annotations

from typing import Any

import torch

from paperzoo.hf import register_converter

from .model import SwinConfig, SwinForImageClassification, SwinModel

__all__ = ["CONFIG_NAMES", "config_from_hf", "config_to_hf", "swin_from_hf", "swin_to_hf"]


# our SwinConfig field -> transformers.SwinConfig field (the only place HF's names appear)
CONFIG_NAMES = {"image_size": "image_size", "patch_size": "patch_size", "in_channels": "num_channels",
                "dim": "embed_dim", "depths": "depths", "num_heads": "num_heads", "window_size": "window_size",
                "mlp_ratio": "mlp_ratio", "qkv_bias": "qkv_bias", "dropout": "hidden_dropout_prob",
                "attn_dropout": "attention_probs_dropout_prob", "drop_path_rate": "drop_path_rate",
                "ape": "use_absolute_embeddings", "norm_eps": "layer_norm_eps", "num_classes": "num_labels"}


def config_from_hf(hf_config: Any, mask_padding: bool = False) -> SwinConfig:
    """Our :class:`SwinConfig` from a ``transformers.SwinConfig``."""
    if getattr(hf_config, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"only hidden_act='gelu' is supported, got {hf_config.hidden_act!r}")
    kw = {ours: getattr(hf_config, theirs) for ours, theirs in CONFIG_NAMES.items()}
    for k in ("image_size", "patch_size"):  # HF allows (h, w) pairs; ours are square
        kw[k] = kw[k] if isinstance(kw[k], int) else kw[k][0]
    return SwinConfig(**kw | {"depths": tuple(kw["depths"]), "num_heads": tuple(kw["num_heads"])},
                      mask_padding=mask_padding)


def config_to_hf(cfg: SwinConfig) -> Any:
    """A ``transformers.SwinConfig`` from ours."""
    from transformers import SwinConfig as HFSwinConfig

    kw = {theirs: getattr(cfg, ours) for ours, theirs in CONFIG_NAMES.items()}
    return HFSwinConfig(**kw | {"depths": list(cfg.depths), "num_heads": list(cfg.num_heads),
                                "num_labels": max(cfg.num_classes, 1)}, hidden_act="gelu")


def _key_map(hf_keys: set[str] | dict, cfg: SwinConfig, prefix: str) -> dict[str, tuple[str, ...]]:
    """Our parameter name -> the HF names it is made of (three for the fused qkv, concatenated in order q, k, v),
    in whichever HF layout ``hf_keys`` uses."""
    e = f"{prefix}embeddings."
    km = {"patch_embed.weight": (e + "patch_embeddings.projection.weight",),
          "patch_embed.bias": (e + "patch_embeddings.projection.bias",),
          "patch_norm.weight": (e + "norm.weight",), "patch_norm.bias": (e + "norm.bias",),
          "norm.weight": (f"{prefix}layernorm.weight",), "norm.bias": (f"{prefix}layernorm.bias",)}
    if cfg.ape:
        km["pos_embed"] = (e + "position_embeddings",)
    for i, depth in enumerate(cfg.depths):
        for j in range(depth):
            p, q = f"{prefix}encoder.layers.{i}.blocks.{j}.", f"stages.{i}.blocks.{j}."
            if f"{p}attention.q_proj.weight" in hf_keys:  # transformers >= 5
                qkv = ("attention.q_proj", "attention.k_proj", "attention.v_proj")
                names = {"attn.proj": "attention.o_proj", "mlp.fc1": "mlp.fc1", "mlp.fc2": "mlp.fc2"}
                table = "attention.relative_position_bias.relative_position_bias_table"
            else:  # transformers 4
                qkv = ("attention.self.query", "attention.self.key", "attention.self.value")
                names = {"attn.proj": "attention.output.dense", "mlp.fc1": "intermediate.dense",
                         "mlp.fc2": "output.dense"}
                table = "attention.self.relative_position_bias_table"
            names.update({"norm1": "layernorm_before", "norm2": "layernorm_after"})
            km[q + "attn.relative_position_bias_table"] = (p + table,)
            for kind in ("weight", "bias"):
                if cfg.qkv_bias or kind == "weight":
                    km[f"{q}attn.qkv.{kind}"] = tuple(f"{p}{n}.{kind}" for n in qkv)
                km.update({f"{q}{ours}.{kind}": (f"{p}{theirs}.{kind}",) for ours, theirs in names.items()})
        if i > 0:  # HF merges at the end of stage i - 1; we merge at the start of stage i (the paper's Fig. 3)
            p, q = f"{prefix}encoder.layers.{i - 1}.downsample.", f"stages.{i}.patch_merging."
            km.update({q + k: (p + k,) for k in ("reduction.weight", "norm.weight", "norm.bias")})
    return km


def _head_keys(model_prefix: str) -> dict[str, tuple[str, ...]]:
    return {"head.weight": ("classifier.weight",), "head.bias": ("classifier.bias",)} if model_prefix else {}


def swin_from_hf(hf_model: Any) -> SwinModel | SwinForImageClassification:
    """The paperzoo equivalent of an HF ``SwinModel`` or ``SwinForImageClassification`` (same weights, mode),
    with ``mask_padding=False`` as HF."""
    name = type(hf_model).__name__
    cfg = config_from_hf(hf_model.config)
    sd = hf_model.state_dict()
    if name == "SwinForImageClassification":
        model, ours_prefix, hf_prefix = SwinForImageClassification(cfg), "swin.", "swin."
    else:
        model, ours_prefix, hf_prefix = SwinModel(cfg), "", ""
    param = next(hf_model.parameters())
    model = model.to(device=param.device, dtype=param.dtype)  # HF's dtype and device, as the text converters
    km = {ours_prefix + k: v for k, v in _key_map(sd, cfg, hf_prefix).items()} | _head_keys(ours_prefix)
    target = model.state_dict()
    ours = {k: torch.cat([sd[n] for n in names]).reshape(target[k].shape).detach().clone()
            for k, names in km.items()}
    model.load_state_dict(ours)
    model.hf_class = name
    return model.train(hf_model.training)


def swin_to_hf(model: SwinModel | SwinForImageClassification) -> Any:
    """The HF model equivalent to ours (``SwinForImageClassification`` when ours has a head)."""
    import transformers

    cfg = model.config
    if isinstance(model, SwinForImageClassification):
        hf, ours_prefix = transformers.SwinForImageClassification(config_to_hf(cfg)), "swin."
    else:
        hf, ours_prefix = transformers.SwinModel(config_to_hf(cfg)), ""
    param = next(model.parameters())
    hf = hf.to(device=param.device, dtype=param.dtype)
    template, sd = hf.state_dict(), model.state_dict()
    km = {ours_prefix + k: v for k, v in _key_map(template, cfg, ours_prefix).items()} | _head_keys(ours_prefix)
    theirs = {}
    for k, names in km.items():
        for n, chunk in zip(names, sd[k].chunk(len(names)), strict=True):
            theirs[n] = chunk.reshape(template[n].shape).detach().clone()
    missing, unexpected = hf.load_state_dict(theirs, strict=False)
    missing = [k for k in missing if not k.endswith("relative_position_index")]
    if missing or unexpected:
        raise RuntimeError(f"Swin to_hf: missing {missing}, unexpected {unexpected}")
    return hf.train(model.training)


register_converter("SwinModel", SwinModel, swin_from_hf, swin_to_hf)
register_converter("SwinForImageClassification", SwinForImageClassification, swin_from_hf, swin_to_hf)
