"""Tiny model, data and a runnable training script for the paperzoo.train tests.

Run as a script (a fresh process) with one JSON argument:
``{"out_dir", "steps", "resume", "kill_at", "crash_on_save", "params_out", "cfg": {...}, "dropout"}``.
``kill_at=N`` makes the loss_fn send SIGTERM to its own process during step N; ``crash_on_save=K``
makes the K-th checkpoint write die (``os._exit``) halfway through the temp file.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

import paperzoo
from paperzoo.train import TrainConfig, Trainer, seed_everything

CRASH_CODE = 17


class MLP(nn.Module):
    """(batch, 8) -> (batch, 3) logits, with LayerNorm and dropout."""

    def __init__(self, dropout: float = 0.2):
        super().__init__()
        self.inp = nn.Linear(8, 32)
        self.norm = nn.LayerNorm(32)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.norm(self.inp(x)))))


def make_data(n: int = 96, seed: int = 123) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    return TensorDataset(x, y)


def loss_fn(model, batch):
    x, y = batch
    logits = model(x)
    return nn.functional.cross_entropy(logits, y), {"acc": (logits.argmax(-1) == y).float().mean()}


def params(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train(cfg: TrainConfig, out_dir=None, resume=False, dropout=0.2, kill_at=None, eval_fn=None, loss=loss_fn,
          n=96):
    """Seed, build the MLP, fit; returns (model, result). Uses 1 thread so float sums are reproducible."""
    torch.set_num_threads(1)
    seed_everything(cfg.seed)
    model = MLP(dropout)
    calls = {"n": 0}

    def killing_loss(m, batch):
        calls["n"] += 1
        if kill_at is not None and calls["n"] == (kill_at - 1) * cfg.grad_accum + 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return loss(m, batch)

    trainer = Trainer(model, cfg, make_data(n), killing_loss, eval_fn=eval_fn, out_dir=out_dir, progress=False)
    return model, trainer.fit(resume=resume)


def script_env(**extra: str) -> dict[str, str]:
    """Environment for running this file as a script: paperzoo importable even without an install."""
    src = str(Path(paperzoo.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, **extra)


def _crash_saves_at(k: int) -> None:
    real_save = torch.save
    count = {"n": 0}

    def save(obj, f, *a, **kw):
        count["n"] += 1
        if count["n"] < k:
            return real_save(obj, f, *a, **kw)
        buf = io.BytesIO()
        real_save(obj, buf, *a, **kw)
        data = buf.getvalue()
        f.write(data[: len(data) // 2])
        f.flush()
        os._exit(CRASH_CODE)

    torch.save = save


def main(arg: str) -> None:
    a = json.loads(arg)
    if a.get("crash_on_save"):
        _crash_saves_at(a["crash_on_save"])
    cfg = TrainConfig(**a["cfg"])
    model, result = train(cfg, a.get("out_dir"), a.get("resume", False), a.get("dropout", 0.2), a.get("kill_at"))
    if a.get("params_out") and int(os.environ.get("RANK", "0")) == 0:
        torch.save(params(model), a["params_out"])


if __name__ == "__main__":
    main(sys.argv[1])
