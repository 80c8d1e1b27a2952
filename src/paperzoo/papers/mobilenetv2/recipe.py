"""``paperzoo reproduce mobilenetv2``: the paper's ablations (Fig. 6) on CIFAR-10 (JPEG), several seeds each.

Claims judged (Sandler et al., 2018, Sec. 6.4 and Fig. 6):

1. *Linear bottlenecks*: removing the activation after the 1x1 projection is better than ReLU6 there.
   Compared: ``linear`` (the paper's block) vs ``relu6_projection``.
2. *Shortcuts between bottlenecks*: better than shortcuts between the expanded layers and than none.
   Compared: ``linear`` vs ``shortcut_expansion`` and vs ``shortcut_none``.

Also measured (no verdict; the paper fixes t = 6 and only remarks that smaller networks prefer smaller t):
the expansion factor t in {1, 2, 6} (``t1``, ``t2``, ``linear``), and the int8 post-training quantization
accuracy drop of the ``linear`` models.

Setup: the small-input variant (stem stride 1, so 32x32 images end at 2x2), symmetric padding, random crop
(4-pixel zero pad) and horizontal flip, SGD with Nesterov momentum 0.9 and a cosine schedule with warmup,
weight decay 4e-5 (the paper's) on conv/linear weights, cross-entropy. The paper trained on ImageNet with
RMSProp; see README.md for every difference. A verdict is "reproduced" when the 95% Welch interval of the
accuracy difference lies above 0, "not reproduced" when below, else "inconclusive"; claim 2 needs both of
its comparisons.

Presets: ``tiny`` (a smoke test: tiny network, 1k images, a few dozen steps; the report's verdicts mean
nothing), ``small`` (the reproduction: width 0.5, 20k training images, 10 epochs, 3 seeds), ``full``
(width 1.0, all 50k images, 30 epochs; for a bigger machine).
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from paperzoo.papers.mobilenetv2.model import MobileNetV2Config, MobileNetV2ForImageClassification
from paperzoo.train.parallel import run_jobs

PAPER = "mobilenetv2"
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)

# variant name -> MobileNetV2Config overrides
VARIANTS: dict[str, dict[str, Any]] = {
    "linear": {},  # the paper's network: linear bottleneck, shortcuts between bottlenecks, t = 6
    "relu6_projection": {"linear_bottleneck": False},
    "shortcut_expansion": {"shortcut": "expansion"},
    "shortcut_none": {"shortcut": "none"},
    "t2": {"expand_ratio": 2},
    "t1": {"expand_ratio": 1},
}


@dataclass(frozen=True)
class RecipeConfig:
    """One preset of the recipe. ``epochs`` is over ``train_subset`` images (all 50k when None)."""

    preset: str
    model_preset: str
    width: float
    train_subset: int | None
    test_subset: int | None
    epochs: float
    batch_size: int
    lr: float
    weight_decay: float
    warmup_epochs: float
    seeds: int
    variants: tuple[str, ...] = tuple(VARIANTS)
    augment: bool = True
    quant_calibration: int = 512
    eval_batch: int = 500

    @property
    def steps(self) -> int:
        """Optimizer steps per run on CIFAR-10 (``train_variant`` counts from the data it is given)."""
        n = self.train_subset or 50_000
        return max(1, math.ceil(self.epochs * n / self.batch_size))

    def model_config(self, variant: str) -> MobileNetV2Config:
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(VARIANTS)}")
        return MobileNetV2Config.preset(self.model_preset, width_multiplier=self.width, **VARIANTS[variant])


PRESETS: dict[str, RecipeConfig] = {
    "tiny": RecipeConfig("tiny", "tiny", 1.0, train_subset=1024, test_subset=512, epochs=2, batch_size=64,
                         lr=0.05, weight_decay=4e-5, warmup_epochs=0.25, seeds=1, quant_calibration=128),
    "small": RecipeConfig("small", "small", 0.5, train_subset=20_000, test_subset=None, epochs=10, batch_size=128,
                          lr=0.1, weight_decay=4e-5, warmup_epochs=0.5, seeds=3),
    "full": RecipeConfig("full", "cifar", 1.0, train_subset=None, test_subset=None, epochs=30, batch_size=128,
                         lr=0.1, weight_decay=4e-5, warmup_epochs=1, seeds=3),
}


def normalize(images: torch.Tensor) -> torch.Tensor:
    """uint8 ``(B, 3, H, W)`` -> float, scaled to [0, 1] and standardised with CIFAR-10's channel statistics.

    Returned in ``channels_last`` memory format: with the model in that format too, the depthwise convolutions
    train about 1.8x faster on CPU (same values; only the strides differ).
    """
    x = images.float().div_(255)
    mean = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous(memory_format=torch.channels_last)


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


def _optimizer(model: torch.nn.Module, cfg: RecipeConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() > 1 else no_decay).append(p)  # BN and biases are not decayed
    return torch.optim.SGD([{"params": decay, "weight_decay": cfg.weight_decay},
                            {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, momentum=0.9, nesterov=True)


def train_variant(cfg: RecipeConfig, variant: str, seed: int, data: dict[str, torch.Tensor], out_dir: Path | None,
                  resume: bool = False, progress: bool = True) -> tuple[MobileNetV2ForImageClassification, dict]:
    """Train one ``variant`` with ``seed``; returns the model and the Trainer summary (with the final eval)."""
    from paperzoo.train import TrainConfig, Trainer, seed_everything

    seed_everything(seed)
    model = MobileNetV2ForImageClassification(cfg.model_config(variant)).to(memory_format=torch.channels_last)
    n_train = len(data["train_labels"])
    steps = max(1, math.ceil(cfg.epochs * n_train / cfg.batch_size))
    tcfg = TrainConfig(steps=steps, batch_size=cfg.batch_size, lr=cfg.lr, weight_decay=cfg.weight_decay,
                       warmup_steps=min(steps, int(cfg.warmup_epochs * n_train / cfg.batch_size)), schedule="cosine",
                       grad_clip=None, eval_every=max(1, steps // 5), ckpt_every=max(1, min(200, steps // 5)),
                       log_every=max(1, min(20, steps // 10)), seed=seed, device="cpu")
    train_set = TensorDataset(data["train_images"], data["train_labels"])
    trainer = Trainer(model, tcfg, train_set, loss_fn_for(cfg.augment),
                      eval_fn=lambda m: evaluate(m, data["test_images"], data["test_labels"], cfg.eval_batch),
                      out_dir=out_dir, progress=progress, optimizer=_optimizer(model, cfg))
    summary = trainer.fit(resume=resume)
    return model, summary


def _quantized_accuracy(model: MobileNetV2ForImageClassification, cfg: RecipeConfig,
                        data: dict[str, torch.Tensor]) -> float:
    from paperzoo.papers.mobilenetv2.deploy import quantize_int8

    calib = normalize(data["train_images"][: cfg.quant_calibration])
    q = quantize_int8(model, calib.split(64))
    return evaluate(q, data["test_images"], data["test_labels"], cfg.eval_batch)["accuracy"]


def _verdict(comparisons: list[Any]) -> str:
    verdicts = [c.verdict for c in comparisons]
    if all(v == "reproduced" for v in verdicts):
        return "reproduced"
    if any(v == "not reproduced" for v in verdicts):
        return "not reproduced"
    return "inconclusive"


def _train_and_record(cfg: RecipeConfig, variant: str, seed: int, run_dir: Path, resume: bool, progress: bool,
                      data: dict[str, torch.Tensor] | None) -> dict[str, Any]:
    """Train one (variant, seed) into ``run_dir/<variant>/seed<k>`` and return its record (read back if done)."""
    from paperzoo.papers.mobilenetv2.deploy import save_pretrained

    folder = run_dir / variant / f"seed{seed}"
    final = folder / "final.json"
    if resume and final.is_file():
        return json.loads(final.read_text())
    data = data if data is not None else load_data(cfg.train_subset, cfg.test_subset)
    model, summary = train_variant(cfg, variant, seed, data, folder, resume=resume, progress=progress)
    rec = {"variant": variant, "seed": seed, "accuracy": summary["eval"]["accuracy"],
           "test_loss": summary["eval"]["loss"], "train_loss": summary["loss"], "wall_time_s": summary["wall_time_s"]}
    if variant == "linear":
        rec["int8_accuracy"] = _quantized_accuracy(model.to(memory_format=torch.contiguous_format), cfg, data)
        if seed == 0:
            save_pretrained(model, run_dir / "model")
    final.write_text(json.dumps(rec, indent=2))
    return rec


def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, data: dict[str, torch.Tensor] | None = None, workers: int = 1) -> Path:
    """Train every variant for every seed, then write ``report.md`` with CIs and verdicts; returns the run folder.

    Each (variant, seed) trains in ``<run>/<variant>/seed<k>/`` with checkpoints; with ``resume=True`` finished
    ones are read back from their ``final.json`` and unfinished ones continue from their last checkpoint.
    ``data`` (uint8 train/test tensors as from :func:`load_data`) replaces CIFAR-10, for tests. ``workers > 1``
    trains that many (variant, seed) jobs at once in separate processes (see :mod:`paperzoo.train.parallel`).
    """
    from paperzoo.report import compare, new_run_dir, pick_preset, plot_bars_with_ci, write_config, write_result

    preset, cfg = pick_preset(PRESETS, preset, "small", "mobilenetv2")
    if seeds is not None:
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
        cfg = replace(cfg, seeds=seeds)
    run_dir = new_run_dir(PAPER, out)
    write_config(run_dir, {**asdict(cfg), "steps": cfg.steps,
                           "model_configs": {v: asdict(cfg.model_config(v)) for v in cfg.variants}},
                 seeds=list(range(cfg.seeds)))
    given_data = data is not None
    data = data if given_data else load_data(cfg.train_subset, cfg.test_subset)
    jobs = [(cfg, variant, seed, run_dir, resume, progress and workers == 1, data if given_data else None)
            for seed in range(cfg.seeds) for variant in cfg.variants]
    t0 = time.time()
    records = run_jobs(_train_and_record, jobs, workers, label=lambda j: f"{j[1]} seed {j[2]}")
    acc: dict[str, list[float]] = {v: [] for v in cfg.variants}
    int8: list[float] = []
    for rec in records:
        acc[rec["variant"]].append(rec["accuracy"])
        if "int8_accuracy" in rec:
            int8.append(rec["int8_accuracy"])
    base = acc["linear"]
    c_linear = compare(base, acc["relu6_projection"]) if "relu6_projection" in acc else None
    c_exp = compare(base, acc["shortcut_expansion"]) if "shortcut_expansion" in acc else None
    c_none = compare(base, acc["shortcut_none"]) if "shortcut_none" in acc else None
    details: dict[str, Any] = {}
    claims = []
    if c_linear is not None:
        details["claim 1 (linear vs ReLU6 after projection)"] = str(c_linear)
        details["claim 1 verdict"] = c_linear.verdict
        claims.append(c_linear)
    claim2 = [c for c in (c_exp, c_none) if c is not None]
    if c_exp is not None:
        details["claim 2a (shortcut between bottlenecks vs between expansions)"] = str(c_exp)
    if c_none is not None:
        details["claim 2b (shortcut between bottlenecks vs none)"] = str(c_none)
    if claim2:
        details["claim 2 verdict"] = _verdict(claim2)
    for t in ("t2", "t1"):
        if t in acc:
            details[f"expansion t=6 vs {t.replace('t', 't=')} (no claim)"] = str(compare(base, acc[t]))
    if int8:
        drop = [a - q for a, q in zip(base, int8, strict=True)]
        details["int8 post-training quantization: accuracy drop (fp32 - int8), per seed"] = drop
    verdicts = [details.get("claim 1 verdict"), details.get("claim 2 verdict")]
    verdicts = [v for v in verdicts if v is not None]
    overall = ("reproduced" if verdicts and all(v == "reproduced" for v in verdicts)
               else "not reproduced" if "not reproduced" in verdicts else "inconclusive")
    measurements = {f"accuracy {v}": acc[v] for v in cfg.variants}
    if int8:
        measurements["accuracy linear int8"] = int8
    plot = plot_bars_with_ci({v: acc[v] for v in cfg.variants}, run_dir / "accuracy.png",
                             title=f"MobileNetV2 ablations, CIFAR-10 (JPEG), preset {preset}", ylabel="test accuracy")
    steps = max(1, math.ceil(cfg.epochs * len(data["train_labels"]) / cfg.batch_size))
    notes = (f"Preset {preset}: {steps} steps of batch {cfg.batch_size} on "
             f"{len(data['train_labels'])} training images, tested on {len(data['test_labels'])}; "
             f"{cfg.seeds} seed(s); wall time {time.time() - t0:.0f} s. Verdict per claim in the details; "
             "the overall verdict is 'reproduced' only if both claims are."
             + (" The tiny preset is a smoke test: its verdicts carry no evidence." if preset == "tiny" else ""))
    claim = ("(1) A linear bottleneck beats ReLU6 after the projection; (2) shortcuts between the thin bottlenecks "
             "beat shortcuts between the expanded layers and no shortcuts (MobileNetV2, Fig. 6).")
    write_result(run_dir, PAPER, claim, measurements, overall, details=details, notes=notes, plots=[plot])
    return run_dir
