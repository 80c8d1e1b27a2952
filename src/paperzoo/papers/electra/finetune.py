"""Fine-tuning a pretrained encoder on the mini-GLUE: SST-2, CoLA, MR, SUBJ, MPQA, CR (sec. 3.1 / appendix A).

* Model: :class:`~.model.ElectraClassifier` (first-token head) on the pretrained encoder's weights.
* Layer-wise learning-rate decay (official ``_get_layer_lrs``, appendix A, decay 0.8): with ``n`` layers, the
  embeddings get ``lr * d^(n+2)``, layer ``i`` (0-based) ``lr * d^(n+1-i)``, the task head ``lr``. Passed to the
  shared :class:`~paperzoo.train.Trainer` as ``param_groups`` (warmup 10%, then linear decay, AdamW, wd 0.01).
* Scores: accuracy; Matthews correlation for CoLA (as GLUE). The mini-GLUE score is the mean over tasks, x100.
* Splits: SST-2 trains on the GLUE train and is scored on the GLUE dev set (``load_sst2``); the SentEval-style
  tasks train on ``train.tsv`` and are scored on ``dev.tsv`` (``load_senteval``). ``max_train`` caps the
  training rows (a seeded subset) to fit a laptop budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import TensorDataset

from paperzoo.train import TrainConfig, Trainer, no_decay_names, seed_everything

from .model import ElectraClassifier
from .tokenizer import encode_batch

__all__ = ["TASKS", "FinetuneConfig", "layerwise_lr_groups", "matthews_corrcoef", "load_task", "finetune_task"]

TASKS = ("SST-2", "CoLA", "MR", "SUBJ", "MPQA", "CR")


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tuning hyper-parameters (official ELECTRA-Small: lr 3e-4, decay 0.8, batch 32, 3 epochs, warmup 10%)."""

    lr: float = 3e-4
    layer_decay: float = 0.8
    weight_decay: float = 0.01
    batch_size: int = 32
    epochs: float = 3.0
    max_steps: int | None = None
    warmup_frac: float = 0.1
    max_len: int = 64
    max_train: int | None = None
    max_test: int | None = None
    dropout: float = 0.1
    device: str = "cpu"  # TrainConfig.device: "auto", "cpu", "cuda" or "cuda:N"

    def steps_for(self, n_train: int) -> int:
        steps = max(1, math.ceil(self.epochs * n_train / self.batch_size))
        return min(steps, self.max_steps) if self.max_steps else steps


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


def matthews_corrcoef(pred: torch.Tensor, y: torch.Tensor) -> float:
    """Matthews correlation of binary predictions (0 when a margin is empty, as sklearn)."""
    pred, y = pred.bool().flatten(), y.bool().flatten()
    tp, tn = float((pred & y).sum()), float((~pred & ~y).sum())
    fp, fn = float((pred & ~y).sum()), float((~pred & y).sum())
    den = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / den if den > 0 else 0.0


def load_task(task: str, split: str):
    """The :class:`~paperzoo.data.TextDataset` of a mini-GLUE task."""
    from paperzoo.data import load_senteval, load_sst2

    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {TASKS}")
    return load_sst2(split) if task == "SST-2" else load_senteval(task, split)


def _subset(texts, labels, cap: int | None, seed: int):
    if cap is None or cap >= len(texts):
        return list(texts), list(labels)
    idx = torch.randperm(len(texts), generator=torch.Generator().manual_seed(seed))[:cap].tolist()
    return [texts[i] for i in idx], [labels[i] for i in idx]


@torch.no_grad()
@torch.no_grad()
def predict(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, batch: int = 256) -> torch.Tensor:
    """Argmax labels (N,) of ``model`` on encoded inputs, computed on the model's device, returned on the CPU."""
    model.eval()
    dev = next(model.parameters()).device
    out = [model(input_ids=ids[i:i + batch].to(dev), attention_mask=mask[i:i + batch].to(dev)).logits.argmax(-1).cpu()
           for i in range(0, len(ids), batch)]
    return torch.cat(out)


def finetune_task(encoder_state: dict[str, torch.Tensor] | None, encoder_cfg, tok, task: str, cfg: FinetuneConfig,
                  seed: int, data: dict | None = None, progress: bool = False,
                  classifier_fn: Callable[[int], tuple[nn.Module, list[dict]]] | None = None) -> dict:
    """Fine-tune a classifier on ``task`` from ``encoder_state`` (a TextEncoder state dict); returns
    ``{"task", "metric", "score", "steps", "n_train", "n_test"}`` (score in [0, 1] or MCC in [-1, 1]).

    ``data`` may carry pre-loaded ``{task: (train TextDataset, test TextDataset)}`` to skip reading files.
    ``classifier_fn(num_labels) -> (model, param_groups)`` replaces the ELECTRA classifier and its layer-wise groups
    with another encoder's (Funnel's recipe); ``encoder_state``/``encoder_cfg`` are then unused. It is called right
    after seeding, and the model must take ``input_ids=, attention_mask=, labels=`` and return ``loss``/``logits``.
    """
    train, test = data[task] if data and task in data else (load_task(task, "train"), load_task(task, "test"))
    texts, labels = _subset(train.texts, train.labels, cfg.max_train, seed)
    ids, mask = encode_batch(tok, texts, cfg.max_len)
    y = torch.tensor(labels, dtype=torch.long)
    t_texts, t_labels = _subset(test.texts, test.labels, cfg.max_test, 0)
    t_ids, t_mask = encode_batch(tok, t_texts, cfg.max_len)
    t_y = torch.tensor(t_labels, dtype=torch.long)
    seed_everything(seed)
    if classifier_fn is None:
        model = ElectraClassifier(encoder_cfg, num_labels=len(train.classes), classifier_dropout=cfg.dropout)
        model.body.load_state_dict(encoder_state, strict=True)
        groups = layerwise_lr_groups(model, cfg.lr, cfg.layer_decay, cfg.weight_decay)
    else:
        model, groups = classifier_fn(len(train.classes))
    steps = cfg.steps_for(len(texts))
    tc = TrainConfig(steps=steps, batch_size=min(cfg.batch_size, len(texts)), lr=cfg.lr,
                     weight_decay=cfg.weight_decay, warmup_steps=int(cfg.warmup_frac * steps), schedule="linear",
                     grad_clip=1.0, eval_every=0, ckpt_every=0, log_every=max(1, steps), seed=seed, device=cfg.device)

    def loss_fn(m, batch):
        i, a, lab = batch
        return m(input_ids=i, attention_mask=a, labels=lab).loss

    Trainer(model, tc, TensorDataset(ids, mask, y), loss_fn, param_groups=groups, progress=progress).fit()
    pred = predict(model, t_ids, t_mask)
    if task == "CoLA":
        metric, score = "mcc", matthews_corrcoef(pred, t_y)
    else:
        metric, score = "accuracy", float((pred == t_y).float().mean())
    return {"task": task, "metric": metric, "score": score, "steps": steps, "n_train": len(texts),
            "n_test": len(t_texts)}
