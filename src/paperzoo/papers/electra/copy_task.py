"""Can a discriminator architecture learn context? Train it alone on the copy task and watch its held-out AUC.

The copy task (:func:`paperzoo.data.copy_task.copy_task`): random windows in which 15% of the tokens are replaced
by a copy of their left neighbour; the discriminator (an encoder + ELECTRA's RTD head, ELECTRA's init) must flag
the copies. No context-free scorer beats AUC 0.5 there, so a rising AUC is context being used. It is trained as in
pretraining (``50 x`` mean sigmoid cross-entropy over all tokens, AdamW with weight decay 0.01, linear warmup and
decay, gradient clipping 1.0: the recipes' :class:`~paperzoo.train.Trainer`) on fresh windows every step.

:func:`train_copy_task` returns the held-out AUC at each evaluation and the token-state cosines that locate a
collapse: after the embedding LayerNorm, after the factorised embedding's projection, and at the encoder's output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from paperzoo.data.copy_task import copy_task
from paperzoo.nn.transformer import TextEncoder, TextEncoderConfig
from paperzoo.train import TrainConfig, Trainer, seed_everything

from .evaluation import binary_auc
from .model import RTDHead, init_weights

__all__ = ["CopyTaskConfig", "CopyDiscriminator", "train_copy_task"]


@dataclass(frozen=True)
class CopyTaskConfig:
    """The task and the training: ``steps`` of ``batch`` fresh windows of ``seq_len`` tokens over ``vocab_size``
    ids, peak ``lr`` after ``warmup`` steps (linear decay to 0), held-out AUC every ``eval_every`` steps on
    ``eval_windows`` windows; ``disc_weight`` scales the loss as ELECTRA's lambda."""

    steps: int = 400
    batch: int = 32
    seq_len: int = 128
    vocab_size: int = 8000
    rate: float = 0.15
    lr: float = 2e-4
    warmup: int = 40
    weight_decay: float = 0.01
    disc_weight: float = 50.0
    eval_every: int = 50
    eval_windows: int = 64


class CopyDiscriminator(nn.Module):
    """:class:`TextEncoder` of ``enc`` + :class:`~.model.RTDHead`, with ELECTRA's init: ``(ids, mask) -> logits``."""

    def __init__(self, enc: TextEncoderConfig):
        super().__init__()
        self.body = TextEncoder(enc)
        self.head = RTDHead(enc.transformer.dim, enc.transformer.activation)
        init_weights(self)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.body(input_ids, attention_mask).last_hidden_state)  # (batch, seq)


def train_copy_task(enc: TextEncoderConfig, task: CopyTaskConfig = CopyTaskConfig(), seed: int = 0,
                    threads: int | None = None) -> dict:
    """Train a :class:`CopyDiscriminator` of ``enc`` on the copy task; returns ``{"auc": {step: held-out AUC},
    "cosine": {"after embedding norm", "after projection", "output": mean pairwise cosine}, "final_auc"}``."""
    _check(enc, task)
    if dataclasses.replace(enc, vocab_size=task.vocab_size) != enc:
        enc = dataclasses.replace(enc, vocab_size=task.vocab_size)
    seed_everything(seed)
    model = CopyDiscriminator(enc)
    ids, mask, labels = copy_task(task.steps * task.batch, task.seq_len, task.vocab_size, task.rate, seed=seed)
    held = copy_task(task.eval_windows, task.seq_len, task.vocab_size, task.rate, seed=10_000 + seed)
    aucs: list[float] = []

    def loss_fn(m, batch):
        x, am, y = batch
        logits = m(x, am).float()
        loss = task.disc_weight * F.binary_cross_entropy_with_logits(logits[am.bool()], y[am.bool()].float())
        return loss, {}

    def eval_fn(m):
        aucs.append(_held_out_auc(m, held))
        return {"auc": aucs[-1]}

    cfg = TrainConfig(steps=task.steps, batch_size=task.batch, lr=task.lr, warmup_steps=task.warmup,
                      schedule="linear", weight_decay=task.weight_decay, eval_every=task.eval_every, ckpt_every=None,
                      log_every=task.steps, seed=seed, device="cpu")
    n = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        Trainer(model, cfg, TensorDataset(ids, mask, labels), loss_fn, eval_fn=eval_fn, progress=False).fit()
    finally:
        torch.set_num_threads(n)
    steps = [*range(task.eval_every, task.steps + 1, task.eval_every)]
    steps += [task.steps] if not steps or steps[-1] != task.steps else []
    auc = dict(zip(steps, aucs[-len(steps):], strict=True))
    return {"auc": auc, "final_auc": auc[task.steps], "cosine": _cosines(model, held)}


@torch.no_grad()
def _held_out_auc(model: CopyDiscriminator, held: Sequence[torch.Tensor]) -> float:
    ids, mask, labels = held
    logits = model(ids, mask)
    inner = torch.zeros_like(labels)
    inner[:, 1:-1] = True  # the window's tokens, not [CLS]/[SEP]
    return binary_auc(logits[inner], labels[inner])


@torch.no_grad()
def _cosines(model: CopyDiscriminator, held: Sequence[torch.Tensor], tokens: int = 1024) -> dict[str, float]:
    """Mean pairwise cosine of token vectors after the embedding norm, after the projection and at the output."""
    ids, mask, _ = held
    emb, got = model.body.embeddings, {}
    hooks = [mod.register_forward_hook(lambda _m, _i, out, k=k: got.__setitem__(k, out))
             for k, mod in (("after embedding norm", emb.norm), ("after projection", emb.project)) if mod is not None]
    was = model.training
    model.eval()
    got["output"] = model.body(ids, mask).last_hidden_state
    model.train(was)
    for h in hooks:
        h.remove()

    def cos(h):
        h = F.normalize(h.reshape(-1, h.shape[-1])[:tokens].float(), dim=-1)
        return float((h @ h.T).mean())

    return {k: cos(v) for k, v in got.items()}


def _check(enc: TextEncoderConfig, task: CopyTaskConfig) -> None:
    if not isinstance(enc, TextEncoderConfig):
        raise ValueError(f"enc must be a TextEncoderConfig (e.g. ElectraConfig(...).discriminator_config()), got "
                         f"{type(enc).__name__}")
    if not isinstance(task, CopyTaskConfig):
        raise ValueError(f"task must be a CopyTaskConfig, got {type(task).__name__}")
    if task.seq_len > enc.transformer.max_len and enc.transformer.position == "learned":
        raise ValueError(f"seq_len ({task.seq_len}) exceeds the learned positions (max_len {enc.transformer.max_len})")
