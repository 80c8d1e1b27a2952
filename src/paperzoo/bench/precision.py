"""The precision axis of every bench: fp32 rows, then bf16 rows where this machine computes bf16 fast.

:func:`paperzoo.bench.run_bench` calls a bench function once per precision of :func:`passes`, inside
:func:`using`. A bench honours the precision of its pass with three things from this module and nothing else:

* each forward (and its loss) runs under :func:`autocast` (bf16 autocast in a bf16 pass, nothing in fp32);
  backward runs outside it, as in the training engine;
* it times with :func:`time_interleaved`, which in a bf16 pass also times our side in fp32 in the same rounds
  (``"<ours> @fp32"``: ours bf16, the peer under the same autocast and ours fp32, interleaved);
* FLOP rates are against :func:`peak_gflops`, the matmul peak measured in the pass's precision.

The runner tags every row with its precision (``precision`` in the JSON and in the case text) and records per
precision the peak and why bf16 ran or was skipped (the project's detection, :func:`paperzoo.train.precision.
resolve_precision`: AVX512_BF16 or AMX on a CPU, bf16 support on CUDA; never assumed). A bench that cannot run in
bf16 calls :func:`fp32_only` with the reason, which the runner records instead of rows. Called outside a runner
pass (tests), everything is fp32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import torch

from paperzoo import measure
from paperzoo.train.precision import Precision, resolve_precision

__all__ = ["BENCH_PRECISIONS", "FP32", "FP32_REF", "PrecisionSkipped", "autocast", "current", "dtype", "fp32_only",
           "passes", "peak_gflops", "time_interleaved", "using"]

BENCH_PRECISIONS = ("fp32", "bf16")
FP32 = Precision("fp32", "fp32", "the reference precision of every bench")
FP32_REF = " @fp32"  # suffix of the stats key of a side re-timed in fp32 during a bf16 pass
_CURRENT: ContextVar[Precision] = ContextVar("paperzoo_bench_precision", default=FP32)


class PrecisionSkipped(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by a bench (through :func:`fp32_only`) that has no rows in the current precision; args[0]: why."""


def current() -> Precision:
    """The precision of the running pass (fp32 outside one)."""
    return _CURRENT.get()


def dtype() -> torch.dtype:
    """The matmul dtype of the running pass."""
    return torch.bfloat16 if current().used == "bf16" else torch.float32


@contextlib.contextmanager
def using(precision: Precision) -> Iterator[Precision]:
    """Run the body as a pass in ``precision`` (``used`` "fp32" or "bf16")."""
    if not isinstance(precision, Precision) or precision.used not in BENCH_PRECISIONS:
        raise ValueError(f"precision must be a Precision with used in {BENCH_PRECISIONS}, got {precision!r}")
    token = _CURRENT.set(precision)
    try:
        yield precision
    finally:
        _CURRENT.reset(token)


def autocast(device: str | torch.device = "cpu"):
    """The context for a forward (and its loss) in the running pass's precision: bf16 autocast or nothing."""
    return current().autocast(device)


def peak_gflops(device: str | torch.device = "cpu") -> float:
    """The measured matmul peak of the running pass's precision at the current thread count (cached per process)."""
    return measure.machine_peak_gflops(dtype(), device)


def fp32_only(reason: str) -> None:
    """Declare that this bench has no bf16 rows, and why: raises :class:`PrecisionSkipped` in a bf16 pass."""
    if current().used != "fp32":
        raise PrecisionSkipped(reason)


def passes(requested: str = "all", device: str | torch.device = "cpu") -> list[tuple[str, Precision | None, str]]:
    """``(name, precision or None, reason)`` per pass: ``requested`` is "fp32", "bf16" or "all" (both).

    bf16 runs only where the device computes it fast (``resolve_precision("auto", device)`` picks bf16);
    elsewhere its precision is None and the reason says why it is skipped.
    """
    if requested not in ("all", *BENCH_PRECISIONS):
        raise ValueError(f"precision: expected 'all', 'fp32' or 'bf16', got {requested!r}")
    out: list[tuple[str, Precision | None, str]] = []
    if requested in ("all", "fp32"):
        out.append(("fp32", FP32, FP32.reason))
    if requested in ("all", "bf16"):
        auto = resolve_precision("auto", device)
        if auto.used == "bf16":
            out.append(("bf16", Precision("bf16", "bf16", auto.reason), auto.reason))
        else:
            out.append(("bf16", None, f"bf16 rows skipped: {auto.reason}"))
    return out


def time_interleaved(fns: Mapping[str, Callable[[], Any]], *args: Any, fp32_ref: str | tuple[str, ...] | None = None,
                     **kwargs: Any) -> dict[str, measure.Stats]:
    """:func:`paperzoo.measure.time_interleaved`; in a bf16 pass, ``fns[k]`` for each ``k`` of ``fp32_ref`` (a name or
    names; default: the first entry, ours) is also timed with the pass switched to fp32, in the same rounds, under
    the key ``k + " @fp32"``.

    A re-timed function must read the precision when called (its forward under :func:`autocast`)."""
    if current().used == "fp32":
        return measure.time_interleaved(fns, *args, **kwargs)
    refs = (fp32_ref,) if isinstance(fp32_ref, str) else fp32_ref if fp32_ref is not None else (next(iter(fns)),)
    bad = [k for k in refs if k not in fns]
    if bad:
        raise ValueError(f"fp32_ref must name entries of {list(fns)}, got {bad}")

    def in_fp32(f):
        def g():
            token = _CURRENT.set(FP32)
            try:
                return f()
            finally:
                _CURRENT.reset(token)
        return g

    return measure.time_interleaved({**fns, **{k + FP32_REF: in_fp32(fns[k]) for k in refs}}, *args, **kwargs)
