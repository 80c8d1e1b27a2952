"""``paperzoo reproduce fashion-cnn``: train SmallCNN on Fashion-MNIST over seeds; judge >= 88% test accuracy.

Each seed trains in its own folder ``seed-<k>/`` (checkpoints, ``metrics.jsonl``) through the shared engine, so
``--resume`` continues an interrupted seed exactly and skips finished ones.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from paperzoo.data import load_fashion_mnist
from paperzoo.report import (
    compare,
    new_run_dir,
    pick_preset,
    plot_bars_with_ci,
    plot_metrics,
    write_config,
    write_result,
)
from paperzoo.train import TrainConfig, Trainer, seed_everything

from .model import SmallCNN, SmallCNNConfig

CLAIM = "A small CNN reaches >= 88% test accuracy on Fashion-MNIST in under 3 minutes of CPU training."
THRESHOLD = 0.88
TIME_LIMIT_S = 180.0
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST train pixel statistics


@dataclass(frozen=True)
class Preset:
    seeds: int
    train: TrainConfig
    subset: int | None = None  # train on the first N images (tiny preset only)
    test_subset: int | None = None  # evaluate on the first N test images (tiny preset only)


PRESETS = {
    "small": Preset(seeds=3, train=TrainConfig(steps=940, batch_size=128, lr=2e-3, weight_decay=0.05, warmup_steps=50,
                                               schedule="cosine", eval_every=470, ckpt_every=200, log_every=20)),
    "tiny": Preset(seeds=2, subset=2048, test_subset=2000,
                   train=TrainConfig(steps=30, batch_size=64, lr=2e-3, warmup_steps=3, eval_every=0, ckpt_every=10,
                                     log_every=5)),
}


def _normalise(images: torch.Tensor) -> torch.Tensor:
    return (images.float() / 255.0 - MEAN) / STD


def loss_fn(model: torch.nn.Module, batch) -> tuple[torch.Tensor, dict[str, float]]:
    images, labels = batch
    logits = model(_normalise(images))
    return F.cross_entropy(logits, labels), {"acc": (logits.argmax(1) == labels).float().mean().item()}


@torch.no_grad()
def accuracy(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 1000) -> float:
    device = next(model.parameters()).device
    correct = 0
    for i in range(0, len(labels), batch):
        logits = model(_normalise(images[i:i + batch].to(device)))
        correct += int((logits.argmax(1).cpu() == labels[i:i + batch]).sum())
    return correct / len(labels)


def train_seed(seed: int, preset: Preset, out_dir: Path, resume: bool, progress: bool = True) -> dict:
    """Train one seed in ``out_dir``; returns ``{"seed", "test_acc", "seconds", ...}`` (cached in result.json)."""
    done = out_dir / "seed_result.json"
    if resume and done.is_file():
        return json.loads(done.read_text())
    train, test = load_fashion_mnist("train"), load_fashion_mnist("test")
    images, labels = train.images[:preset.subset], train.labels[:preset.subset]
    test_images, test_labels = test.images[:preset.test_subset], test.labels[:preset.test_subset]
    seed_everything(seed)
    model = SmallCNN(SmallCNNConfig())
    cfg = replace(preset.train, seed=seed)
    trainer = Trainer(model, cfg, TensorDataset(images, labels), loss_fn,
                      eval_fn=lambda m: {"test_acc": accuracy(m, test_images, test_labels)},
                      out_dir=out_dir, progress=progress)
    fit = trainer.fit(resume=resume)
    # Cumulative training time (across resumes) is the "time" of the last metrics record.
    last = json.loads((out_dir / "metrics.jsonl").read_text().splitlines()[-1])
    acc = fit["eval"].get("test_acc")  # the engine's final evaluation (also restored on resume)
    if acc is None:
        acc = accuracy(model.eval(), test_images, test_labels)
    result = {"seed": seed, "test_acc": acc,
              "train_seconds": last["time"], "steps": fit["step"]}
    done.write_text(json.dumps(result, indent=2))
    return result


def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False) -> Path:
    """Train ``seeds`` seeds of SmallCNN and write the report; returns the run folder."""
    name, p = pick_preset(PRESETS, preset, "small", "fashion-cnn")
    n_seeds = seeds or p.seeds
    run_dir = new_run_dir("fashion-cnn", out)
    write_config(run_dir, {"preset": name, "model": asdict(SmallCNNConfig()), "train": asdict(p.train),
                           "subset": p.subset, "test_subset": p.test_subset}, seeds=range(n_seeds))
    results = [train_seed(s, p, run_dir / f"seed-{s}", resume) for s in range(n_seeds)]
    accs = [r["test_acc"] for r in results]
    secs = [r["train_seconds"] for r in results]
    acc_cmp = compare(accs, THRESHOLD, higher_is_better=True)
    time_cmp = compare(secs, TIME_LIMIT_S, higher_is_better=False)
    verdicts = {acc_cmp.verdict, time_cmp.verdict}
    verdict = ("not reproduced" if "not reproduced" in verdicts
               else "reproduced" if verdicts == {"reproduced"} else "inconclusive")
    plots = [
        plot_metrics(run_dir, sorted(run_dir.glob("seed-*/metrics.jsonl")), x="step", ys=("loss",),
                     path=run_dir / "loss.png"),
        plot_bars_with_ci({"test accuracy": accs}, run_dir / "accuracy.png", title="Fashion-MNIST test accuracy",
                          ylabel="accuracy"),
    ]
    write_result(run_dir, "fashion-cnn", CLAIM, {"test_accuracy": accs, "train_seconds_per_seed": secs}, verdict,
                 details={"accuracy vs 88%": str(acc_cmp), "seconds vs 180 s": str(time_cmp), "per seed": results,
                          "preset": name, "torch threads": torch.get_num_threads()},
                 notes=("Verdict rule: reproduced when the 95% t-intervals put mean test accuracy above 0.88 and "
                        "mean training time per seed below 180 s; not reproduced when either interval lies on the "
                        "wrong side; otherwise inconclusive. Time is the wall-clock of the training loop per seed "
                        "on this machine, periodic evaluation included, so a loaded machine makes it slower."),
                 plots=plots)
    return run_dir
