"""Run independent training jobs (variants x seeds) in parallel worker processes on one machine.

A recipe's runs are independent, and on a small CPU several single-threaded processes get more work done
than one process with several threads (small convolutions and GEMMs scale badly across cores). Each worker
is a fresh ``spawn`` process limited to ``cores // workers`` torch threads; every job must be a picklable
top-level function that writes its own results (so an interrupted pool resumes job by job).

    results = run_jobs(train_one, [(variant, seed) for ...], workers=2)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import torch


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int = 1, label: Callable[[tuple], str] = str
             ) -> list[Any]:
    """``[fn(*job) for job in jobs]``, computed by ``workers`` processes; results in job order.

    ``workers=1`` runs in this process (no pickling, progress bars intact). With more, each finished job
    prints one line to stderr; the first exception cancels the jobs not yet started and is re-raised.
    """
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if workers == 1 or len(jobs) <= 1:
        return [fn(*job) for job in jobs]
    workers = min(workers, len(jobs))
    threads = max(1, (os.cpu_count() or 1) // workers)
    results: list[Any] = [None] * len(jobs)
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                             initargs=(threads,)) as pool:
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        try:
            for done, fut in enumerate(as_completed(futures), 1):
                i = futures[fut]
                results[i] = fut.result()
                print(f"[{done}/{len(jobs)}] finished {label(jobs[i])}", file=sys.stderr, flush=True)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    return results
