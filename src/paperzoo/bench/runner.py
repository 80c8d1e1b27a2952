"""The bench registry and :func:`run_bench`, behind ``paperzoo bench NAME`` and ``python -m paperzoo.bench NAME``.

Results go to a fresh ``runs/bench/<name>/<stamp>/`` unless ``--commit`` (into ``benchmarks/``) or ``--json PATH``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from paperzoo.bench.results import BenchResult, as_rows, bench_meta, print_table, write_json

# Core benches: name -> "module:function" (or a callable). Papers add theirs through Paper.benches.
BENCHES: dict[str, str | Callable[[], Any]] = {
    "peak": "paperzoo.bench.core:peak",
    "encoder": "paperzoo.bench.encoder:encoder",
    "compile": "paperzoo.bench.compile:run",
}


def all_benches() -> dict[str, str | Callable[[], Any]]:
    """Core benches merged with every registered paper's ``benches`` (a core name wins a clash)."""
    from paperzoo import registry

    merged: dict[str, str | Callable[[], Any]] = {}
    for p in registry.papers():
        for k, v in p.benches.items():
            merged.setdefault(k, v)
    merged.update(BENCHES)
    return merged


def _resolve(target: str | Callable[[], Any]) -> Callable[[], Any]:
    if callable(target):
        return target
    from paperzoo import registry

    return registry.resolve(target)


def _split(out: Any, name: str) -> tuple[list[BenchResult], dict[str, Any]]:
    """A bench function's return value, ``(rows, meta)``, ``{"rows": ..., "meta": ...}`` or rows, as rows + meta."""
    if isinstance(out, tuple) and len(out) == 2:
        rows, meta = out
    elif isinstance(out, Mapping) and "rows" in out:
        rows, meta = out["rows"], out.get("meta") or {}
    elif isinstance(out, list):
        rows, meta = out, {}
    else:
        raise ValueError(f"bench {name!r} must return (rows, meta), {{'rows': [...], 'meta': {{...}}}} or a list of "
                         f"rows, got {type(out).__name__}")
    if not isinstance(meta, Mapping):
        raise ValueError(f"bench {name!r} returned meta of type {type(meta).__name__}; expected a dict")
    return as_rows(rows), dict(meta)


class BenchOptionError(ValueError):
    """Options of ``paperzoo bench`` that cannot be honoured (both ``--json`` and ``--commit``, no benchmarks/)."""


def bench_path(name: str, json_path: Path | None = None, commit: bool = False) -> Path:
    """Where :func:`run_bench` writes bench ``name``'s JSON (the ``.md`` goes beside it).

    ``json_path`` if given; with ``commit``, the committed ``benchmarks/<name>.json`` of the checkout in the current
    folder (a :class:`BenchOptionError` if there is no ``benchmarks/`` here); else a fresh
    ``<runs root>/bench/<name>/<stamp>/``.
    """
    if json_path is not None and commit:
        raise BenchOptionError("give either --json PATH or --commit, not both")
    if json_path is not None:
        return Path(json_path)
    if commit:
        if not Path("benchmarks").is_dir():
            raise BenchOptionError(f"--commit writes benchmarks/{name}.json and .md of a paperzoo checkout, and "
                             f"{Path.cwd()} has no benchmarks/ folder; run it from the repository root, or give "
                             f"--json PATH")
        return Path("benchmarks") / f"{name}.json"
    from paperzoo.report.run import runs_root, utc_stamp

    base = runs_root().absolute() / "bench" / name
    base.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    for i in range(1000):
        folder = base / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            folder.mkdir()
            return folder / f"{name}.json"
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a fresh bench folder under {base}")


def run_bench(name: str, json_path: Path | None = None, command: str | None = None,
              console: Any = None, commit: bool = False, precision: str = "all"
              ) -> tuple[list[BenchResult], dict[str, Any]]:
    """Run bench ``name`` once per precision, print its tables, write the JSON and the ``.md`` beside it, say where.

    ``precision``: "all" (fp32, then bf16 where this machine computes it fast: see
    :func:`paperzoo.bench.precision.passes`), "fp32" or "bf16". Each pass runs the bench function inside
    :func:`paperzoo.bench.precision.using`; its rows are tagged with the precision (``precision`` in the JSON, and
    in the case text) and every row with FLOPs gets the matmul peak of its pass's precision, so its fraction of
    peak is against the peak of the precision used. A skipped pass (no fast bf16, or a bench that declared
    :func:`~paperzoo.bench.precision.fp32_only`) is recorded with its reason in ``meta["precisions"]``.

    The JSON goes to ``json_path``, or with ``commit`` to the committed ``benchmarks/<name>.json`` (hand-written
    readings in its ``.md`` are kept; ``benchmarks/README.md`` is regenerated: :mod:`paperzoo.bench.summary`), or by
    default to a fresh run folder ``runs/bench/<name>/<stamp>/`` (see :func:`bench_path`): a plain run never
    overwrites committed results.

    The bench function takes no arguments and returns ``(rows, meta)``, a ``{"rows", "meta"}`` dict or a list of
    rows (:class:`BenchResult` or dicts). The meta written is the first pass's own meta, with the command, date, git
    commit, machine, that pass's peak (``peak_gflops``, ``peak_precision``) and ``precisions``: per pass its peak,
    the reason, and (after the first) its own meta. An unknown ``name`` raises ``KeyError`` listing the valid names.
    """
    from paperzoo.bench import precision as prec

    benches = all_benches()
    if name not in benches:
        raise KeyError(f"unknown bench {name!r}; valid names: {', '.join(sorted(benches))}")
    if json_path is not None and commit:
        raise BenchOptionError("give either --json PATH or --commit, not both")
    if commit:
        bench_path(name, commit=True)  # fail before a long bench, not after
    plan = prec.passes(precision)  # fails on a bad name before a long bench
    from paperzoo.train.allocator import reuse_freed_memory

    reuse_freed_memory()  # as the Trainer does: freed blocks stay for the next step, on both sides of every row
    fn = _resolve(benches[name])
    rows: list[BenchResult] = []
    first: dict[str, Any] | None = None
    by_precision: dict[str, dict[str, Any]] = {}
    for used, p, reason in plan:
        if p is None:
            by_precision[used] = {"skipped": reason}
            continue
        with prec.using(p):
            try:
                out = fn()
            except prec.PrecisionSkipped as e:
                by_precision[used] = {"skipped": str(e.args[0])}
                continue
            except KeyError as e:  # keep the CLI from mistaking it for an unknown name
                raise RuntimeError(f"bench {name!r} failed: KeyError {e}") from e
            got, own = _split(out, name)
            peak = own.get("peak_gflops") or prec.peak_gflops()
        for r in got:
            r.extra["precision"] = used
            if used not in r.case.replace(",", " ").split():
                r.case = f"{r.case}, {used}"
            if r.flops:
                r.peak_gflops = peak
        print_table(got, title=f"bench {name}, {used} (peak {peak:.1f} GFLOP/s)", console=console)
        rows += got
        by_precision[used] = {"peak_gflops": peak, "reason": reason, "rows": len(got)}
        if first is None:
            first = {**own, "peak_gflops": peak, "peak_precision": used}
        else:
            by_precision[used]["meta"] = {k: v for k, v in own.items() if k != "peak_gflops"}
    if first is None:
        raise RuntimeError(f"bench {name!r} ran in no precision: " +
                           "; ".join(f"{k}: {v['skipped']}" for k, v in by_precision.items()))
    meta = {**bench_meta(name, command, first["peak_gflops"]), **first, "precisions": by_precision}
    path = bench_path(name, json_path, commit)
    write_json(path, rows, meta, keep_readings=commit)
    if commit:  # the summary of every committed bench, and the speed targets, follow the committed files
        from paperzoo.bench.summary import write_readme

        write_readme(path.parent)
    if console is None:
        from rich.console import Console

        console = Console()
    console.print(f"wrote {path} and {path.with_suffix('.md')}" if commit or json_path is not None else
                  f"wrote {path} and {path.with_suffix('.md')} (the committed benchmarks/ are untouched: "
                  f"--commit writes there)")
    return rows, meta
