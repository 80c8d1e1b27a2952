"""A recipe that trains in seconds, for tests that run ``paperzoo reproduce`` in real processes.

Run it as ``python tests/fake_recipe.py reproduce fake --preset tiny --out DIR [...]``: this registers the paper
``fake-paper`` with the recipe ``fake`` and runs the CLI. Jobs: variants ``a`` and ``b`` x seeds; each trains a
2 -> 1 linear model through the real Trainer, with checkpoints every step. The environment tunes it (worker
processes inherit it): ``FAKE_STEPS`` (default 40), ``FAKE_STEP_S`` (seconds of sleep per step, default 0),
``FAKE_MISSING_DATA=1`` (fail like missing data after the run folder is made, before any job),
``FAKE_LOCK_IN_JOB=1`` (each job takes the run folder's lock, as a worker of the same run).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from torch.utils.data import TensorDataset

from paperzoo.recipes import Job, Preset, run_jobs, start
from paperzoo.train import TrainConfig, Trainer, seed_everything

PAPER = "fake-paper"
PRESETS = {"tiny": Preset(model=None, seeds=2,
                          train=TrainConfig(steps=int(os.environ.get("FAKE_STEPS", "40")), batch_size=4, lr=1e-2,
                                            warmup_steps=0, eval_every=0, ckpt_every=1, log_every=1, device="cpu"))}


def loss_fn(model, batch):
    x, y = batch
    time.sleep(float(os.environ.get("FAKE_STEP_S", "0")))
    return torch.nn.functional.mse_loss(model(x), y)


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: Preset) -> dict:
    if os.environ.get("FAKE_LOCK_IN_JOB") == "1":
        from paperzoo.report.run import lock_run_dir

        lock_run_dir(out.parent.parent)
    seed_everything(job.seed)
    g = torch.Generator().manual_seed(job.seed)
    x = torch.randn(16, 2, generator=g)
    data = TensorDataset(x, x.sum(1, keepdim=True))
    fit = Trainer(torch.nn.Linear(2, 1), p.train, data, loss_fn, out_dir=out, progress=progress).fit(resume=resume)
    return {"loss": fit["loss"], "step": fit["step"], "pid": os.getpid()}


def run(preset=None, seeds=None, out=None, resume=False, progress=True, workers=1, precision=None) -> Path:
    from paperzoo.report import write_result

    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, default="tiny", precision=precision)
    if os.environ.get("FAKE_MISSING_DATA") == "1":
        raise FileNotFoundError("fake data set not found under $PAPERZOO_DATA (fetch it with paperzoo data fetch fake)")
    jobs = [Job(v, s) for s in range(p.seeds) for v in ("a", "b")]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress, args=(p,))
    write_result(run_dir, PAPER, "A fake claim for tests.", {"loss a": res.values("a", "loss")}, "inconclusive")
    return run_dir


def main() -> None:
    from paperzoo import registry

    registry._LOADED = True  # this paper only: importing every paper would cost seconds per process
    registry.register(registry.Paper(PAPER, "A fake paper for tests", "0000.00000", 2020, status="implemented",
                                     recipes={"fake": "fake_recipe:run"}, presets=tuple(PRESETS)))
    from paperzoo.cli import app

    app(prog_name="paperzoo")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
