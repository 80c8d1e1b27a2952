"""ELECTRA's part of fine-tuning on the mini-GLUE (the loop and tasks are :mod:`paperzoo.train.finetune`).

* Model: :class:`~.model.ElectraClassifier` (first-token head) on the pretrained encoder's weights.
* Layer-wise learning-rate decay (official ``_get_layer_lrs``, appendix A, decay 0.8): with ``n`` layers, the
  embeddings get ``lr * d^(n+2)``, layer ``i`` (0-based) ``lr * d^(n+1-i)``, the task head ``lr``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from paperzoo.train import no_decay_names
from paperzoo.train.finetune import FinetuneConfig

from .model import ElectraClassifier, ElectraConfig

__all__ = ["classifier_fn", "layerwise_lr_groups"]


def _depth(name: str, n_layers: int) -> int:
    if name.startswith("body.embeddings."):
        return 0
    if name.startswith("body.encoder.layers."):
        return int(name.split(".")[3]) + 1
    if name.startswith("body."):
        raise ValueError(f"no depth rule for encoder parameter {name!r}")
    return n_layers + 2


def layerwise_lr_groups(model: nn.Module, lr: float, layer_decay: float = 0.8, weight_decay: float = 0.01
                        ) -> list[dict]:
    """AdamW groups with ``lr * layer_decay^(n + 2 - depth)`` (depth 0 = embeddings, i + 1 = layer i, n + 2 = head)
    and the shared no-decay rule; ``model`` has ``body`` (a TextEncoder) and heads. Each group has ``"depth"``."""
    if not 0.0 < layer_decay <= 1.0:
        raise ValueError(f"layer_decay must be in (0, 1], got {layer_decay}")
    body = getattr(model, "body", None)
    if body is None or not hasattr(body, "encoder"):
        raise ValueError("layerwise_lr_groups expects a model with a .body TextEncoder (e.g. ElectraClassifier)")
    n = len(body.encoder.layers)
    skip = no_decay_names(model)
    groups: dict[tuple[int, bool], dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        d = _depth(name, n)
        nd = name in skip
        g = groups.setdefault((d, nd), {"params": [], "lr": lr * layer_decay ** (n + 2 - d),
                                        "weight_decay": 0.0 if nd else weight_decay, "depth": d})
        g["params"].append(p)
    return [groups[k] for k in sorted(groups)]


def classifier_fn(config: ElectraConfig, encoder_state: dict[str, torch.Tensor], cfg: FinetuneConfig
                  ) -> Callable[[int], tuple[nn.Module, list[dict]]]:
    """For :func:`paperzoo.train.finetune.finetune_task`: ``num_labels -> (ElectraClassifier(config) on
    encoder_state, its layer-wise groups)``; ``encoder_state`` is the state dict of a TextEncoder of
    ``config.discriminator_config()``."""

    def build(num_labels: int) -> tuple[nn.Module, list[dict]]:
        model = ElectraClassifier(config, num_labels=num_labels, classifier_dropout=cfg.dropout)
        model.body.load_state_dict(encoder_state, strict=True)
        return model, layerwise_lr_groups(model, cfg.lr, cfg.layer_decay, cfg.weight_decay)

    return build
