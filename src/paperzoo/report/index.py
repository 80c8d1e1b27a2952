"""``reports/index.html``: one page linking every run with its verdict, claim, report and plot thumbnails.

Runs are the folders ``<runs root>/<paper>/<name>/`` holding a ``config.json`` or ``result.json``, and the folders
written elsewhere with ``--out`` that :func:`paperzoo.report.run.new_run_dir` recorded in
``<runs root>/external-runs.jsonl``. A run without ``result.json`` (running, interrupted or failed) is listed apart
and never stands for its paper's latest result.
"""

from __future__ import annotations

import html
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from paperzoo.report.serial import write_text_atomic

COLOURS = {"reproduced": "#1e8449", "not reproduced": "#c0392b", "inconclusive": "#b9770e", "no result": "#7f8c8d"}

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 6px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.verdict { color: white; padding: 2px 8px; border-radius: 4px; white-space: nowrap; }
img.thumb { height: 90px; margin-right: 4px; border: 1px solid #ccc; }
.small { color: #666; font-size: 90%; }
"""


def _created(path: Path) -> str | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc.get("created") if isinstance(doc, dict) and isinstance(doc.get("created"), str) else None


def _load_run(run_dir: Path, paper: str | None = None, external: bool = False) -> dict[str, Any]:
    info: dict[str, Any] = {"paper": paper or run_dir.parent.name, "stamp": run_dir.name, "dir": run_dir,
                            "verdict": "no result", "claim": "", "measured": "", "plots": [], "finished": False,
                            "external": external, "preset": _preset(run_dir)}
    info["smoke"] = info["preset"] == "tiny"
    result = run_dir / "result.json"
    when = _created(result) if result.is_file() else _created(run_dir / "config.json")
    if when is None:
        when = datetime.fromtimestamp(run_dir.stat().st_mtime, UTC).isoformat(timespec="seconds")
    info["when"] = when
    if result.is_file():
        try:
            doc = json.loads(result.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            doc = {}
        info["finished"] = True
        info["verdict"] = doc.get("verdict", "no result")
        info["claim"] = doc.get("claim", "")
        parts = []
        for k, m in (doc.get("measurements") or {}).items():
            mean, lo, hi = m.get("mean"), m.get("lo"), m.get("hi")
            ci = f" [{lo:.4g}, {hi:.4g}]" if isinstance(lo, int | float) and isinstance(hi, int | float) else ""
            parts.append(f"{k} = {mean:.4g}{ci}" if isinstance(mean, int | float) else f"{k} = n/a")
        info["measured"] = "; ".join(parts)
        info["plots"] = [run_dir / p for p in doc.get("plots") or []]
    if not info["plots"]:
        info["plots"] = sorted(run_dir.glob("*.png"))
    return info


def _preset(run_dir: Path) -> str | None:
    """The preset a run was started with (its ``config.json``), or None when that is unreadable."""
    try:
        return json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["config"]["preset"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        return None


SMOKE = "smoke test (preset tiny), not a reproduction"


def _verdict_badge(run: dict[str, Any]) -> str:
    v = run["verdict"]
    badge = f'<span class="verdict" style="background:{COLOURS.get(v, "#7f8c8d")}">{html.escape(v)}</span>'
    if run.get("smoke"):
        badge += f' <span class="small smoke">{SMOKE}</span>'
    elif run.get("preset"):
        badge += f' <span class="small">preset {html.escape(run["preset"])}</span>'
    return badge


def _href(target: Path, base: Path) -> str:
    return quote(Path(os.path.relpath(target.resolve(), base.resolve())).as_posix())


def _row(run: dict[str, Any], base: Path) -> str:
    d: Path = run["dir"]
    links = [f'<a href="{_href(d / name, base)}">{name}</a>' for name in ("report.md", "result.json", "config.json")
             if (d / name).is_file()]
    thumbs = "".join(f'<a href="{_href(p, base)}"><img class="thumb" src="{_href(p, base)}" '
                     f'alt="{html.escape(p.stem)}"></a>' for p in run["plots"] if p.is_file())
    where = f'<div class="small">{html.escape(str(d))}</div>' if run["external"] else ""
    return (f"<tr><td>{html.escape(run['paper'])}</td><td>{html.escape(run['stamp'])}{where}</td>"
            f"<td>{_verdict_badge(run)}</td>"
            f"<td>{html.escape(run['claim'])}<div class=\"small\">{html.escape(run['measured'])}</div></td>"
            f"<td>{' '.join(links)}</td><td>{thumbs}</td></tr>")


def build_index(runs_root: Path | None = None, out: Path | None = None) -> Path:
    """Write an HTML page linking every run folder ``<runs_root>/<paper>/<stamp>/`` (and every run recorded in
    ``<runs_root>/external-runs.jsonl``); return its path.

    ``runs_root`` defaults to ``$PAPERZOO_RUNS`` or ``./runs``; ``out`` to ``<runs_root>/../reports/index.html``.
    Finished runs (with ``result.json``) are grouped by paper, newest first, with each paper's newest finished run
    in a summary on top; unfinished runs (only ``config.json``) follow in a table of their own.
    """
    from paperzoo.report.run import external_runs

    if runs_root is None:
        from paperzoo.report.run import runs_root as default_root

        runs_root = default_root()
    runs_root = Path(runs_root)
    out = Path(out) if out is not None else runs_root.parent / "reports" / "index.html"
    runs, seen = [], set()
    candidates = [(d, None, False) for d in (sorted(runs_root.glob("*/*/")) if runs_root.is_dir() else [])]
    candidates += [(d, paper, True) for paper, d in external_runs(runs_root)]
    for d, paper, external in candidates:
        key = d.resolve()
        if key in seen or not d.is_dir() or not ((d / "result.json").is_file() or (d / "config.json").is_file()):
            continue
        seen.add(key)
        runs.append(_load_run(d, paper, external))
    runs.sort(key=lambda r: (r["when"], r["stamp"]), reverse=True)
    runs.sort(key=lambda r: r["paper"])
    finished = [r for r in runs if r["finished"]]
    unfinished = [r for r in runs if not r["finished"]]
    base = out.parent
    base.mkdir(parents=True, exist_ok=True)
    latest: dict[str, dict[str, Any] | None] = {}
    for r in finished:  # a paper's newest real result; a smoke test only where it has nothing else
        if not r["smoke"]:
            latest.setdefault(r["paper"], r)
    for r in finished:
        latest.setdefault(r["paper"], r)
    for r in unfinished:
        latest.setdefault(r["paper"], None)
    summary = "".join(
        f'<li>{html.escape(p)}: {_verdict_badge(r)} <span class="small">({html.escape(r["stamp"])})</span></li>'
        if r is not None else
        f'<li>{html.escape(p)}: <span class="verdict" style="background:{COLOURS["no result"]}">no result</span> '
        f'<span class="small">(no finished run yet)</span></li>'
        for p, r in sorted(latest.items()))
    header = "<tr><th>paper</th><th>run</th><th>verdict</th><th>claim / measured</th><th>files</th><th>plots</th></tr>"
    body = "\n".join(_row(r, base) for r in finished) or '<tr><td colspan="6">no finished runs yet</td></tr>'
    rest = ""
    if unfinished:
        rest = ("<h2>Unfinished runs</h2>\n<p class=\"small\">No result.json: running, interrupted (continue with "
                "--resume and the same --out) or failed.</p>\n<table>\n" + header + "\n"
                + "\n".join(_row(r, base) for r in unfinished) + "\n</table>\n")
    page = (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>paperzoo runs</title>"
            f"<style>{_STYLE}</style></head><body>\n<h1>paperzoo runs</h1>\n"
            f"<p class=\"small\">{len(finished)} finished and {len(unfinished)} unfinished run(s) under "
            f"{html.escape(str(runs_root))}; built "
            f"{datetime.now(UTC).isoformat(timespec='seconds')}</p>\n<h2>Latest per paper</h2><ul>{summary}</ul>\n"
            f"<h2>All finished runs</h2>\n<table>\n{header}\n{body}\n</table>\n{rest}</body></html>\n")
    return write_text_atomic(out, page)
