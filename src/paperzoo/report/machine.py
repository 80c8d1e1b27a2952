"""A description of the machine a run or benchmark ran on: CPU model, cores, torch version and threads."""

from __future__ import annotations

import os
import platform
import sys
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (or :func:`platform.processor` elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> list[str]:
    """The SIMD extensions that matter for matmul speed (avx2, avx512f, amx_tile, fma), as listed by the kernel."""
    want = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [w for w in want if w in have]
    except OSError:
        pass
    return []


def machine_info() -> dict[str, Any]:
    """Platform, Python, CPU model and flags, logical cores (and those usable by this process), torch and threads."""
    import torch

    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    return info
