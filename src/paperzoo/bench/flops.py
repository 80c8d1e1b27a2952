"""FLOP counting with ``torch.utils.flop_counter`` and this machine's measured matmul peak."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

_PEAK_CACHE: dict[tuple[int, str, str], float] = {}


def count_flops(fn: Callable[[], Any]) -> int:
    """FLOPs of everything ``fn()`` runs (forward, or forward and backward if ``fn`` calls ``backward``).

    Counted by :class:`torch.utils.flop_counter.FlopCounterMode`: a ``(m, k) @ (k, n)`` matmul is ``2*m*n*k``;
    ops without a registered formula (elementwise, norms, softmax) count zero.
    """
    from torch.utils.flop_counter import FlopCounterMode

    if not callable(fn):
        raise ValueError(f"count_flops expects a zero-argument callable, got {type(fn).__name__}")
    mode = FlopCounterMode(display=False)
    with mode:
        fn()
    return int(mode.get_total_flops())


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_matmul(sizes: Sequence[int] = (1024, 1536, 2048), dtype: torch.dtype = torch.float32,
                threads: int | None = None, repeats: int = 3, device: str | torch.device = "cpu",
                ) -> list[tuple[int, float, float]]:
    """For each square size ``n``: ``(n, best seconds per matmul, GFLOP/s)`` over ``repeats`` timed calls."""
    if isinstance(sizes, int):
        sizes = (sizes,)
    if not sizes or not all(isinstance(n, int) and n > 0 for n in sizes):
        raise ValueError(f"n must be a positive int or a sequence of them (e.g. (1024, 2048)), got {sizes!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype such as torch.float32, got {dtype!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be None or an int >= 1, got {threads!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    device = torch.device(device)
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    out: list[tuple[int, float, float]] = []
    try:
        with torch.inference_mode():
            gen = torch.Generator(device="cpu").manual_seed(0)
            for n in sizes:
                a = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
                b = torch.randn(n, n, generator=gen).to(device=device, dtype=dtype)
                c = torch.empty(n, n, device=device, dtype=dtype)
                torch.mm(a, b, out=c)
                _sync(device)
                best = float("inf")
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    torch.mm(a, b, out=c)
                    _sync(device)
                    best = min(best, time.perf_counter() - t0)
                out.append((n, best, 2.0 * n**3 / best / 1e9))
    finally:
        torch.set_num_threads(old)
    return out


def matmul_peak_gflops(n: int | Sequence[int] = (1024, 1536, 2048), dtype: torch.dtype = torch.float32,
                       threads: int | None = None, repeats: int = 3, device: str | torch.device = "cpu") -> float:
    """This machine's matmul peak in GFLOP/s: the best of ``repeats`` square ``n x n`` matmuls per size.

    ``threads`` temporarily sets ``torch.set_num_threads`` (default: the current setting). About 140 GFLOP/s
    in fp32 with 2 threads on a quiet 2-core AVX2 machine of the kind this project runs on.
    """
    return max(g for _, _, g in best_matmul(n, dtype, threads, repeats, device))


def machine_peak_gflops(dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> float:
    """:func:`matmul_peak_gflops` at the current thread count, measured once per process and cached."""
    key = (torch.get_num_threads(), str(dtype), str(torch.device(device)))
    if key not in _PEAK_CACHE:
        _PEAK_CACHE[key] = matmul_peak_gflops(dtype=dtype, device=device)
    return _PEAK_CACHE[key]
