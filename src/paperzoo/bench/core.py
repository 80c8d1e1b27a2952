"""Core benches that belong to no paper."""

from __future__ import annotations

import os
from typing import Any

import torch

from paperzoo.bench.results import BenchResult
from paperzoo.measure import best_matmul

PEAK_SIZES = (1024, 1536, 2048)


def _all_threads() -> int:
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    return max(usable, torch.get_num_threads())


def peak(sizes: tuple[int, ...] = PEAK_SIZES, repeats: int = 3) -> tuple[list[BenchResult], dict[str, Any]]:
    """Square matmul GFLOP/s in the pass's precision (fp32, or bf16: see :mod:`paperzoo.bench.precision`) at
    1 thread and at all threads, per size; no peer (ratio n/a).

    The meta's ``peak_gflops`` is the best figure of all rows (normally all threads, largest size) and each
    row's fraction of peak is relative to it; ``peak_gflops_by_threads`` has the best per thread count.
    """
    from paperzoo.bench import precision

    dtype, used = precision.dtype(), precision.current().used
    threads = sorted({1, _all_threads()})
    measured = {t: best_matmul(sizes, dtype, threads=t, repeats=repeats) for t in threads}
    best = {t: max(g for _, _, g in m) for t, m in measured.items()}
    top = max(best.values())
    rows = [BenchResult("peak", f"{used} matmul {n}x{n}, {t} thread{'s' if t > 1 else ''}", secs * 1e3,
                        flops=2 * n**3, peak_gflops=top, extra={"threads": t, "n": n})
            for t, m in measured.items() for n, secs, _ in m]
    meta = {"peak_gflops": top, "peak_gflops_by_threads": {str(t): g for t, g in best.items()},
            "sizes": list(sizes), "repeats": repeats,
            "notes": "Best of the repeats per size; the machine is shared, so the load average above matters."}
    return rows, meta
