"""Fine-tuning a pretrained text encoder on the mini-GLUE: SST-2, CoLA, MR, SUBJ, MPQA, CR (ELECTRA sec. 3.1).

The protocol every text paper is judged by (ELECTRA, Funnel): the paper supplies its classifier and parameter groups
(``classifier_fn``), this module supplies the tasks, splits, the loop and the scores.

* Scores: accuracy; Matthews correlation for CoLA (as GLUE). The mini-GLUE score is the mean over tasks, x100.
* Splits: SST-2 trains on the GLUE train and is scored on the GLUE dev set (``load_sst2``); the SentEval-style
  tasks train on ``train.tsv`` and are scored on ``dev.tsv`` (``load_senteval``). ``max_train`` caps the
  training rows (a seeded subset) to fit a laptop budget.
* Schedule: warmup 10%, then linear decay, AdamW, weight decay 0.01, gradient clipping 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import TensorDataset

from paperzoo.data.tokenizer import encode_batch
from paperzoo.train.config import TrainConfig
from paperzoo.train.precision import resolve_precision
from paperzoo.train.rng import seed_everything
from paperzoo.train.trainer import Trainer

__all__ = ["TASKS", "FinetuneConfig", "finetune_task", "load_task", "matthews_corrcoef", "predict"]

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
    precision: str = "fp32"  # TrainConfig.precision: "fp32", "bf16" or "auto"

    def steps_for(self, n_train: int) -> int:
        steps = max(1, math.ceil(self.epochs * n_train / self.batch_size))
        return min(steps, self.max_steps) if self.max_steps else steps


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
def predict(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, batch: int = 256,
            precision: str = "fp32") -> torch.Tensor:
    """Argmax labels (N,) of ``model`` on encoded inputs, computed on the model's device in ``precision``,
    returned on the CPU."""
    model.eval()
    dev = next(model.parameters()).device
    with resolve_precision(precision, dev).autocast(dev):
        out = [model(input_ids=ids[i:i + batch].to(dev), attention_mask=mask[i:i + batch].to(dev)).logits
               .argmax(-1).cpu() for i in range(0, len(ids), batch)]
    return torch.cat(out)


def finetune_task(classifier_fn: Callable[[int], tuple[nn.Module, list[dict]]], tok, task: str, cfg: FinetuneConfig,
                  seed: int, data: dict | None = None, progress: bool = False) -> dict:
    """Fine-tune the classifier that ``classifier_fn`` builds on ``task``; returns
    ``{"task", "metric", "score", "steps", "n_train", "n_test"}`` (score in [0, 1] or MCC in [-1, 1]).

    ``classifier_fn(num_labels) -> (model, param_groups)`` is the paper's part: its pretrained encoder with a
    classification head and its AdamW groups (e.g. layer-wise learning-rate decay). It is called right after seeding;
    the model takes ``input_ids=, attention_mask=, labels=`` and returns ``loss``/``logits``.
    ``data`` may carry pre-loaded ``{task: (train TextDataset, test TextDataset)}`` to skip reading files.
    """
    train, test = data[task] if data and task in data else (load_task(task, "train"), load_task(task, "test"))
    texts, labels = _subset(train.texts, train.labels, cfg.max_train, seed)
    ids, mask = encode_batch(tok, texts, cfg.max_len)
    y = torch.tensor(labels, dtype=torch.long)
    t_texts, t_labels = _subset(test.texts, test.labels, cfg.max_test, 0)
    t_ids, t_mask = encode_batch(tok, t_texts, cfg.max_len)
    t_y = torch.tensor(t_labels, dtype=torch.long)
    seed_everything(seed)
    model, groups = classifier_fn(len(train.classes))
    steps = cfg.steps_for(len(texts))
    tc = TrainConfig(steps=steps, batch_size=min(cfg.batch_size, len(texts)), lr=cfg.lr,
                     weight_decay=cfg.weight_decay, warmup_steps=int(cfg.warmup_frac * steps), schedule="linear",
                     grad_clip=1.0, eval_every=0, ckpt_every=0, log_every=max(1, steps), seed=seed, device=cfg.device,
                     precision=cfg.precision)

    def loss_fn(m, batch):
        i, a, lab = batch
        return m(input_ids=i, attention_mask=a, labels=lab).loss

    Trainer(model, tc, TensorDataset(ids, mask, y), loss_fn, param_groups=groups, progress=progress).fit()
    pred = predict(model, t_ids, t_mask, precision=cfg.precision)
    if task == "CoLA":
        metric, score = "mcc", matthews_corrcoef(pred, t_y)
    else:
        metric, score = "accuracy", float((pred == t_y).float().mean())
    return {"task": task, "metric": metric, "score": score, "steps": steps, "n_train": len(texts),
            "n_test": len(t_texts)}
