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

__all__ = ["config_from_hf", "config_to_hf", "swin_from_hf", "swin_to_hf"]


def config_from_hf(hf_config: Any, mask_padding: bool = False) -> SwinConfig:
    """Our :class:`SwinConfig` from a ``transformers.SwinConfig``."""
    if getattr(hf_config, "hidden_act", "gelu") != "gelu":
        raise ValueError(f"only hidden_act='gelu' is supported, got {hf_config.hidden_act!r}")
    size = hf_config.image_size if isinstance(hf_config.image_size, int) else hf_config.image_size[0]
    patch = hf_config.patch_size if isinstance(hf_config.patch_size, int) else hf_config.patch_size[0]
    return SwinConfig(
        image_size=size, patch_size=patch, in_channels=hf_config.num_channels, embed_dim=hf_config.embed_dim,
        depths=tuple(hf_config.depths), num_heads=tuple(hf_config.num_heads), window_size=hf_config.window_size,
        mlp_ratio=hf_config.mlp_ratio, qkv_bias=hf_config.qkv_bias, drop_rate=hf_config.hidden_dropout_prob,
        attn_drop_rate=hf_config.attention_probs_dropout_prob, drop_path_rate=hf_config.drop_path_rate,
        ape=hf_config.use_absolute_embeddings, layer_norm_eps=hf_config.layer_norm_eps,
        num_classes=hf_config.num_labels, mask_padding=mask_padding)


def config_to_hf(cfg: SwinConfig) -> Any:
    """A ``transformers.SwinConfig`` from ours."""
    from transformers import SwinConfig as HFSwinConfig

    return HFSwinConfig(
        image_size=cfg.image_size, patch_size=cfg.patch_size, num_channels=cfg.in_channels, embed_dim=cfg.embed_dim,
        depths=list(cfg.depths), num_heads=list(cfg.num_heads), window_size=cfg.window_size,
        mlp_ratio=cfg.mlp_ratio, qkv_bias=cfg.qkv_bias, hidden_dropout_prob=cfg.drop_rate,
        attention_probs_dropout_prob=cfg.attn_drop_rate, drop_path_rate=cfg.drop_path_rate, hidden_act="gelu",
        use_absolute_embeddings=cfg.ape, layer_norm_eps=cfg.layer_norm_eps, num_labels=max(cfg.num_classes, 1))


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
        if i < len(cfg.depths) - 1:
            p, q = f"{prefix}encoder.layers.{i}.downsample.", f"stages.{i}.downsample."
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
