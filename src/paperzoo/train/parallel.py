"""Run independent training jobs (variants x seeds) in parallel worker processes on one machine.

A recipe's runs are independent, and on a small CPU several single-threaded processes get more work done
than one process with several threads (small convolutions and GEMMs scale badly across cores). Each worker
is a fresh ``spawn`` process limited to ``cores // workers`` torch threads; every job must be a picklable
top-level function that writes its own results (so an interrupted pool resumes job by job).

    results = run_jobs(train_one, [(variant, seed) for ...], workers=2)

Signals: the pool's parent owns SIGINT and SIGTERM (workers are born ignoring them, so a Ctrl-C that reaches the
whole process group, a ``kill`` of the parent alone and a SIGTERM to every process all act once). The first one
asks the running jobs to stop: a :class:`~paperzoo.train.Trainer` in a worker sees :func:`stop_requested`, saves a
checkpoint after its current step and exits; no queued job starts; the parent then exits with
``SystemExit(128 + signum)``. A second signal terminates the workers at once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import torch

from paperzoo.context import hint

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_STOP: Any = None  # in a worker: the pool's shared flag (0 running, > 0 the signal that stops it, -1 no new jobs)
NO_NEW_JOBS = -1


def _init_worker(threads: int, stop: Any) -> None:
    global _STOP
    torch.set_num_threads(threads)
    _STOP = stop
    for sig in _SIGNALS:  # already ignored from birth (see run_jobs); the parent forwards stops through ``stop``
        signal.signal(sig, signal.SIG_IGN)


def in_pool_worker() -> bool:
    """Whether this process is a worker of :func:`run_jobs` (its parent then owns SIGINT/SIGTERM)."""
    return _STOP is not None


def stop_requested() -> int | None:
    """In a pool worker: the signal number after which the pool's parent asked running jobs to stop, else None."""
    if _STOP is None:
        return None
    v = _STOP.value
    return v if v > 0 else None


class _NotStarted:
    """What a queued job returns when the pool stopped before it began."""


def _guarded(fn: Callable[..., Any], job: tuple) -> Any:
    if _STOP is not None and _STOP.value != 0:
        return _NotStarted()
    return fn(*job)


def run_jobs(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int = 1, label: Callable[[tuple], str] = str
             ) -> list[Any]:
    """``[fn(*job) for job in jobs]``, computed by ``workers`` processes; results in job order.

    ``workers=1`` runs in this process (no pickling, progress bars intact). With more, each finished job
    prints one line to stderr; the first exception lets the running jobs finish, starts no other job and is
    re-raised. SIGINT/SIGTERM: see the module docstring.
    """
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    if workers == 1 or len(jobs) <= 1:
        return [fn(*job) for job in jobs]
    workers = min(workers, len(jobs))
    threads = max(1, (os.cpu_count() or 1) // workers)
    ctx = mp.get_context("spawn")
    stop = ctx.Value("i", 0, lock=False)  # one int, written by this process only
    results: list[Any] = [None] * len(jobs)
    stopped: list[int] = []  # jobs that checkpointed and stopped on the signal
    signalled: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if signalled:  # a second signal: stop now
            raise KeyboardInterrupt
        signalled.append(signum)
        stop.value = signum
        print(f"received {signal.Signals(signum).name}: the running jobs save a checkpoint and stop, no other job "
              f"starts (send it again to stop at once)", file=sys.stderr, flush=True)

    # The workers are spawned while SIGINT/SIGTERM are ignored here, so they inherit SIG_IGN (a Ctrl-C during their
    # imports must not kill them); this process's own handler goes in right after, with no gap between.
    main = threading.current_thread() is threading.main_thread()
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _SIGNALS} if main else {}
    try:
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(threads, stop))
        futures = {pool.submit(_guarded, fn, job): i for i, job in enumerate(jobs)}
    except BaseException:
        for sig, h in old.items():
            signal.signal(sig, h)
        raise
    for sig in old:
        signal.signal(sig, on_signal)
    error: BaseException | None = None
    done = 0
    try:
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                r = fut.result()
            except SystemExit as e:  # a Trainer that checkpointed and stopped on the pool's request
                if not signalled:
                    raise
                stopped.append(i)
                print(f"stopped {label(jobs[i])} (exit {e.code})", file=sys.stderr, flush=True)
                continue
            except Exception as e:
                if error is None:
                    error = e
                    if not signalled:
                        stop.value = NO_NEW_JOBS
                    for f in futures:
                        f.cancel()
                continue
            if isinstance(r, _NotStarted):
                continue
            results[i] = r
            done += 1
            print(f"[{done}/{len(jobs)}] finished {label(jobs[i])}", file=sys.stderr, flush=True)
            if signalled:
                for f in futures:
                    f.cancel()
    except BaseException:  # KeyboardInterrupt on a second signal, or an error of our own: stop every worker now
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    pool.shutdown(wait=True, cancel_futures=True)
    if error is not None:
        raise error
    if signalled:
        print(f"stopped by {signal.Signals(signalled[0]).name}: {done} of {len(jobs)} jobs finished, "
              f"{len(stopped)} saved a checkpoint; continue with "
              f"{hint('--resume and the same --out', 'resume=True in the same run folder')}",
              file=sys.stderr, flush=True)
        raise SystemExit(128 + signalled[0])
    return results
