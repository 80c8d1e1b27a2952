"""Fine-tuning a pretrained Funnel (or same-code standard Transformer) on mini-GLUE.

The loop, tasks, splits, metrics and hyper-parameters are the shared ones (:func:`paperzoo.train.finetune.
finetune_task`); this module supplies the classifier: a :class:`~.model.FunnelClassifier` (tanh head on the pooled
[CLS], paper sec. 2.2) on the pretrained encoder, with layer-wise learning-rate decay where "layer ``i``" counts the
distinct encoder layers in order across blocks (embeddings depth 0, layer ``i`` depth ``i + 1``, head depth ``n + 2``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from torch import nn

from paperzoo.train import no_decay_names

from .model import FunnelClassifier, FunnelConfig

__all__ = ["funnel_lr_groups", "classifier_fn"]


def _depth(name: str, offsets: list[int], n_layers: int) -> int:
    parts = name.split(".")
    if name.startswith("funnel.embeddings."):
        return 0
    if name.startswith("funnel.encoder.blocks."):
        return offsets[int(parts[3])] + int(parts[4]) + 1
    if name.startswith("funnel."):
        raise ValueError(f"no depth rule for encoder parameter {name!r}")
    return n_layers + 2


def funnel_lr_groups(model: FunnelClassifier, lr: float, layer_decay: float = 0.8, weight_decay: float = 0.01
                     ) -> list[dict]:
    """AdamW groups with ``lr * layer_decay^(n + 2 - depth)`` for a :class:`FunnelClassifier` (``n`` distinct encoder
    layers; shared layers of an ``NxR`` block count once); the no-decay rule is the engine's. Each group has
    ``"depth"``."""
    _check_groups(model, layer_decay)
    sizes = model.config.block_sizes
    offsets = [sum(sizes[:b]) for b in range(len(sizes))]
    n = sum(sizes)
    skip = no_decay_names(model)
    groups: dict[tuple[int, bool], dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        d = _depth(name, offsets, n)
        nd = name in skip
        g = groups.setdefault((d, nd), {"params": [], "lr": lr * layer_decay ** (n + 2 - d),
                                        "weight_decay": 0.0 if nd else weight_decay, "depth": d})
        g["params"].append(p)
    return [groups[k] for k in sorted(groups)]


def classifier_fn(cfg: FunnelConfig, base_state: dict[str, torch.Tensor], lr: float, layer_decay: float,
                  weight_decay: float) -> Callable[[int], tuple[nn.Module, list[dict]]]:
    """For ``finetune_task(classifier_fn=...)``: ``num_labels -> (FunnelClassifier on base_state, its groups)``.

    ``base_state`` is a :class:`~.model.FunnelBase` state dict (embeddings + encoder, no decoder)."""

    def build(num_labels: int) -> tuple[nn.Module, list[dict]]:
        clf = FunnelClassifier(replace(cfg, num_labels=num_labels))
        clf.funnel.load_state_dict(base_state, strict=True)
        return clf, funnel_lr_groups(clf, lr, layer_decay, weight_decay)

    return build


# -------------------------------------------------------------------------------------------------------- checks
def _check_groups(model, layer_decay: float) -> None:
    if not isinstance(model, FunnelClassifier):
        raise ValueError(f"funnel_lr_groups expects a FunnelClassifier, got {type(model).__name__}")
    if not 0.0 < layer_decay <= 1.0:
        raise ValueError(f"layer_decay must be in (0, 1], got {layer_decay}")
