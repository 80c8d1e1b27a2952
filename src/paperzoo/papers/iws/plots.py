"""The reproduction's figure: a metric vs the number of queries, one line per method with its 95% CI band."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from paperzoo.report.stats import mean_ci


def plot_curves(series: Mapping[str, Mapping[int, Sequence[float]]], flat: Mapping[str, Sequence[float]],
                path: Path, title: str = "", ylabel: str = "", reference: Mapping[int, float] | None = None) -> Path:
    """``series[name][q]``: per-seed values at ``q`` queries (mean line, t-interval band); ``flat[name]``: per-seed
    values of a method without queries (a horizontal line and band); ``reference``: points of a published curve."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.subplots()
    for name, by_q in series.items():
        qs = sorted(q for q, v in by_q.items() if any(not math.isnan(x) for x in v))
        cis = [mean_ci([x for x in by_q[q] if not math.isnan(x)]) for q in qs]
        mean = [c.mean for c in cis]
        (line,) = ax.plot(qs, mean, marker="o", markersize=3, label=name)
        lo = [c.lo if not math.isnan(c.lo) else c.mean for c in cis]
        hi = [c.hi if not math.isnan(c.hi) else c.mean for c in cis]
        ax.fill_between(qs, lo, hi, color=line.get_color(), alpha=0.2)
    for name, vals in flat.items():
        c = mean_ci(vals)
        line = ax.axhline(c.mean, linestyle="--", linewidth=1, label=name, color="gray" if "super" in name else "k")
        if not math.isnan(c.lo):
            ax.axhspan(c.lo, c.hi, color=line.get_color(), alpha=0.1)
    if reference:
        xs = sorted(reference)
        ax.plot(xs, [reference[x] for x in xs], "x:", color="#c0392b", label="official notebook (LSE-ac)")
    ax.set_xlabel("answers (queries incl. the random start-up)")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
