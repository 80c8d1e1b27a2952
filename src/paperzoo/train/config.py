"""TrainConfig: every knob of the training loop, validated on construction."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .precision import PRECISIONS

SCHEDULES = ("cosine", "linear", "constant")


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of one training run.

    ``batch_size`` is the GLOBAL number of samples per optimizer step: it is split into ``grad_accum``
    micro-batches and, under DDP, across ``world_size`` ranks, so it must be divisible by
    ``grad_accum * world_size``. Changing ``grad_accum`` or the number of ranks does not change the
    update (up to float rounding).

    ``eval_every`` / ``ckpt_every`` of ``None`` or 0 turn the periodic event off (evaluation and a
    checkpoint still happen at the end). ``grad_clip=None`` turns clipping off.
    ``device`` is "auto" (cuda when available), "cpu", "cuda" or "cuda:N".
    ``precision`` "fp32", "bf16" (``loss_fn`` and ``eval_fn`` under bf16 autocast; weights and optimizer state
    stay fp32) or "auto" (bf16 where the device computes it fast, fp32 elsewhere: see :mod:`.precision`).
    ``compile``: ``loss_fn`` gets ``torch.compile(model)`` (inductor; the first steps pay the compilation, and a
    model with graph breaks compiles in pieces); checkpoints hold the plain module's state either way.
    """

    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = 0
    schedule: str = "cosine"
    min_lr_ratio: float = 0.0
    grad_clip: float | None = 1.0
    grad_accum: int = 1
    eval_every: int | None = 200
    ckpt_every: int | None = 200
    keep_last: int = 2
    log_every: int = 10
    seed: int = 0
    drop_last: bool = True
    device: str = "auto"
    precision: str = "fp32"
    compile: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))
        _int(self, "steps", 1)
        _int(self, "batch_size", 1)
        _num(self, "lr", lo=0.0, lo_open=True)
        _num(self, "weight_decay", lo=0.0)
        if len(self.betas) != 2 or not all(_is_num(b) and 0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"TrainConfig.betas: expected two floats in [0, 1), got {self.betas!r}")
        _num(self, "eps", lo=0.0, lo_open=True)
        _int(self, "warmup_steps", 0)
        if self.warmup_steps > self.steps:
            raise ValueError(f"TrainConfig.warmup_steps: expected <= steps={self.steps}, got {self.warmup_steps}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"TrainConfig.schedule: expected one of {SCHEDULES}, got {self.schedule!r}")
        _num(self, "min_lr_ratio", lo=0.0, hi=1.0)
        if self.grad_clip is not None:
            _num(self, "grad_clip", lo=0.0, lo_open=True)
        _int(self, "grad_accum", 1)
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"TrainConfig.batch_size: expected a multiple of grad_accum={self.grad_accum}, got {self.batch_size}"
            )
        for name in ("eval_every", "ckpt_every"):
            if getattr(self, name) is not None:
                _int(self, name, 0)
        _int(self, "keep_last", 1)
        _int(self, "log_every", 1)
        _int(self, "seed", None)
        if not isinstance(self.drop_last, bool):
            raise ValueError(f"TrainConfig.drop_last: expected a bool, got {self.drop_last!r}")
        dev = self.device
        if not isinstance(dev, str) or not (
            dev in ("auto", "cpu", "cuda") or (dev.startswith("cuda:") and dev[5:].isdigit())
        ):
            raise ValueError(f"TrainConfig.device: expected 'auto', 'cpu', 'cuda' or 'cuda:N', got {dev!r}")
        if not isinstance(self.compile, bool):
            raise ValueError(f"TrainConfig.compile: expected a bool, got {self.compile!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"TrainConfig.precision: expected one of {PRECISIONS}, got {self.precision!r}")

    def to_dict(self) -> dict:
        """Plain JSON-ready dict of the fields."""
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d


def _is_num(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _int(cfg: TrainConfig, name: str, lo: int | None) -> None:
    v = getattr(cfg, name)
    if not isinstance(v, int) or isinstance(v, bool) or (lo is not None and v < lo):
        want = "an int" if lo is None else f"an int >= {lo}"
        raise ValueError(f"TrainConfig.{name}: expected {want}, got {v!r}")


def _num(cfg: TrainConfig, name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> None:
    v = getattr(cfg, name)
    bad = not _is_num(v) or (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and v > hi)
    if bad:
        rng = f"{'>' if lo_open else '>='} {lo}" if lo is not None else "finite"
        if hi is not None:
            rng += f" and <= {hi}"
        raise ValueError(f"TrainConfig.{name}: expected a number {rng}, got {v!r}")
