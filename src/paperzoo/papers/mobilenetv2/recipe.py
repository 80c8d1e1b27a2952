"""``paperzoo reproduce mobilenetv2``: the paper's ablations (Fig. 6) on CIFAR-10 (JPEG), several seeds each.

Claims judged (Sandler et al., 2018, Sec. 6.4 and Fig. 6):

1. *Linear bottlenecks*: removing the activation after the 1x1 projection is better than ReLU6 there.
   Compared: ``linear`` (the paper's block) vs ``relu6_projection``.
2. *Shortcuts between bottlenecks*: better than shortcuts between the expanded layers and than none.
   Compared: ``linear`` vs ``shortcut_expansion`` and vs ``shortcut_none``; both comparisons must hold.

Each comparison is :class:`~paperzoo.recipes.Beats` (the 95% Welch interval of the accuracy difference above 0:
reproduced; below: not reproduced; else inconclusive); the overall verdict is ``all_of`` both claims.

Also measured (no verdict; the paper fixes t = 6 and only remarks that smaller networks prefer smaller t):
the expansion factor t in {1, 2, 6} (``t1``, ``t2``, ``linear``), and the int8 post-training quantization
accuracy drop of the ``linear`` models.

Setup: the small-input variant (stem stride 1, so 32x32 images end at 2x2), symmetric padding, random crop
(4-pixel zero pad) and horizontal flip, SGD with Nesterov momentum 0.9 and a cosine schedule with warmup,
weight decay 4e-5 (the paper's) on conv/linear weights, cross-entropy. The paper trained on ImageNet with
RMSProp; see README.md for every difference.

Presets: ``tiny`` (a smoke test: tiny network, 1k images, 32 steps; its verdicts mean nothing), ``small``
(the committed reproduction: width 0.5, 20k training images, 10 epochs, 3 seeds), ``cifar`` (the full-width
network of model preset ``cifar`` on all 50k images, 30 epochs; for a bigger machine).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from paperzoo.papers.mobilenetv2.model import MobileNetV2Config, MobileNetV2ForImageClassification, normalize
from paperzoo.recipes import Beats, Job, Preset, all_of, run_jobs, smoke, start
from paperzoo.train.config import TrainConfig

PAPER = "mobilenetv2"
CLAIM = ("(1) A linear bottleneck beats ReLU6 after the projection; (2) shortcuts between the thin bottlenecks "
         "beat shortcuts between the expanded layers and no shortcuts (MobileNetV2, Fig. 6).")

# variant name -> MobileNetV2Config overrides
VARIANTS: dict[str, dict[str, Any]] = {
    "linear": {},  # the paper's network: linear bottleneck, shortcuts between bottlenecks, t = 6
    "relu6_projection": {"linear_bottleneck": False},
    "shortcut_expansion": {"shortcut": "expansion"},
    "shortcut_none": {"shortcut": "none"},
    "t2": {"expand_ratio": 2},
    "t1": {"expand_ratio": 1},
}


@dataclass(frozen=True, kw_only=True)
class MobileNetV2Preset(Preset):
    """``model``: the ``linear`` network (each variant overrides it); images: ``train_subset`` / ``test_subset``
    of CIFAR-10 (all when None); ``quant_calibration`` training images calibrate the int8 model."""

    train_subset: int | None
    test_subset: int | None
    augment: bool = True
    quant_calibration: int = 512
    eval_batch: int = 500

    def model_config(self, variant: str) -> MobileNetV2Config:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(VARIANTS)}")
        return replace(self.model, **VARIANTS[variant])


def schedule(epochs: float, images: int, batch_size: int, lr: float, warmup_epochs: float,
             weight_decay: float = 4e-5) -> TrainConfig:
    """``epochs`` over ``images`` training images as a TrainConfig: cosine with warmup, no clipping, CPU;
    five evaluations per run."""
    steps = max(1, math.ceil(epochs * images / batch_size))
    return TrainConfig(steps=steps, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                       warmup_steps=min(steps, int(warmup_epochs * images / batch_size)), schedule="cosine",
                       grad_clip=None, eval_every=max(1, steps // 5), ckpt_every=max(1, min(200, steps // 5)),
                       log_every=max(1, min(20, steps // 10)), device="cpu")


# the smoke test's network: model preset tiny with a four-row table, full width, a 16-channel stem, a 128 head
TINY_NET = MobileNetV2Config.preset("tiny", width_multiplier=1.0, stem_channels=16, head_channels=128,
                                    blocks=((1, 8, 1, 1), (6, 16, 2, 2), (6, 24, 2, 2), (6, 32, 1, 1)))

PRESETS: dict[str, MobileNetV2Preset] = {
    "tiny": MobileNetV2Preset(model=TINY_NET, train_subset=1024, test_subset=512,
                              train=schedule(2, 1024, 64, lr=0.05, warmup_epochs=0.25), seeds=1,
                              quant_calibration=128),
    "small": MobileNetV2Preset(model=MobileNetV2Config.preset("small"), train_subset=20_000, test_subset=None,
                               train=schedule(10, 20_000, 128, lr=0.1, warmup_epochs=0.5), seeds=3),
    "cifar": MobileNetV2Preset(model=MobileNetV2Config.preset("cifar"), train_subset=None, test_subset=None,
                               train=schedule(30, 50_000, 128, lr=0.1, warmup_epochs=1), seeds=3),
}


def augment(images: torch.Tensor, pad: int = 4) -> torch.Tensor:
    """Random crop after zero padding and random horizontal flip, per image, with torch's global RNG.

    ``(B, C, H, W)`` -> same shape; vectorised (one gather, no Python loop over images).
    """
    b, _, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad))
    oy = torch.randint(0, 2 * pad + 1, (b,))
    ox = torch.randint(0, 2 * pad + 1, (b,))
    rows = (oy[:, None] + torch.arange(h)[None, :])[:, None, :, None]  # (b, 1, h, 1)
    cols = (ox[:, None] + torch.arange(w)[None, :])
    flip = torch.rand(b) < 0.5
    cols = torch.where(flip[:, None], cols.flip(1), cols)[:, None, None, :]  # (b, 1, 1, w)
    return padded[torch.arange(b)[:, None, None, None], torch.arange(images.shape[1])[None, :, None, None], rows, cols]


def loss_fn_for(augment_images: bool):
    """``loss_fn(model, (uint8 images, labels)) -> (loss, {"accuracy": ...})`` for the Trainer."""

    def loss_fn(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]):
        images, labels = batch
        if augment_images:
            images = augment(images)
        out = model(pixel_values=normalize(images), labels=labels)
        acc = (out.logits.detach().argmax(1) == labels).float().mean()
        return out.loss, {"accuracy": acc}

    return loss_fn


@torch.no_grad()
def evaluate(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 500) -> dict[str, float]:
    """Accuracy and mean cross-entropy of ``model`` (eval mode) on uint8 ``images`` (N, 3, H, W)."""
    was = model.training
    model.eval()
    correct, loss = 0, 0.0
    for i in range(0, len(images), batch):
        x, y = normalize(images[i:i + batch]), labels[i:i + batch]
        out = model(pixel_values=x) if isinstance(model, MobileNetV2ForImageClassification) else model(x)
        logits = out.logits if hasattr(out, "logits") else out
        correct += int((logits.argmax(1) == y).sum())
        loss += float(F.cross_entropy(logits, y, reduction="sum"))
    model.train(was)
    return {"accuracy": correct / len(images), "loss": loss / len(images)}


@functools.lru_cache(maxsize=1)
def load_data(train_subset: int | None, test_subset: int | None) -> dict[str, torch.Tensor]:
    """CIFAR-10 (JPEG) train/test as uint8 tensors, subsampled with a fixed generator (same for every seed).

    Cached: a worker process that trains several jobs reads the images once."""
    from paperzoo.data import load_cifar10

    out = {}
    for split, n in (("train", train_subset), ("test", test_subset)):
        d = load_cifar10(split)
        images, labels = d.images, d.labels
        if n is not None and n < len(labels):
            idx = torch.randperm(len(labels), generator=torch.Generator().manual_seed(1234))[:n]
            images, labels = images[idx], labels[idx]
        out[f"{split}_images"], out[f"{split}_labels"] = images.contiguous(), labels.contiguous()
    return out


def _optimizer(model: torch.nn.Module, train: TrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() > 1 else no_decay).append(p)  # BN and biases are not decayed
    return torch.optim.SGD([{"params": decay, "weight_decay": train.weight_decay},
                            {"params": no_decay, "weight_decay": 0.0}], lr=train.lr, momentum=0.9, nesterov=True)


def train_variant(p: MobileNetV2Preset, variant: str, seed: int, data: dict[str, torch.Tensor],
                  out_dir: Path | None, resume: bool = False,
                  progress: bool = True) -> tuple[MobileNetV2ForImageClassification, dict]:
    """Train one ``variant`` with ``seed``; returns the model and the Trainer summary (with the final eval)."""
    from paperzoo.train import Trainer, seed_everything

    seed_everything(seed)
    model = MobileNetV2ForImageClassification(p.model_config(variant)).to(memory_format=torch.channels_last)
    trainer = Trainer(model, replace(p.train, seed=seed), TensorDataset(data["train_images"], data["train_labels"]),
                      loss_fn_for(p.augment),
                      eval_fn=lambda m: evaluate(m, data["test_images"], data["test_labels"], p.eval_batch),
                      out_dir=out_dir, progress=progress, optimizer=_optimizer(model, p.train))
    return model, trainer.fit(resume=resume)


def _quantized_accuracy(model: MobileNetV2ForImageClassification, p: MobileNetV2Preset,
                        data: dict[str, torch.Tensor]) -> float:
    from paperzoo.papers.mobilenetv2.deploy import quantize_int8

    calib = normalize(data["train_images"][: p.quant_calibration])
    q = quantize_int8(model, calib.split(64))
    return evaluate(q, data["test_images"], data["test_labels"], p.eval_batch)["accuracy"]


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: MobileNetV2Preset) -> dict[str, Any]:
    """Train ``job.variant`` with ``job.seed`` in ``out``; the ``linear`` models are also quantized to int8, and
    seed 0's is saved to ``<run>/model`` (``deploy.from_pretrained`` reads it)."""
    from paperzoo.papers.mobilenetv2.deploy import save_pretrained

    data = load_data(p.train_subset, p.test_subset)
    model, summary = train_variant(p, job.variant, job.seed, data, out, resume=resume, progress=progress)
    rec = {"accuracy": summary["eval"]["accuracy"], "test_loss": summary["eval"]["loss"],
           "train_loss": summary["loss"], "wall_time_s": summary["wall_time_s"]}
    if job.variant == "linear":
        rec["int8_accuracy"] = _quantized_accuracy(model.to(memory_format=torch.contiguous_format), p, data)
        if job.seed == 0:
            save_pretrained(model, out.parent.parent / "model")
    return rec


def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1,
        precision: str | None = None) -> Path:
    """Train every variant for every seed, judge both claims, write ``report.md``; returns the run folder."""
    from paperzoo.report import compare, plot_bars_with_ci, write_result

    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, precision=precision)
    jobs = [Job(v, s, p.model_config(v)) for s in range(p.seeds) for v in VARIANTS]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress, args=(p,))
    acc = {v: res.values(v, "accuracy") for v in VARIANTS}
    int8 = res.values("linear", "int8_accuracy")
    claim1 = Beats().judge(acc["linear"], acc["relu6_projection"], "the linear bottleneck", "ReLU6 after it")
    claim2 = all_of(Beats().judge(acc["linear"], acc["shortcut_expansion"], "shortcuts between bottlenecks",
                                  "shortcuts between expansions"),
                    Beats().judge(acc["linear"], acc["shortcut_none"], "shortcuts between bottlenecks",
                                  "no shortcuts"))
    details = {"claim 1 (linear bottleneck vs ReLU6 after the projection)": str(claim1),
               "claim 2 (shortcuts between bottlenecks vs between expansions, vs none)": str(claim2),
               **{f"expansion t=6 vs t={t[1:]} (no claim)": str(compare(acc["linear"], acc[t])) for t in ("t2", "t1")},
               "int8 post-training quantization: accuracy drop (fp32 - int8), per seed":
                   [a - q for a, q in zip(acc["linear"], int8, strict=True)]}
    plot = plot_bars_with_ci(acc, run_dir / "accuracy.png", ylabel="test accuracy",
                             title=f"MobileNetV2 ablations, CIFAR-10 (JPEG), preset {name}")
    data = load_data(p.train_subset, p.test_subset)
    notes = (f"Preset {name}: {p.train.steps} steps of batch {p.train.batch_size} on {len(data['train_labels'])} "
             f"training images, tested on {len(data['test_labels'])}; {p.seeds} seed(s). The overall verdict is "
             "'reproduced' only if both claims are.")
    write_result(run_dir, PAPER, CLAIM, {**{f"accuracy {v}": a for v, a in acc.items()}, "accuracy linear int8": int8},
                 smoke(all_of(claim1, claim2), name), details=details, notes=notes, plots=[plot])
    return run_dir
