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
              console: Any = None, commit: bool = False) -> tuple[list[BenchResult], dict[str, Any]]:
    """Run bench ``name``, print its table, write the JSON and the ``.md`` beside it, and say where.

    The JSON goes to ``json_path``, or with ``commit`` to the committed ``benchmarks/<name>.json`` (hand-written
    readings in its ``.md`` are kept), or by default to a fresh run folder ``runs/bench/<name>/<stamp>/``
    (see :func:`bench_path`): a plain run never overwrites committed results.

    The bench function takes no arguments and returns ``(rows, meta)``, a ``{"rows", "meta"}`` dict or a list of
    rows (:class:`BenchResult` or dicts). The meta written gains the command, date, git commit, machine and the
    measured fp32 matmul peak (measured here unless the bench reports ``peak_gflops``), and rows that have FLOPs
    but no peak get it, so every row carries its fraction of peak. An unknown ``name`` raises ``KeyError``
    listing the valid names.
    """
    benches = all_benches()
    if name not in benches:
        raise KeyError(f"unknown bench {name!r}; valid names: {', '.join(sorted(benches))}")
    if json_path is not None and commit:
        raise BenchOptionError("give either --json PATH or --commit, not both")
    if commit:
        bench_path(name, commit=True)  # fail before a long bench, not after
    fn = _resolve(benches[name])
    try:
        out = fn()
    except KeyError as e:  # keep the CLI from mistaking it for an unknown name
        raise RuntimeError(f"bench {name!r} failed: KeyError {e}") from e
    rows, own_meta = _split(out, name)
    peak = own_meta.get("peak_gflops")
    if peak is None:
        from paperzoo.measure import machine_peak_gflops

        peak = machine_peak_gflops()
    meta = {**bench_meta(name, command, peak), **own_meta, "peak_gflops": peak}
    for r in rows:
        if r.flops and r.peak_gflops is None:
            r.peak_gflops = peak
    print_table(rows, title=f"bench {name} (peak {peak:.1f} GFLOP/s)", console=console)
    path = bench_path(name, json_path, commit)
    write_json(path, rows, meta, keep_readings=commit)
    if console is None:
        from rich.console import Console

        console = Console()
    console.print(f"wrote {path} and {path.with_suffix('.md')}" if commit or json_path is not None else
                  f"wrote {path} and {path.with_suffix('.md')} (the committed benchmarks/ are untouched: "
                  f"--commit writes there)")
    return rows, meta
