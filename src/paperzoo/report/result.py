"""``result.json`` and ``report.md``: the claim, the measured figures with confidence intervals, the verdict.

``result.json`` (strict JSON; NaN is written as null)::

    {"paper": str, "claim": str, "verdict": "reproduced" | "not reproduced" | "inconclusive",
     "measurements": {name: {"mean", "lo", "hi", "n", "std", "confidence", "note", "values": [per seed] | null}},
     "details": {...}, "notes": str, "plots": [paths relative to the run folder], "config": "config.json" | null,
     "created": ISO time}
"""

from __future__ import annotations

import json
import math
import numbers
import shutil
import warnings
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paperzoo.report.index import build_index
from paperzoo.report.run import external_runs, release_run_dir, runs_root
from paperzoo.report.serial import dumps, to_jsonable, write_text_atomic
from paperzoo.report.stats import CI, VERDICTS, Comparison, mean_ci, verdict_from
from paperzoo.report.verdict import Verdict


def _measurement(name: str, value: Any, confidence: float) -> dict[str, Any]:
    """One measurement as ``{mean, lo, hi, n, std, confidence, values, note}``."""
    if isinstance(value, CI):
        d = to_jsonable(value)
        d["values"] = None
        return d
    if isinstance(value, Comparison):
        return {"mean": value.diff, "lo": value.lo, "hi": value.hi, "n": value.a.n, "std": None,
                "confidence": value.confidence, "values": None,
                "note": f"difference of means vs baseline ({'paired t over seeds' if value.paired else 'Welch t'}), "
                        f"verdict {verdict_from(value)!r}",
                "comparison": to_jsonable(value)}
    if isinstance(value, numbers.Real):
        value = [value]
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        values = [float(v) for v in value]
        try:
            ci = mean_ci(values, confidence)
        except ValueError as e:
            raise ValueError(f"measurement {name!r}: {e}") from e
        d = to_jsonable(ci)
        d["values"] = values
        return d
    raise ValueError(f"measurement {name!r} must be per-seed values (list of floats), a CI or a Comparison, "
                     f"got {type(value).__name__}")


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _figure(name: str, m: dict[str, Any]) -> str:
    conf = m.get("confidence") or 0.95
    if m["lo"] is None or m["hi"] is None:
        return f"{name} = {_fmt(m['mean'])} (n={m['n']}, no CI)"
    return f"{name} = {_fmt(m['mean'])} ({conf:.0%} CI {_fmt(m['lo'])} to {_fmt(m['hi'])}, n={m['n']})"


def _place_plot(run_dir: Path, plot: Path) -> str:
    """The plot's path relative to ``run_dir``, copying it in if it lives elsewhere."""
    plot = Path(plot)
    if not plot.is_absolute() and not plot.exists():
        plot = run_dir / plot
    if not plot.is_file():
        raise ValueError(f"plots must be existing image files, got {plot}")
    try:
        return plot.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        dest = run_dir / plot.name
        shutil.copy2(plot, dest)
        return dest.name


def _md_value(v: Any) -> str:
    if isinstance(v, CI | Comparison):
        v = str(v)
    if isinstance(v, list) and all(_scalar(x) for x in v):
        return ", ".join(_fmt(x) for x in v) or "-"
    return _fmt(v).replace("|", "\\|").replace("\n", " ")


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _cell(v: Any) -> str:
    """A value short enough for a table cell or a list item (numbers, text, lists of them); else a pointer."""
    return _md_value(v) if _scalar(v) or isinstance(v, list) and all(_scalar(x) for x in v) else "(in result.json)"


def _table(rows: Mapping[str, Mapping[str, Any]], first: str) -> list[str]:
    """A markdown table with one row per entry of ``rows`` and a column per key of the inner mappings."""
    cols: list[str] = []
    for r in rows.values():
        cols += [k for k in r if k not in cols]
    out = ["| " + " | ".join([first, *cols]) + " |", "|" + "---|" * (len(cols) + 1)]
    for name, r in rows.items():
        cells = [_cell(r.get(c)) for c in cols]
        out.append("| " + " | ".join([str(name).replace("|", "\\|"), *cells]) + " |")
    return out


def _details(details: Mapping[str, Any]) -> list[str]:
    """Details as short lists, and tables where a value is a set of records; whole JSON stays in result.json."""
    flat, blocks = [], []
    for k, v in details.items():
        v = to_jsonable(v) if not isinstance(v, CI | Comparison) else v
        if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
            blocks += ["", f"### {k}", "", *_table(v, "")]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            blocks += ["", f"### {k}", "", *_table({str(i): x for i, x in enumerate(v)}, "#")]
        elif isinstance(v, dict):
            flat.append(f"- **{k}**:")
            flat += [f"  - {kk}: {_cell(x)}" for kk, x in v.items()]
        else:
            flat.append(f"- **{k}**: {_md_value(v)}")
    return flat + blocks


def _markdown(doc: dict[str, Any], run_dir: Path, details: Mapping[str, Any]) -> str:
    ms = doc["measurements"]
    claim = " ".join(doc["claim"].split())
    lines = [
        f"# {doc['paper']}: {claim}",
        "- **Measured:** " + ("; ".join(_figure(k, m) for k, m in ms.items()) or "nothing"),
        f"- **Verdict:** {doc['verdict']}" + (f" ({doc['verdict_reason']})" if doc.get("verdict_reason") else ""),
        "",
        f"Run `{doc.get('run') or run_dir.name}`, written {doc['created']}. Intervals are Student t intervals over "
        "seeds; see `paperzoo.recipes` for the verdict rules.",
        "",
        "## Measurements",
        "",
        "| metric | mean | CI low | CI high | n | std | per-seed values |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, m in ms.items():
        vals = ", ".join(_fmt(v) for v in m["values"]) if m.get("values") else "-"
        lines.append(f"| {k} | {_fmt(m['mean'])} | {_fmt(m['lo'])} | {_fmt(m['hi'])} | {m['n']} "
                     f"| {_fmt(m['std'])} | {vals} |")
    notes = [m["note"] for m in ms.values() if m.get("note")]
    if notes:
        lines += [""] + [f"- {k}: {m['note']}" for k, m in ms.items() if m.get("note")]
    if details:
        lines += ["", "## Details", "", *_details(details)]
    if doc["notes"]:
        lines += ["", "## Notes", "", doc["notes"].strip()]
    if doc["plots"]:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in doc["plots"]]
    cfg = run_dir / "config.json"
    if cfg.is_file():
        lines += ["", "## Config", "", "```json", cfg.read_text(encoding="utf-8").strip(), "```"]
    return "\n".join(lines) + "\n"


def render_report(run_dir: Path) -> Path:
    """Rewrite ``run_dir/report.md`` from its ``result.json`` (e.g. after the report's layout changed)."""
    run_dir = Path(run_dir)
    path = run_dir / "result.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ValueError(f"{run_dir} has no result.json: not a finished run folder") from e
    except ValueError as e:
        raise ValueError(f"{path} is damaged ({e}); rerun the recipe with --resume to rewrite it") from e
    return write_text_atomic(run_dir / "report.md", _markdown(doc, run_dir, doc.get("details") or {}))


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def write_result(run_dir: Path, paper: str, claim: str, measurements: Mapping[str, Any],
                 verdict: str | Comparison | Verdict,
                 details: Mapping[str, Any] | None = None, notes: str = "", plots: Sequence[Path] = (),
                 confidence: float = 0.95) -> Path:
    """Write ``result.json`` and ``report.md`` into ``run_dir``, refresh the runs index, return ``report.md``'s path.

    ``measurements`` maps a metric name to its per-seed values (a 95% CI is computed), a :class:`CI` or a
    :class:`Comparison`. ``verdict`` is one of ``"reproduced"``, ``"not reproduced"``, ``"inconclusive"`` (or a
    Comparison, judged by :func:`verdict_from`, or a :class:`paperzoo.report.verdict.Verdict`, whose sentence is written
    beside it). The first lines of ``report.md`` state the claim, the measured
    figures with their CIs and the verdict; a table, details, notes, plots and the config follow. Plots outside
    ``run_dir`` are copied in. When ``run_dir`` lies under the runs root or is recorded as an external run (an
    ``--out`` elsewhere, see :func:`paperzoo.report.run.new_run_dir`), ``reports/index.html`` is rebuilt. The run
    folder's lock, if this process holds it, is released.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"run_dir must be an existing folder (from new_run_dir), got {run_dir}")
    if not isinstance(paper, str) or not paper.strip():
        raise ValueError(f"paper must be the paper's registered name such as 'electra', got {paper!r}")
    reason = ""
    if isinstance(verdict, Comparison):
        verdict = verdict_from(verdict)
    elif isinstance(verdict, Verdict):
        verdict, reason = verdict.verdict, verdict.reason
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    if not isinstance(claim, str) or not claim.strip():
        raise ValueError(f"claim must be a non-empty string stating what the paper claims, got {claim!r}")
    if not isinstance(measurements, Mapping):
        raise ValueError(f"measurements must be a dict of metric name -> per-seed values or CI, "
                         f"got {type(measurements).__name__}")
    doc: dict[str, Any] = {
        "paper": paper,
        "claim": claim.strip(),
        "verdict": verdict,
        "verdict_reason": reason,
        "run": run_dir.name,
        "measurements": {str(k): _measurement(str(k), v, confidence) for k, v in measurements.items()},
        "details": to_jsonable(dict(details or {})),
        "notes": notes,
        "plots": [_place_plot(run_dir, p) for p in plots],
        "config": "config.json" if (run_dir / "config.json").is_file() else None,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    write_text_atomic(run_dir / "result.json", dumps(doc))
    report = write_text_atomic(run_dir / "report.md", _markdown(doc, run_dir, doc["details"]))
    release_run_dir(run_dir)  # the run is over: its folder may be reused (e.g. re-rendered, resumed)
    root = runs_root()
    if _inside(run_dir, root) or any(d == run_dir.resolve() for _, d in external_runs(root)):
        try:
            build_index(root)
        except Exception as e:  # the result is written; a broken neighbour must not lose it
            warnings.warn(f"could not rebuild the runs index: {e}", stacklevel=2)
    return report
