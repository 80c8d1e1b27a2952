"""Interleaved timing: run ours and the peer alternately (ABAB...) in one process, each call synchronised."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


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
