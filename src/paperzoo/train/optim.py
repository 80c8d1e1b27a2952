"""AdamW parameter groups (decay / no decay) and warmup + cosine/linear/constant LR schedules.

No-decay rule (documented, timm-like). A trainable parameter gets ``weight_decay=0`` when any holds:

1. it has ``ndim <= 1`` (biases, norm gains/shifts, scalar gates);
2. it belongs directly to an ``nn.Embedding`` (or subclass) or to a module whose class name contains "Norm";
3. its name is listed by a ``no_weight_decay()`` method of the model or of any submodule; names are
   relative to the module defining the method (timm convention, e.g. ``{"pos_embed", "cls_token"}``).
   A listed name may also be a module prefix: ``"pos"`` covers ``pos.weight``.

Everything else (linear and conv weights) decays.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn

from .config import TrainConfig


def no_decay_names(model: nn.Module) -> set[str]:
    """Qualified names of the trainable parameters of ``model`` that get no weight decay (rule above)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"no_decay_names: expected an nn.Module, got {type(model).__name__}")
    listed: set[str] = set()
    for mod_name, mod in model.named_modules():
        fn = getattr(mod, "no_weight_decay", None)
        if callable(fn):
            prefix = f"{mod_name}." if mod_name else ""
            listed |= {prefix + n for n in fn()}
    out: set[str] = set()
    for mod_name, mod in model.named_modules():
        special = isinstance(mod, nn.Embedding) or "Norm" in type(mod).__name__
        for p_name, p in mod.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}" if mod_name else p_name
            in_list = any(full == n or full.startswith(n + ".") for n in listed)
            if p.requires_grad and (p.ndim <= 1 or special or in_list):
                out.add(full)
    return out


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: ``{"params", "weight_decay": weight_decay}`` and ``{"params", "weight_decay": 0.0}``.

    Frozen parameters (``requires_grad=False``) are left out; empty groups are dropped. Shared
    parameters appear once.
    """
    if not (isinstance(weight_decay, int | float) and weight_decay >= 0):
        raise ValueError(f"param_groups: expected weight_decay >= 0, got {weight_decay!r}")
    skip = no_decay_names(model)
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # named_parameters de-duplicates shared tensors
        if p.requires_grad:
            (no_decay if name in skip else decay).append(p)
    groups = [{"params": decay, "weight_decay": float(weight_decay)}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def build_optimizer(
    model_or_groups: nn.Module | Iterable[dict], cfg: TrainConfig
) -> torch.optim.AdamW:
    """AdamW with ``cfg.lr / betas / eps``; a module gets :func:`param_groups`, a list of groups is used as is.

    Groups without their own ``lr`` / ``weight_decay`` take ``cfg.lr`` / ``cfg.weight_decay``.
    """
    if isinstance(model_or_groups, nn.Module):
        groups = param_groups(model_or_groups, cfg.weight_decay)
    else:
        groups = [dict(g) for g in model_or_groups]
        if not groups or not all(isinstance(g, dict) and "params" in g for g in groups):
            raise ValueError("build_optimizer: expected an nn.Module or a non-empty list of dicts with 'params'")
    if not groups:
        raise ValueError("build_optimizer: the model has no trainable parameters")
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """LR multiplier used by optimizer step ``step`` (0-based).

    Warmup: ``(step + 1) / warmup_steps`` for ``step < warmup_steps`` (the first step is not wasted at lr 0).
    Then the factor decays from 1 at step ``warmup_steps`` towards ``min_lr_ratio``, reached at ``step = steps``
    (just after the last step; cosine or linear), or stays 1 (constant). Beyond that it stays at the end value.
    """
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    span = max(1, cfg.steps - cfg.warmup_steps)
    t = min(1.0, (step - cfg.warmup_steps) / span)
    lo = cfg.min_lr_ratio
    if cfg.schedule == "cosine":
        return lo + (1.0 - lo) * 0.5 * (1.0 + math.cos(math.pi * t))
    return lo + (1.0 - lo) * (1.0 - t)


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR applying :func:`lr_factor` to every group's own base lr; call ``.step()`` after each optimizer step."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"build_scheduler: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")

    def factor(step: int) -> float:
        return lr_factor(step, cfg)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
