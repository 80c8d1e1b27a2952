"""``paperzoo reproduce swin``: Swin vs a parameter- and FLOP-matched ViT on CIFAR-10, and cost scaling.

Two claims of the paper, at laptop scale:

1. Accuracy (sec. 4, Table 1, here on CIFAR-10 JPEG from scratch): with matched parameters and FLOPs, the
   hierarchical shifted-window model beats a plain ViT. Both train with the same schedule, augmentation (random
   crop with 4-pixel reflection padding, horizontal flip) and seeds; judged by Welch's t interval on the per-seed
   test accuracy difference (above 0).
2. Cost (sec. 3.2, eqs. 1-2): window attention is linear in image area, global attention quadratic. The time of one
   batch-1 forward+backward pass is measured from 64^2 to 1024^2 pixels; the log-log slope of time vs pixel count
   over 256^2..1024^2 must be <= 1.15 for Swin and >= 1.6 for ViT.

Each (model, seed) trains in ``<run>/<model>/seed-<k>/`` through the shared engine, so ``--resume`` continues
exactly. FLOPs and activation memory of the scaling models: ``python -m paperzoo.bench.swin``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from paperzoo.measure import loglog_slope, time_interleaved
from paperzoo.recipes import AtLeast, AtMost, Beats, Job, Preset, all_of, cached, run_jobs, smoke, start
from paperzoo.report import plot_bars_with_ci, plot_metrics, write_result
from paperzoo.train import TrainConfig, Trainer, seed_everything

from .model import SwinConfig, SwinForImageClassification, swin_flops
from .vit import ViT, ViTConfig, vit_flops

CLAIM = ("Swin's shifted-window hierarchy is more accurate than a plain ViT with matched parameters and FLOPs "
         "(CIFAR-10 from scratch), and its cost grows linearly with image area while ViT's grows quadratically.")
MEAN = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
STD = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)
SWIN_MAX_SLOPE, VIT_MIN_SLOPE = 1.15, 1.6
MODELS = {"swin": SwinForImageClassification, "vit": ViT}


@dataclass(frozen=True)
class Scaling:
    """The cost measurement: batch-1 forward+backward of ``swin`` and ``vit`` (train mode) at each square size,
    ``repeats`` timed rounds; slopes over the sizes >= 256 (the two largest if none is)."""

    sizes: tuple[int, ...] = (64, 128, 256, 512, 1024)
    swin: SwinConfig = field(default_factory=lambda: SwinConfig(
        dim=32, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8), window_size=7, drop_path_rate=0.0))
    vit: ViTConfig = field(default_factory=lambda: ViTConfig(
        image_size=224, patch_size=8, dim=64, num_layers=4, num_heads=2, drop_path_rate=0.0, num_classes=1000))
    repeats: int = 3


@dataclass(frozen=True, kw_only=True)
class SwinPreset(Preset):
    """``model``: ``{"swin": SwinConfig, "vit": ViTConfig}``; ``subset``/``test_subset``: the first n images of a
    fixed permutation (None: all); ``scaling``: the cost measurement."""

    subset: int | None = None
    test_subset: int | None = None
    scaling: Scaling = field(default_factory=Scaling)


# small: six runs fit a CPU session (68 min with two single-thread workers on 2 cores)
PRESETS = {
    "small": SwinPreset(model={"swin": SwinConfig.preset("small"), "vit": ViTConfig.preset("small")}, seeds=3,
                        train=TrainConfig(steps=700, batch_size=128, lr=1e-3, weight_decay=0.05, warmup_steps=35,
                                          schedule="cosine", eval_every=350, ckpt_every=100, log_every=20)),
    # long: does the locality prior pay off with more training? 10 epochs of the 50k training images (3,910 steps
    # of 128, 5.6x small) in bf16 autocast where the CPU has it, 2 seeds: about 2 h with --workers 2 at the
    # measured 0.98 (Swin) and 0.80 (ViT) s/step per single-thread worker. 15 epochs x 3 seeds would take 4.4 h.
    "long": SwinPreset(model={"swin": SwinConfig.preset("small"), "vit": ViTConfig.preset("small")}, seeds=2,
                       train=TrainConfig(steps=3910, batch_size=128, lr=1e-3, weight_decay=0.05, warmup_steps=195,
                                         schedule="cosine", eval_every=782, ckpt_every=200, log_every=50,
                                         precision="auto")),
    "tiny": SwinPreset(model={"swin": SwinConfig.preset("tiny", depths=(1, 1), num_heads=(2, 2), dim=16),
                              "vit": ViTConfig.preset("tiny", patch_size=4)}, seeds=2, subset=256, test_subset=200,
                       train=TrainConfig(steps=48, batch_size=32, lr=3e-3, warmup_steps=4, eval_every=0,
                                         ckpt_every=16, log_every=4),
                       scaling=Scaling(sizes=(32, 64), swin=SwinConfig.preset("tiny", depths=(1, 1), dim=16),
                                       vit=ViTConfig.preset("tiny", patch_size=4), repeats=1)),
}


def augment(images: torch.Tensor) -> torch.Tensor:
    """Random 32x32 crop of the 4-pixel reflection-padded image and a random horizontal flip, per sample;
    ``uint8 (B, 3, H, W) -> float (B, 3, H, W)`` normalised with the CIFAR-10 statistics."""
    x = images.float() / 255.0
    b, _, h, w = x.shape
    padded = F.pad(x, (4, 4, 4, 4), mode="reflect")
    dy, dx = torch.randint(0, 9, (b,)), torch.randint(0, 9, (b,))
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None]
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :]
    x = padded[torch.arange(b)[:, None, None, None], torch.arange(3)[None, :, None, None], rows, cols]
    x = torch.where(torch.rand(b, 1, 1, 1) < 0.5, x.flip(-1), x)
    return (x - MEAN) / STD


def _subset(ds, n: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` images of a fixed random permutation (the files are grouped by class)."""
    idx = torch.randperm(len(ds.labels), generator=torch.Generator().manual_seed(0))[:n]
    return ds.images[idx], ds.labels[idx]


def _normalise(images: torch.Tensor) -> torch.Tensor:
    return (images.float() / 255.0 - MEAN) / STD


def loss_fn(model: torch.nn.Module, batch) -> tuple[torch.Tensor, dict[str, float]]:
    images, labels = batch
    out = model(pixel_values=augment(images), labels=labels)
    return out.loss, {"acc": (out.logits.argmax(1) == labels).float().mean().item()}


@torch.no_grad()
def accuracy(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 500) -> float:
    correct = 0
    for i in range(0, len(labels), batch):
        logits = model(pixel_values=_normalise(images[i:i + batch])).logits
        correct += int((logits.argmax(1) == labels[i:i + batch]).sum())
    return correct / len(labels)


def train_job(job: Job, out: Path, resume: bool, progress: bool, train: TrainConfig, data) -> dict:
    """Train ``MODELS[job.variant](job.config)`` with ``job.seed`` in ``out``; ``{"test_acc", "params", ...}``."""
    (images, labels), (test_images, test_labels) = data
    seed_everything(job.seed)
    model = MODELS[job.variant](job.config)
    trainer = Trainer(model, replace(train, seed=job.seed), TensorDataset(images, labels), loss_fn,
                      eval_fn=lambda m: {"test_acc": accuracy(m, test_images, test_labels)}, out_dir=out,
                      progress=progress)
    fit = trainer.fit(resume=resume)
    acc = fit["eval"].get("test_acc")
    if acc is None:
        acc = accuracy(model.eval(), test_images, test_labels)
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    return {"model": job.variant, "seed": job.seed, "test_acc": acc, "train_seconds": last["time"],
            "steps": fit["step"], "params": sum(p.numel() for p in model.parameters())}


def fwd_bwd_step(model: torch.nn.Module, x: torch.Tensor):
    def step():
        model.zero_grad(set_to_none=True)
        model(pixel_values=x).logits.sum().backward()
    return step


def time_scaling(s: Scaling, threads: int | None = 1) -> dict:
    """Median seconds of one batch-1 forward+backward of ``s.swin`` and ``s.vit`` at each size, every (model, size)
    timed in turn, round after round (:func:`~paperzoo.measure.time_interleaved`), and the log-log slope of time
    against pixel count: ``{"sizes", "seconds": {model: [s per size]}, "slope_sizes", "slopes": {model: slope}}``.

    ``threads`` (default 1) fixes torch's thread count while timing: on a shared, loaded machine two OpenMP
    threads wait on each other at every op, which inflates op-heavy models' times by a load-dependent factor.
    """
    torch.manual_seed(0)
    models = {"swin": SwinForImageClassification(s.swin).train(), "vit": ViT(s.vit).train()}
    steps = {f"{k} {n}": fwd_bwd_step(m, torch.randn(1, 3, n, n)) for n in s.sizes for k, m in models.items()}
    old = torch.get_num_threads()
    torch.set_num_threads(threads or old)
    try:
        stats = time_interleaved(steps, warmup=1, repeats=s.repeats)
    finally:
        torch.set_num_threads(old)
    seconds = {k: [stats[f"{k} {n}"].median for n in s.sizes] for k in models}
    fit = [n for n in s.sizes if n >= 256] or list(s.sizes[-2:])
    slopes = {k: loglog_slope([n * n for n in fit], [t for n, t in zip(s.sizes, v, strict=True) if n in fit])
              for k, v in seconds.items()}
    return {"sizes": list(s.sizes), "seconds": seconds, "slope_sizes": fit, "slopes": slopes}


def plot_scaling(sizes: list[int], panels: dict[str, dict[str, list[float]]], path: Path) -> Path:
    """One log-log panel per measure (``{title: {model: value per size}}``) against pixel count, slopes in the
    legend (over the sizes >= 256, as :func:`time_scaling`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.4 * len(panels), 3.8), layout="constrained")
    pixels = [n * n for n in sizes]
    fit = [i for i, n in enumerate(sizes) if n >= 256] or [len(sizes) - 2, len(sizes) - 1]
    for ax, (title, series) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels.items(), strict=True):
        for kind, ys in series.items():
            s = loglog_slope([pixels[i] for i in fit], [ys[i] for i in fit])
            ax.loglog(pixels, ys, "o-", label=f"{kind} (slope {s:.2f})")
        ax.set_xlabel("pixels")
        ax.set_title(title)
        ax.legend()
    fig.savefig(path, dpi=110)
    return path


def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1,
        precision: str | None = None) -> Path:
    """Train Swin and ViT over ``seeds`` seeds, measure cost scaling, write the report; returns the run folder."""
    from paperzoo.data import load_cifar10

    name, p, run_dir = start("swin", PRESETS, preset, seeds, out, precision=precision)
    data = tuple(_subset(load_cifar10(split), n) for split, n in (("train", p.subset), ("test", p.test_subset)))
    jobs = [Job(k, s, p.model[k]) for k in MODELS for s in range(p.seeds)]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress, args=(p.train, data))
    acc = {k: res.values(k, "test_acc") for k in MODELS}
    scaling = cached(run_dir / "scaling", resume, lambda: time_scaling(p.scaling))
    sl = scaling["slopes"]
    acc_verdict = Beats().judge(acc["swin"], acc["vit"], "Swin's test accuracy", "ViT's")
    verdict = smoke(all_of(acc_verdict, AtMost(SWIN_MAX_SLOPE).judge(sl["swin"], "Swin's time slope"),
                           AtLeast(VIT_MIN_SLOPE).judge(sl["vit"], "ViT's time slope")), name)
    plots = [
        plot_metrics(run_dir, {str(j): j.folder(run_dir) / "metrics.jsonl" for j in jobs}, x="step", ys=("loss",),
                     path=run_dir / "loss.png"),
        plot_bars_with_ci({f"{k} test accuracy": v for k, v in acc.items()}, run_dir / "accuracy.png",
                          title="CIFAR-10 test accuracy", ylabel="accuracy"),
        plot_scaling(scaling["sizes"], {"fwd+bwd time (s)": scaling["seconds"]}, run_dir / "scaling.png"),
    ]
    write_result(
        run_dir, "swin", CLAIM,
        {"swin_test_accuracy": acc["swin"], "vit_test_accuracy": acc["vit"], "swin_minus_vit": acc_verdict.comparison,
         "swin_time_slope": [sl["swin"]], "vit_time_slope": [sl["vit"]]},
        verdict,
        details={"params": {k: res[k, 0]["params"] for k in MODELS},
                 "forward MACs at 32x32": {"swin": swin_flops(p.model["swin"], 32, 32),
                                           "vit": vit_flops(p.model["vit"], 32, 32)},
                 "time slopes (log-log vs pixels)": {k: round(v, 3) for k, v in sl.items()},
                 "fwd+bwd seconds by size": {f"{k} {n}x{n}": round(t, 4) for k, ts in scaling["seconds"].items()
                                             for n, t in zip(scaling["sizes"], ts, strict=True)},
                 "per seed": {f"{r['model']} seed {r['seed']}": f"test accuracy {r['test_acc']:.4f} after "
                              f"{r['train_seconds']:.0f} s" for k in MODELS for r in res.of(k)},
                 "preset": name, "torch threads": torch.get_num_threads()},
        notes=(f"Scaling models are separate: Swin patch {p.scaling.swin.patch_size} window "
               f"{p.scaling.swin.window_size}, ViT patch {p.scaling.vit.patch_size} (dim {p.scaling.vit.dim}, "
               f"{p.scaling.vit.num_layers} layers); batch 1, train mode, one thread, each (model, size) timed in "
               f"turn; slopes over sizes {scaling['slope_sizes']}. FLOPs and activation memory of the same models: "
               "`python -m paperzoo.bench.swin` (benchmarks/swin.scaling.md). Timing on a shared CPU."),
        plots=plots)
    return run_dir
