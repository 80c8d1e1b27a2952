"""Benchmark rows: ours vs peer times, ratio, achieved GFLOP/s and fraction of peak; table, JSON and Markdown."""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paperzoo.measure import Stats
from paperzoo.report.machine import machine_info
from paperzoo.report.serial import dumps, to_jsonable, write_text_atomic


@dataclass
class BenchResult:
    """One benchmark row. Times are medians in milliseconds; ``ratio = peer_ms / ours_ms`` (> 1: ours is faster)."""

    name: str
    case: str
    ours_ms: float
    peer_ms: float | None = None
    peer: str = ""
    flops: int | None = None
    peak_gflops: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.ours_ms, int | float) or not self.ours_ms > 0:
            raise ValueError(f"ours_ms must be a positive time in milliseconds, got {self.ours_ms!r}")
        if self.peer_ms is not None and (not isinstance(self.peer_ms, int | float) or not self.peer_ms > 0):
            raise ValueError(f"peer_ms must be None or a positive time in milliseconds, got {self.peer_ms!r}")

    @property
    def ratio(self) -> float | None:
        return self.peer_ms / self.ours_ms if self.peer_ms is not None else None

    @property
    def ours_gflops(self) -> float | None:
        return self.flops / (self.ours_ms * 1e-3) / 1e9 if self.flops else None

    @property
    def peer_gflops(self) -> float | None:
        return self.flops / (self.peer_ms * 1e-3) / 1e9 if self.flops and self.peer_ms else None

    @property
    def fraction_of_peak(self) -> float | None:
        g = self.ours_gflops
        return g / self.peak_gflops if g is not None and self.peak_gflops else None

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        d.update(ratio=self.ratio, ours_gflops=self.ours_gflops, peer_gflops=self.peer_gflops,
                 fraction_of_peak=self.fraction_of_peak)
        d.update(self.extra)
        return to_jsonable(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchResult:
        """A row from a dict with at least ``name``, ``case``, ``ours_ms``; derived keys are recomputed, others go to
        ``extra``."""
        missing = [k for k in ("name", "case", "ours_ms") if k not in d]
        if missing:
            raise ValueError(f"a bench row needs keys name, case, ours_ms; missing {missing} in {dict(d)}")
        own = {f.name for f in fields(cls)} - {"extra"}
        derived = {"ratio", "ours_gflops", "peer_gflops", "fraction_of_peak"}
        extra = {k: v for k, v in d.items() if k not in own and k not in derived}
        return cls(**{k: d[k] for k in own if k in d}, extra={**dict(d.get("extra") or {}), **extra})

    @classmethod
    def from_stats(cls, name: str, case: str, stats: Mapping[str, Stats], flops: int | None = None,
                   peak_gflops: float | None = None, **extra: Any) -> BenchResult:
        """A row from :func:`time_interleaved` output: the first entry is ours, the second (if any) the peer.

        Entries re-timed in fp32 during a bf16 pass (:func:`paperzoo.bench.precision.time_interleaved`) are not
        sides: ours' becomes ``ours_fp32_ms`` and ``speedup_vs_ours_fp32`` (ours fp32 time / ours bf16 time)."""
        from paperzoo.bench.precision import FP32_REF

        refs = {k: s for k, s in stats.items() if k.endswith(FP32_REF)}
        stats = {k: s for k, s in stats.items() if k not in refs}
        keys = list(stats)
        if keys and keys[0] + FP32_REF in refs:
            fp32_ms = refs[keys[0] + FP32_REF].median * 1e3
            extra = {**extra, "ours_fp32_ms": fp32_ms, "speedup_vs_ours_fp32": fp32_ms / (stats[keys[0]].median * 1e3)}
        if not 1 <= len(keys) <= 2:
            raise ValueError(f"stats must hold ours and at most one peer, got {keys}")
        peer = keys[1] if len(keys) == 2 else ""
        return cls(name, case, stats[keys[0]].median * 1e3, stats[peer].median * 1e3 if peer else None, peer,
                   flops, peak_gflops, extra)


def as_rows(rows: Iterable[BenchResult | Mapping[str, Any]]) -> list[BenchResult]:
    """Rows as :class:`BenchResult` (dicts are converted)."""
    out = []
    for r in rows:
        if isinstance(r, BenchResult):
            out.append(r)
        elif isinstance(r, Mapping):
            out.append(BenchResult.from_dict(r))
        else:
            raise ValueError(f"a bench row must be a BenchResult or a dict, got {type(r).__name__}")
    return out


def _f(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


_COLUMNS = ("name", "case", "ours ms", "peer", "peer ms", "ratio", "GFLOP/s", "% peak")
_CAPTION = ("ratio = peer time / our time (> 1: ours is faster); "
            "GFLOP/s and % peak are ours against the measured matmul peak")


def _cells(r: BenchResult) -> list[str]:
    frac = r.fraction_of_peak
    return [r.name, r.case, _f(r.ours_ms, ".3f"), r.peer or "-", _f(r.peer_ms, ".3f"),
            _f(r.ratio, ".2f") + ("x" if r.ratio is not None else ""), _f(r.ours_gflops, ".1f"),
            _f(frac * 100 if frac is not None else None, ".0f")]


def print_table(rows: Iterable[BenchResult | Mapping[str, Any]], title: str | None = None, console: Any = None) -> None:
    """Print the rows as a rich table."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, caption=_CAPTION)
    for c in _COLUMNS:
        table.add_column(c, justify="left" if c in ("name", "case", "peer") else "right", overflow="fold",
                         no_wrap=c not in ("name", "case", "peer"))
    for r in as_rows(rows):
        table.add_row(*_cells(r))
    (console or Console()).print(table)


def markdown_table(rows: Iterable[BenchResult | Mapping[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in as_rows(rows)]
    return "\n".join(lines)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def current_command() -> str:
    """The command line of this process, as a user would type it (``paperzoo bench ...``)."""
    argv = list(sys.argv)
    if not argv or not argv[0]:
        return ""
    head = Path(argv[0])
    if head.name == "__main__.py":
        mod = ".".join(head.resolve().parent.parts[-2:])  # e.g. paperzoo.bench
        return "python -m " + " ".join(shlex.quote(a) for a in [mod, *argv[1:]])
    return " ".join(shlex.quote(a) for a in [head.name, *argv[1:]])


def bench_meta(name: str, command: str | None = None, peak_gflops: float | None = None) -> dict[str, Any]:
    """Metadata for a bench file: command, UTC date, git commit, machine, load average, measured peak."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {
        "bench": name,
        "command": command if command is not None else current_command(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "machine": machine_info(),
        "load_average": load,
        "peak_gflops": peak_gflops,
    }


def write_json(path: Path, rows: Iterable[BenchResult | Mapping[str, Any]],
               meta: Mapping[str, Any], keep_readings: bool = False) -> tuple[Path, Path]:
    """Write ``{"meta": ..., "rows": [...]}`` to ``path`` and a Markdown table beside it (same name, ``.md``).

    ``keep_readings``: text that a person added below the generated part of an existing ``.md`` (the readings of
    the committed figures) is carried over under a line saying which run it was written for.
    """
    path = Path(path)
    rows = as_rows(rows)
    meta = dict(meta)
    md_path = path.with_suffix(".md")
    readings = _readings(path, md_path) if keep_readings else ""
    write_text_atomic(path, dumps({"meta": meta, "rows": [r.as_dict() for r in rows]}))
    md = markdown_file(rows, meta, path.stem)
    if readings:
        md += "\n" + readings + "\n"
    md = write_text_atomic(md_path, md)
    return path, md


_READINGS = "_Readings below were written for the run of "


def _readings(path: Path, md_path: Path) -> str:
    """The hand-written part of the existing ``md_path``: what follows the text generated from ``path``'s figures,
    headed by the date of the run it describes. A file that cannot be split so is copied to ``<name>.md.orig``."""
    try:
        old_md = md_path.read_text(encoding="utf-8")
    except OSError:
        return ""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        generated = markdown_file(as_rows(doc["rows"]), doc["meta"], path.stem)
    except (OSError, ValueError, KeyError, TypeError):
        generated = None
    if generated is None or not old_md.startswith(generated):
        backup = md_path.with_name(md_path.name + ".orig")
        write_text_atomic(backup, old_md)
        return f"_The previous {md_path.name} did not match its JSON; it is kept as {backup.name}._"
    extra = old_md[len(generated):].strip()
    if not extra or extra.startswith(_READINGS):
        return extra
    m = doc["meta"]
    when = str(m.get("date", "?")) + (f", commit {m['git_commit']}" if m.get("git_commit") else "")
    return f"{_READINGS}{when}; check them against the figures above._\n\n{extra}"


def _peak_line(meta: Mapping[str, Any], peak: float | None) -> str:
    """The header line of the measured peak(s): one per precision pass, a skipped pass with its reason."""
    passes = meta.get("precisions")
    if not passes:
        return f"- measured {meta.get('peak_precision', 'fp32')} matmul peak: {_f(peak, '.1f')} GFLOP/s"
    parts = [f"{p} {_f(v.get('peak_gflops'), '.1f')} GFLOP/s" if "skipped" not in v else f"{p} skipped ({v['skipped']})"
             for p, v in passes.items()]
    return "- measured matmul peaks: " + ", ".join(parts) + " (each row's % peak is against its precision's peak)"


def markdown_file(rows: Iterable[BenchResult | Mapping[str, Any]], meta: Mapping[str, Any], stem: str = "") -> str:
    """The ``.md`` that :func:`write_json` writes for ``rows`` and ``meta``: header lines, the table, the notes."""
    m = meta.get("machine") or {}
    peak = meta.get("peak_gflops")
    lines = [f"# bench: {meta.get('bench', stem)}", "",
             f"- command: `{meta.get('command', '')}`",
             f"- date: {meta.get('date', '')}" + (f", commit {meta['git_commit']}" if meta.get("git_commit") else ""),
             f"- machine: {m.get('cpu', '?')}, {m.get('cpu_usable', m.get('cpu_count', '?'))} cores, "
             f"torch {m.get('torch', '?')} with {m.get('torch_threads', '?')} threads"
             + (f", load average {meta['load_average']}" if meta.get("load_average") else ""),
             _peak_line(meta, peak),
             f"- {_CAPTION}", "",
             markdown_table(rows)]
    notes = meta.get("notes")
    if notes:
        lines += ["", str(notes)]
    return "\n".join(lines) + "\n"
