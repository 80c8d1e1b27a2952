"""PNG plots for run folders: metric curves from ``metrics.jsonl`` and bar charts with confidence intervals.

Uses matplotlib's object API with the Agg canvas (no pyplot, no display needed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from paperzoo.report.stats import CI, mean_ci

Records = list[dict[str, Any]]


def read_metrics(path: Path) -> Records:
    """The records of a ``metrics.jsonl`` file (one JSON object a line; blank and torn last lines are skipped)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"expected a metrics.jsonl file, got {path} (not found)")
    out: Records = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            if isinstance(rec, dict):
                out.append(rec)
    return out


def _label_for(path: Path) -> str:
    return path.parent.name if path.name == "metrics.jsonl" else path.stem


def _series(source: Any, group_by: str | None) -> dict[str, Records]:
    """Normalise a file, list of files, {label: file or records} or a list of records into {label: records}."""
    if isinstance(source, str | Path):
        named: dict[str, Records] = {_label_for(Path(source)): read_metrics(Path(source))}
    elif isinstance(source, Mapping):
        named = {str(k): (read_metrics(Path(v)) if isinstance(v, str | Path) else list(v)) for k, v in source.items()}
    elif isinstance(source, Sequence) and source and all(isinstance(s, dict) for s in source):
        named = {"run": list(source)}
    elif isinstance(source, Sequence) and source and all(isinstance(s, str | Path) for s in source):
        named = {}
        for s in source:
            label = _label_for(Path(s))
            while label in named:
                label = f"{label}'"
            named[label] = read_metrics(Path(s))
    else:
        raise ValueError("source must be a metrics.jsonl path, a list of paths, a {label: path or records} mapping "
                         f"or a list of record dicts, got {type(source).__name__}")
    if group_by is None:
        return named
    grouped: dict[str, Records] = {}
    for label, recs in named.items():
        for r in recs:
            key = f"{group_by}={r.get(group_by)}"
            grouped.setdefault(key if len(named) == 1 else f"{label} {key}", []).append(r)
    return grouped


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


def plot_metrics(run_dir: Path, source: Any, x: str = "step", ys: Sequence[str] = ("loss",), path: Path | None = None,
                 group_by: str | None = None, where: Mapping[str, Any] | None = None, title: str = "",
                 logy: bool = False) -> Path:
    """Plot ``ys`` against ``x``, one panel per y and one labelled line per seed/variant; returns the PNG path.

    ``source`` is a ``metrics.jsonl`` path, a list of them (labelled by their folder), a ``{label: path or
    records}`` mapping or a list of record dicts; ``group_by`` (e.g. ``"seed"``) splits records by that key.
    Records lacking ``x`` or a numeric ``y`` are skipped for that panel; ``where`` keeps only records matching
    every given key, e.g. ``where={"event": "eval"}`` for the training engine's eval lines.
    ``path`` defaults to ``run_dir/<ys joined by _>.png``; a relative ``path`` is taken inside ``run_dir``.
    """
    from matplotlib.figure import Figure

    if isinstance(ys, str):
        ys = [ys]
    if not ys:
        raise ValueError("ys must name at least one metric, e.g. ys=['loss']")
    series = _series(source, group_by)
    if where:
        series = {k: [r for r in v if all(r.get(wk) == wv for wk, wv in where.items())] for k, v in series.items()}
    run_dir = Path(run_dir)
    path = Path(path) if path is not None else Path("_".join(ys).replace("/", "-") + ".png")
    if not path.is_absolute():
        path = run_dir / path
    ncols = min(3, len(ys))
    nrows = math.ceil(len(ys) / ncols)
    fig = Figure(figsize=(4.5 * ncols, 3.4 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    plotted = 0
    for ax, y in zip(axes, ys, strict=False):
        for label, recs in series.items():
            pts = [(_num(r.get(x)), _num(r.get(y))) for r in recs]
            pts = [(a, b) for a, b in pts if a is not None and b is not None]
            if pts:
                ax.plot([a for a, _ in pts], [b for _, b in pts], label=label, linewidth=1.2)
                plotted += 1
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        if logy:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        if len(series) > 1 and ax.lines:
            ax.legend(fontsize="small")
    for ax in axes[len(ys):]:
        ax.set_visible(False)
    if not plotted:
        keys = sorted({k for recs in series.values() for r in recs for k in r})
        raise ValueError(f"no records with numeric x={x!r} and any of ys={list(ys)}; keys found: {keys}")
    if title:
        fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def plot_bars_with_ci(values: Mapping[str, CI | Sequence[float]], path: Path, title: str = "", ylabel: str = "",
                      reference: float | None = None, reference_label: str = "claim") -> Path:
    """Bars of means with their CI as error bars and the per-seed values as dots; returns the PNG path.

    ``values`` maps a label to a :class:`CI` or to per-seed values (their 95% CI is computed). ``reference``
    draws a horizontal dashed line (e.g. the paper's figure).
    """
    from matplotlib.figure import Figure

    if not values:
        raise ValueError("values must map at least one label to a CI or per-seed values")
    labels = list(values)
    cis: list[CI] = []
    points: list[list[float]] = []
    for k in labels:
        v = values[k]
        if isinstance(v, CI):
            cis.append(v)
            points.append([])
        else:
            cis.append(mean_ci(v))
            points.append([float(p) for p in v])
    means = [c.mean for c in cis]
    err = [[0.0 if math.isnan(c.lo) else c.mean - c.lo for c in cis],
           [0.0 if math.isnan(c.hi) else c.hi - c.mean for c in cis]]
    fig = Figure(figsize=(max(3.5, 1.1 * len(labels) + 1.5), 3.6), layout="constrained")
    ax = fig.subplots()
    xs = list(range(len(labels)))
    ax.bar(xs, means, yerr=err, capsize=5, color="#8fb3d9", edgecolor="#2b5d8a")
    for i, pts in enumerate(points):
        if pts:
            ax.scatter([i] * len(pts), pts, s=14, color="#222222", zorder=3)
    if reference is not None:
        ax.axhline(reference, color="#c0392b", linestyle="--", linewidth=1, label=reference_label)
        ax.legend(fontsize="small")
    ax.set_xticks(xs, labels, rotation=20 if len(labels) > 4 else 0)
    lows = [c.lo if not math.isnan(c.lo) else c.mean for c in cis] + [p for pts in points for p in pts]
    highs = [c.hi if not math.isnan(c.hi) else c.mean for c in cis] + [p for pts in points for p in pts]
    if reference is not None:
        lows.append(reference)
        highs.append(reference)
    lo, hi = min(lows), max(highs)
    if lo > 0 and (hi - lo) < 0.5 * hi:  # zoom in on values far from zero (e.g. accuracies)
        pad = 0.15 * (hi - lo) or 0.05 * hi
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
