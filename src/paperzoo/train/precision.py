"""Training precision: ``fp32``, ``bf16`` (autocast mixed precision) or ``auto`` (bf16 where it is fast).

bf16 here is *mixed* precision, as HF Trainer's ``bf16=True`` and Lightning's ``"bf16-mixed"``: the master weights,
gradients and optimizer state stay fp32; ``torch.autocast`` runs matmuls and convolutions in bf16 and keeps
reductions, softmax, norms and losses in fp32 (models keep their own fragile spots in fp32 on top, e.g. Switch's
router). ``auto`` asks whether bf16 is *fast* on the device, not merely possible: on a CPU without AVX512_BF16 or
AMX, bf16 matmuls are emulated and slower than fp32, so ``auto`` stays fp32 there.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

PRECISIONS = ("fp32", "bf16", "auto")


@dataclass(frozen=True)
class Precision:
    """What a run computes in (``"fp32"`` or ``"bf16"``), what was asked for, and why the two relate as they do."""

    used: str
    requested: str
    reason: str

    def autocast(self, device: torch.device | str):
        """The context to run a forward (and its loss) in: bf16 autocast, or nothing for fp32."""
        if self.used == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)

    def to_dict(self) -> dict[str, str]:
        return {"used": self.used, "requested": self.requested, "reason": self.reason}


def cpu_bf16_units() -> list[str]:
    """The CPU's bf16 matmul units that make bf16 faster than fp32: ``avx512_bf16`` and/or ``amx_bf16``."""
    found = []
    cpu = getattr(torch, "cpu", None)
    if cpu is not None and getattr(cpu, "_is_avx512_bf16_supported", None) is not None:
        if cpu._is_avx512_bf16_supported():
            found.append("avx512_bf16")
        if cpu._is_amx_tile_supported():
            found.append("amx_bf16")
        return found
    try:  # older torch: the kernel's flags
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    return [u for u in ("avx512_bf16", "amx_bf16") if u in flags]


def resolve_precision(requested: str, device: torch.device | str) -> Precision:
    """``requested`` ("fp32", "bf16" or "auto") on ``device`` -> the :class:`Precision` a run uses, with its reason.

    ``auto`` picks bf16 on a CUDA device that supports it and on a CPU with bf16 matmul units, fp32 elsewhere.
    An explicit ``bf16`` is honoured where the device can compute it at all (a warning-free slow path on a CPU
    without the units), and refused on a GPU that has no bf16.
    """
    if requested not in PRECISIONS:
        raise ValueError(f"precision: expected one of {PRECISIONS}, got {requested!r}")
    device = torch.device(device)
    if device.type == "cuda":
        has = torch.cuda.is_bf16_supported()
        where = f"CUDA device {torch.cuda.get_device_name(device)}"
        if requested == "bf16" and not has:
            raise ValueError(f"precision='bf16': {where} has no bf16 support; use 'fp32' or 'auto'")
        if requested == "auto":
            return Precision("bf16" if has else "fp32", "auto",
                             f"{where} {'supports' if has else 'does not support'} bf16")
        return Precision(requested, requested, "asked for")
    units = cpu_bf16_units()
    if requested == "auto":
        if units:
            return Precision("bf16", "auto", f"this CPU has {' and '.join(units)} (bf16 matmuls faster than fp32)")
        return Precision("fp32", "auto", "this CPU has no avx512_bf16 or amx_bf16: bf16 would be emulated, "
                                         "slower than fp32")
    if requested == "bf16" and not units:
        return Precision("bf16", "bf16", "asked for (this CPU has no bf16 units: expect it slower than fp32)")
    return Precision(requested, requested, "asked for")
