"""Measurement, below the papers: FLOP counts, the machine's matmul peak, interleaved timing, activation bytes and
log-log slopes. Papers, recipes and benchmarks all measure through this module; it imports only torch and numpy.

    flops = count_flops(lambda: model(x).sum().backward())
    stats = time_interleaved({"ours": lambda: ours(x), "peer": lambda: peer(x)})
    slope = loglog_slope(sizes, seconds)        # cost ~ size ** slope
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

_PEAK_CACHE: dict[tuple[int, str, str], float] = {}


def count_flops(fn: Callable[[], Any]) -> int:
    """FLOPs of everything ``fn()`` runs (forward, or forward and backward if ``fn`` calls ``backward``).

    Counted by :class:`torch.utils.flop_counter.FlopCounterMode`: a ``(m, k) @ (k, n)`` matmul is ``2*m*n*k``;
    ops without a registered formula (elementwise, norms, softmax) count zero. ``scaled_dot_product_attention``
    counts its two matmuls (and their backward) on every backend, the CPU's fused kernel included, which torch's
    registry misses (it counts that kernel as zero). A grouped convolution's weight gradient counts ``1/groups`` of
    torch's figure, which treats it as ungrouped (a depthwise 3 x 3 layer's backward counted ``channels`` times
    too many: 93 GFLOP instead of the forward's ~2x for a MobileNetV2 step). Only the total is kept, so modules are
    not tracked: torch's module tracker breaks ``torch.autograd.grad`` on leaf inputs (pytorch/pytorch#131753; e.g.
    Captum's integrated gradients).
    """
    from torch.utils.flop_counter import FlopCounterMode

    if not callable(fn):
        raise ValueError(f"count_flops expects a zero-argument callable, got {type(fn).__name__}")
    mode = FlopCounterMode(display=False, custom_mapping={**_cpu_sdpa_formulas(), **_conv_formulas()})
    mode.mod_tracker = _GlobalOnly()  # every count goes to "Global", no module hooks
    with mode:
        fn()
    return int(mode.get_total_flops())


class _GlobalOnly:
    """Stands in for FlopCounterMode's module tracker: one parent, "Global", and no hooks."""

    parents = frozenset({"Global"})

    def __enter__(self):
        return self

    def __exit__(self, *args):
        return None


def _cpu_sdpa_formulas() -> dict:
    """FLOP formulas for the CPU's fused attention kernels: the same count as the math path's two batched matmuls."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten
    formulas = {}
    fwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    bwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if fwd is not None:
        formulas[fwd] = lambda q, k, v, *args, out_shape=None, **kw: sdpa_flop_count(q, k, v)
    if bwd is not None:
        formulas[bwd] = lambda g, q, k, v, *args, out_shape=None, **kw: sdpa_backward_flop_count(g, q, k, v)
    return formulas


def _conv_formulas() -> dict:
    """convolution_backward with the weight gradient's count divided by ``groups``: torch's formula computes it as
    one convolution of the (channel-transposed) input with the output gradient over all channel pairs, ignoring
    groups; the input gradient's count already uses the per-group weight shape."""
    from torch.utils.flop_counter import conv_backward_flop

    raw = getattr(conv_backward_flop, "__wrapped__", conv_backward_flop)  # takes shapes, as ``backward`` gets them

    def backward(grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups, output_mask,
                 out_shape=None, **kw):
        args = (grad_out, x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
        grad_input = raw(*args, [output_mask[0], False, False], out_shape=out_shape)
        grad_weight = raw(*args, [False, output_mask[1], False], out_shape=out_shape)
        return grad_input + grad_weight // groups

    return {torch.ops.aten.convolution_backward: backward}


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


def memory_bandwidth_gbs(mib: int = 256, repeats: int = 5) -> float:
    """This machine's memory bandwidth in GB/s at the current thread count: the best of ``repeats`` copies of a
    ``mib`` MiB fp32 buffer into another (each copy reads and writes it: 2 x ``mib`` MiB of traffic); measured once
    per process and size, then cached. Far larger than the caches, so it is DRAM's bandwidth."""
    if not isinstance(mib, int) or mib < 1 or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"mib and repeats must be ints >= 1, got mib={mib!r}, repeats={repeats!r}")
    key = (torch.get_num_threads(), f"bandwidth {mib} MiB", "cpu")
    if key not in _PEAK_CACHE:
        n = mib * 2**20 // 4
        a, b = torch.ones(n), torch.empty(n)
        b.copy_(a)  # touch every page first
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            b.copy_(a)
            best = min(best, time.perf_counter() - t0)
        _PEAK_CACHE[key] = 2 * n * 4 / best / 1e9
    return _PEAK_CACHE[key]


@dataclass(frozen=True)
class Stats:
    """Per-call wall times in seconds: ``median``, ``min``, ``max``, ``mean`` over ``n`` timed calls."""

    median: float
    min: float
    max: float
    mean: float
    n: int

    @property
    def median_ms(self) -> float:
        return self.median * 1e3

    @classmethod
    def of(cls, times: list[float]) -> Stats:
        if not times:
            raise ValueError("Stats.of expects at least one time")
        return cls(statistics.median(times), min(times), max(times), math.fsum(times) / len(times), len(times))


def cuda_sync() -> None:
    """``torch.cuda.synchronize()`` when CUDA is in use in this process, else nothing."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def time_interleaved(fns: Mapping[str, Callable[[], Any]], warmup: int = 3, repeats: int = 20,
                     min_time: float | None = None, *, clock: Callable[[], float] = time.perf_counter,
                     sync: Callable[[], None] = cuda_sync, max_repeats: int = 100_000,
                     disable_gc: bool = True) -> dict[str, Stats]:
    """Time each function of ``fns`` by calling them in turn, round after round: A B A B ...

    ``warmup`` untimed rounds come first, then at least ``repeats`` timed rounds, continuing (up to
    ``max_repeats``) until every function has ``min_time`` seconds of timed calls when ``min_time`` is set.
    Each call is timed alone with ``clock`` between two ``sync()`` calls (CUDA synchronisation by
    default), so the alternation cancels slow drifts of the machine (other jobs, thermal state).
    The garbage collector is paused while timing unless ``disable_gc=False``.
    """
    if not isinstance(fns, Mapping) or not fns:
        raise ValueError("fns must be a non-empty dict of name -> zero-argument callable, e.g. {'ours': f, 'peer': g}")
    for k, f in fns.items():
        if not callable(f):
            raise ValueError(f"fns[{k!r}] must be a zero-argument callable, got {type(f).__name__}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if min_time is not None and not min_time >= 0:
        raise ValueError(f"min_time must be None or seconds >= 0, got {min_time!r}")
    names = list(fns)
    for _ in range(warmup):
        for k in names:
            fns[k]()
        sync()
    times: dict[str, list[float]] = {k: [] for k in names}
    gc_was_on = gc.isenabled()
    if disable_gc:
        gc.collect()
        gc.disable()
    try:
        rounds = 0
        while True:
            for k in names:
                sync()
                t0 = clock()
                fns[k]()
                sync()
                times[k].append(clock() - t0)
            rounds += 1
            if rounds >= max_repeats:
                break
            if rounds >= repeats and (min_time is None or min(math.fsum(t) for t in times.values()) >= min_time):
                break
    finally:
        if disable_gc and gc_was_on:
            gc.enable()
    return {k: Stats.of(v) for k, v in times.items()}


def profile_tables(fns: Mapping[str, Callable[[], Any]], label: str, steps: int = 3, row_limit: int = 20) -> str:
    """torch.profiler tables (self CPU time) of ``steps`` calls of each fn after one warm-up call, one per name;
    for finding the hot ops of ours vs a peer. ``label`` describes the case in each table's heading."""
    from torch.profiler import ProfilerActivity, profile

    out = []
    for name, fn in fns.items():
        fn()
        with profile(activities=[ProfilerActivity.CPU]) as p:
            for _ in range(steps):
                fn()
        out.append(f"== {name} ({label}, {steps} calls)\n"
                   + p.key_averages().table(sort_by="self_cpu_time_total", row_limit=row_limit))
    return "\n".join(out)


def activation_bytes(fn: Callable[[], Any]) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn()`` runs (the activation memory of a forward).

    Counted with :func:`torch.autograd.graph.saved_tensors_hooks`; a tensor saved twice counts twice.
    """
    if not callable(fn):
        raise ValueError(f"activation_bytes expects a zero-argument callable, got {type(fn).__name__}")
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``log y`` on ``log x``: the exponent ``s`` of ``y ~ x ** s``."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"loglog_slope expects two equal-length sequences of >= 2 values, got {len(x)} and {len(y)}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("loglog_slope expects positive values (they are logged)")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])
