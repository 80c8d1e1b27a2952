"""``paperzoo reproduce swin``: Swin vs a parameter- and FLOP-matched ViT on CIFAR-10, and cost scaling.

Two claims of the paper, at laptop scale:

1. Accuracy (sec. 4, Table 1, here on CIFAR-10 JPEG from scratch): with matched parameters and FLOPs, the
   hierarchical shifted-window model beats a plain ViT. Both train with the same schedule, augmentation (random
   crop with 4-pixel reflection padding, horizontal flip) and seeds; judged by Welch's t interval on the per-seed
   test accuracy difference (reproduced if it lies above 0).
2. Cost (sec. 3.2, eqs. 1-2): window attention is linear in image area, global attention quadratic. FLOPs, time
   and activation memory (bytes saved for backward) of one forward+backward pass are measured from 64^2 to
   1024^2 pixels; the log-log slope of time vs pixel count between 256^2 and 1024^2 must be <= 1.15 for Swin and
   >= 1.6 for ViT.

Each (model, seed) trains in its own folder through the shared engine, so ``--resume`` continues exactly.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from paperzoo.report import (
    compare,
    mean_ci,
    new_run_dir,
    pick_preset,
    plot_bars_with_ci,
    plot_metrics,
    write_config,
    write_result,
)
from paperzoo.train import TrainConfig, Trainer, seed_everything

from .model import SwinConfig, SwinForImageClassification, swin_flops
from .vit import ViT, ViTConfig, vit_flops

CLAIM = ("Swin's shifted-window hierarchy is more accurate than a plain ViT with matched parameters and FLOPs "
         "(CIFAR-10 from scratch), and its cost grows linearly with image area while ViT's grows quadratically.")
MEAN = torch.tensor([0.4914, 0.4822, 0.4465]).view(1, 3, 1, 1)
STD = torch.tensor([0.2470, 0.2435, 0.2616]).view(1, 3, 1, 1)
SWIN_MAX_SLOPE, VIT_MIN_SLOPE = 1.15, 1.6


@dataclass(frozen=True)
class Preset:
    seeds: int
    train: TrainConfig
    swin: SwinConfig
    vit: ViTConfig
    subset: int | None = None
    test_subset: int | None = None
    scaling_sizes: tuple[int, ...] = (64, 128, 256, 512, 1024)
    scaling_swin: SwinConfig = field(default_factory=lambda: SwinConfig(
        embed_dim=32, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8), window_size=7, drop_path_rate=0.0))
    scaling_vit: ViTConfig = field(default_factory=lambda: ViTConfig(
        image_size=224, patch_size=8, dim=64, depth=4, num_heads=2, drop_path_rate=0.0, num_classes=1000))
    scaling_repeats: int = 3


# Sized so six runs fit a CPU session (68 min with two single-thread workers on 2 cores):
# Swin (patch 2, embed 64, depths 2-6, window 4): 1.33M params, 106M MACs at 32x32;
# ViT (patch 4, dim 128, depth 7): 1.40M params, 96M MACs.
_SWIN_C = SwinConfig(image_size=32, patch_size=2, embed_dim=64, depths=(2, 6), num_heads=(2, 4), window_size=4,
                     drop_path_rate=0.1, num_classes=10)
_VIT_C = ViTConfig(image_size=32, patch_size=4, dim=128, depth=7, num_heads=4, drop_path_rate=0.1, num_classes=10)

PRESETS = {
    "small": Preset(seeds=3, swin=_SWIN_C, vit=_VIT_C,
                    train=TrainConfig(steps=700, batch_size=128, lr=1e-3, weight_decay=0.05, warmup_steps=35,
                                      schedule="cosine", eval_every=350, ckpt_every=100, log_every=20)),
    "tiny": Preset(seeds=2, subset=256, test_subset=200,
                   swin=SwinConfig.preset("tiny", depths=(1, 1), num_heads=(2, 2), embed_dim=16),
                   vit=ViTConfig.preset("tiny", patch_size=4),
                   train=TrainConfig(steps=48, batch_size=32, lr=3e-3, warmup_steps=4, eval_every=0, ckpt_every=16,
                                     log_every=4),
                   scaling_sizes=(32, 64), scaling_swin=SwinConfig.preset("tiny", depths=(1, 1), embed_dim=16),
                   scaling_vit=ViTConfig.preset("tiny", patch_size=4), scaling_repeats=1),
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


def build(kind: str, preset: Preset) -> torch.nn.Module:
    return SwinForImageClassification(preset.swin) if kind == "swin" else ViT(preset.vit)


def train_one(kind: str, seed: int, preset: Preset, out_dir: Path, resume: bool, data, progress: bool = True) -> dict:
    """Train one model for one seed in ``out_dir``; returns ``{"model", "seed", "test_acc", ...}`` (cached)."""
    done = out_dir / "seed_result.json"
    if resume and done.is_file():
        return json.loads(done.read_text())
    (images, labels), (test_images, test_labels) = data
    seed_everything(seed)
    model = build(kind, preset)
    trainer = Trainer(model, replace(preset.train, seed=seed), TensorDataset(images, labels), loss_fn,
                      eval_fn=lambda m: {"test_acc": accuracy(m, test_images, test_labels)}, out_dir=out_dir,
                      progress=progress)
    fit = trainer.fit(resume=resume)
    last = json.loads((out_dir / "metrics.jsonl").read_text().splitlines()[-1])
    acc = fit["eval"].get("test_acc")
    if acc is None:
        acc = accuracy(model.eval(), test_images, test_labels)
    result = {"model": kind, "seed": seed, "test_acc": acc, "train_seconds": last["time"], "steps": fit["step"],
              "params": sum(p.numel() for p in model.parameters())}
    done.write_text(json.dumps(result, indent=2))
    return result


def _saved_bytes(fn) -> int:
    """Bytes of distinct storages autograd saves for backward while ``fn()`` runs (activation memory)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        s = t.untyped_storage()
        seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(seen.values())


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def cost_scaling(preset: Preset, log=print, threads: int | None = 1) -> dict:
    """FLOPs (analytic forward MACs x 2 x 3 for fwd+bwd), median time and activation bytes of a batch-1
    forward+backward for the preset's scaling Swin and ViT at each size; plus log-log slopes vs pixels.

    ``threads`` (default 1) fixes torch's thread count while timing: on a shared, loaded machine two OpenMP
    threads wait on each other at every op, which inflates op-heavy models' times by a load-dependent factor.
    """
    old_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _cost_scaling(preset, log)
    finally:
        torch.set_num_threads(old_threads)


def _cost_scaling(preset: Preset, log) -> dict:
    torch.manual_seed(0)
    models = {"swin": SwinForImageClassification(preset.scaling_swin).train(), "vit": ViT(preset.scaling_vit).train()}
    flops = {"swin": lambda s: 6 * swin_flops(preset.scaling_swin, s, s),
             "vit": lambda s: 6 * vit_flops(preset.scaling_vit, s, s)}
    rows = []
    for size in preset.scaling_sizes:
        x = torch.randn(1, 3, size, size)
        for kind, model in models.items():
            def step(model=model, x=x):
                model.zero_grad(set_to_none=True)
                model(pixel_values=x).logits.sum().backward()

            mem = _saved_bytes(lambda model=model, x=x: model(pixel_values=x).logits)
            step()  # warm-up (masks, allocator)
            times = []
            for _ in range(preset.scaling_repeats):
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
            row = {"model": kind, "size": size, "pixels": size * size, "flops": flops[kind](size),
                   "seconds": sorted(times)[len(times) // 2], "activation_bytes": mem}
            rows.append(row)
            log(f"scaling {kind} {size}x{size}: {row['seconds']:.3f} s, {row['flops'] / 1e9:.2f} GFLOP, "
                f"{mem / 2**20:.1f} MiB")
    big = [s for s in preset.scaling_sizes if s >= 256] or list(preset.scaling_sizes[-2:])
    slopes = {}
    for kind in models:
        sel = [r for r in rows if r["model"] == kind and r["size"] in big]
        for key in ("seconds", "flops", "activation_bytes"):
            slopes[f"{kind}_{key}"] = slope([r["pixels"] for r in sel], [r[key] for r in sel])
    return {"rows": rows, "slopes": slopes, "slope_sizes": big,
            "swin": asdict(preset.scaling_swin), "vit": asdict(preset.scaling_vit)}


def _plot_scaling(scaling: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, key, label in zip(axes, ("seconds", "flops", "activation_bytes"),
                              ("fwd+bwd time (s)", "FLOPs", "activation memory (bytes)"), strict=True):
        for kind in ("swin", "vit"):
            rows = [r for r in scaling["rows"] if r["model"] == kind]
            s = scaling["slopes"][f"{kind}_{key}"]
            ax.loglog([r["pixels"] for r in rows], [r[key] for r in rows], "o-", label=f"{kind} (slope {s:.2f})")
        ax.set_xlabel("pixels")
        ax.set_title(label)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        workers: int = 1) -> Path:
    """Train Swin and ViT over ``seeds`` seeds, measure cost scaling, write the report; returns the run folder.

    ``workers > 1`` trains that many (model, seed) runs at once in separate processes (``paperzoo.train.parallel``).
    """
    from paperzoo.data import load_cifar10
    from paperzoo.train.parallel import run_jobs

    name, p = pick_preset(PRESETS, preset, "small", "swin")
    n_seeds = seeds or p.seeds
    run_dir = new_run_dir("swin", out)
    write_config(run_dir, {"preset": name, "swin": asdict(p.swin), "vit": asdict(p.vit), "train": asdict(p.train),
                           "subset": p.subset, "test_subset": p.test_subset,
                           "scaling_sizes": p.scaling_sizes}, seeds=range(n_seeds))
    data = tuple(_subset(load_cifar10(split), n) for split, n in (("train", p.subset), ("test", p.test_subset)))
    jobs = [(k, s, p, run_dir / f"{k}-seed-{s}", resume, data, workers == 1) for k in ("swin", "vit")
            for s in range(n_seeds)]
    done = run_jobs(train_one, jobs, workers, label=lambda j: f"{j[0]} seed {j[1]}")
    results = {k: [r for r, j in zip(done, jobs, strict=True) if j[0] == k] for k in ("swin", "vit")}
    accs = {k: [r["test_acc"] for r in v] for k, v in results.items()}
    acc_cmp = compare(accs["swin"], accs["vit"], higher_is_better=True)

    scaling_path = run_dir / "scaling.json"
    if resume and scaling_path.is_file():
        scaling = json.loads(scaling_path.read_text())
    else:
        scaling = cost_scaling(p)
        scaling_path.write_text(json.dumps(scaling, indent=2))
    sl = scaling["slopes"]
    scaling_ok = sl["swin_seconds"] <= SWIN_MAX_SLOPE and sl["vit_seconds"] >= VIT_MIN_SLOPE
    verdict = ("reproduced" if acc_cmp.verdict == "reproduced" and scaling_ok
               else "not reproduced" if acc_cmp.verdict == "not reproduced" or not scaling_ok else "inconclusive")
    n = {k: results[k][0]["params"] for k in results}
    macs = {"swin": swin_flops(p.swin, 32, 32), "vit": vit_flops(p.vit, 32, 32)}
    plots = [
        plot_metrics(run_dir, sorted(run_dir.glob("*-seed-*/metrics.jsonl")), x="step", ys=("loss",),
                     path=run_dir / "loss.png"),
        plot_bars_with_ci({f"{k} test accuracy": v for k, v in accs.items()}, run_dir / "accuracy.png",
                          title="CIFAR-10 test accuracy", ylabel="accuracy"),
        _plot_scaling(scaling, run_dir / "scaling.png"),
    ]
    write_result(
        run_dir, "swin", CLAIM,
        {"swin_test_accuracy": accs["swin"], "vit_test_accuracy": accs["vit"], "swin_minus_vit": acc_cmp,
         "swin_time_slope": mean_ci([sl["swin_seconds"]]), "vit_time_slope": mean_ci([sl["vit_seconds"]])},
        verdict,
        details={"accuracy: swin vs vit": str(acc_cmp),
                 "time slopes (log-log vs pixels)": {k: round(v, 3) for k, v in sl.items()},
                 "scaling criterion": f"swin <= {SWIN_MAX_SLOPE}, vit >= {VIT_MIN_SLOPE}: "
                                      f"{'met' if scaling_ok else 'not met'}",
                 "params": n, "forward MACs at 32x32": macs, "per seed": results, "preset": name,
                 "scaling rows": scaling["rows"], "torch threads": torch.get_num_threads()},
        notes=("Verdict: reproduced when the 95% Welch interval of (Swin - ViT) test accuracy lies above 0 AND the "
               "time slopes meet the criterion; not reproduced when the interval lies below 0 or a slope misses; "
               "otherwise inconclusive. Scaling models are separate (see scaling.json): Swin patch 4 window 7, "
               "ViT patch 8 (dim 64, depth 4), batch 1, train mode; FLOPs are analytic multiply-adds x 2 x 3 "
               "(fwd+bwd); activation memory is the bytes of distinct storages autograd saves for backward. "
               "Timing on a shared CPU."),
        plots=plots)
    return run_dir


def write_scaling(path: Path = Path("benchmarks/swin.scaling.json"), preset: str = "small") -> dict:
    """Measure :func:`cost_scaling` for ``preset`` and write it as JSON plus a Markdown table beside it."""
    scaling = cost_scaling(PRESETS[preset], threads=1)
    scaling["command"] = "python -m paperzoo.papers.swin.recipe"
    scaling["torch_threads"] = 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(scaling, indent=2) + "\n")
    lines = ["| model | size | GFLOP (fwd+bwd) | seconds | activation MiB |", "|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['size']}x{r['size']} | {r['flops'] / 1e9:.2f} | {r['seconds']:.3f} | "
              f"{r['activation_bytes'] / 2**20:.1f} |" for r in scaling["rows"]]
    sizes = scaling["slope_sizes"]
    lines += ["", f"Log-log slopes vs pixel count over {sizes[0]}^2..{sizes[-1]}^2:", ""]
    lines += [f"- {k}: {v:.3f}" for k, v in scaling["slopes"].items()]
    path.with_suffix(".md").write_text(f"# Swin vs ViT cost scaling\n\n`{scaling['command']}`\n\n"
                                       + "\n".join(lines) + "\n")
    _plot_scaling(scaling, path.with_suffix(".png"))
    return scaling


if __name__ == "__main__":
    write_scaling()
