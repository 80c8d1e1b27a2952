"""The paperzoo registry and the committed reports (``docs/reports/*/result.json``) into ``paperzoo_links`` and
``paperzoo_reports``.

Every registered paper gets a row (its arXiv paper is created as a placeholder if its metadata is not ingested yet,
titled from the registry), its status, its code folder if it has one, and the verdict and claim of its latest
committed report: the report folder named like the paper, else the newest report whose ``paper`` field names it.
Every committed report of its recipes, main ones and those of other budgets (``<recipe>/<preset>/``, as
:func:`paperzoo.registry.verdicts` finds them), gets a ``paperzoo_reports`` row with its verdict and label.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import sessionmaker

from ..db import transaction
from ..ids import normalize_arxiv_id
from ..models import Paper, PaperzooLink, PaperzooReport
from . import IngestReport


def latest_reports(reports_dir: Path, report: IngestReport) -> dict[str, tuple[str, dict]]:
    """paper name -> (report folder name, result.json) of its latest committed report."""
    found: dict[str, list[tuple[str, dict]]] = {}
    for path in sorted(Path(reports_dir).glob("*/result.json")):
        try:
            d = json.loads(path.read_text())
            if not isinstance(d, dict) or not isinstance(d.get("paper"), str):
                raise ValueError("expected a JSON object with a 'paper' name")
        except (ValueError, OSError) as e:
            report.bad(str(path), str(e))
            continue
        found.setdefault(d["paper"], []).append((path.parent.name, d))
    out = {}
    for name, items in found.items():
        same = [it for it in items if it[0] == name]
        out[name] = same[0] if same else max(items, key=lambda it: str(it[1].get("created", "")))
    return out


def ingest_registry(factory: sessionmaker, repo_root: Path, papers: list | None = None) -> IngestReport:
    """Upsert one link per registered paper (``papers`` defaults to ``paperzoo.registry.papers()``)."""
    from paperzoo import registry

    report = IngestReport("registry")
    papers = registry.papers() if papers is None else papers
    reports = latest_reports(repo_root / "docs" / "reports", report)
    with transaction(factory) as s:
        for reg in papers:
            try:
                arxiv_id = normalize_arxiv_id(reg.arxiv)
            except ValueError as e:
                report.bad(reg.name, str(e))
                continue
            paper = s.scalar(select(Paper).where(Paper.arxiv_id == arxiv_id))
            if paper is None:
                paper = Paper(arxiv_id=arxiv_id, title=reg.title, categories="", version=0)
                s.add(paper)
                s.flush()
            elif not paper.title:
                paper.title = reg.title
            pkg = reg.name.replace("-", "_")
            code = f"src/paperzoo/papers/{pkg}/" if (repo_root / "src" / "paperzoo" / "papers" / pkg).is_dir() else ""
            folder, result = reports.get(reg.name, ("", {}))
            values = dict(name=reg.name, status=reg.status, verdict=str(result.get("verdict", "")),
                          claim=str(result.get("claim", "")),
                          report_path=f"docs/reports/{folder}/report.md" if folder else "", code_path=code,
                          report_created=str(result.get("created", "")))
            rows = _report_rows(reg, repo_root / "docs" / "reports", report)
            link = s.get(PaperzooLink, paper.id) or s.scalar(select(PaperzooLink).where(
                PaperzooLink.name == reg.name))
            if link is None:
                s.add(PaperzooLink(paper_id=paper.id, **values, reports=[PaperzooReport(**r) for r in rows or []]))
                report.added += 1
                continue
            changed = link.paper_id != paper.id or any(getattr(link, k) != v for k, v in values.items())
            link.paper_id = paper.id
            for k, v in values.items():
                setattr(link, k, v)
            if (rows is not None and _sync_reports(link, rows)) or changed:
                report.updated += 1
            else:
                report.unchanged += 1
    return report


def _report_rows(reg, reports_dir: Path, report: IngestReport) -> list[dict] | None:
    """The ``paperzoo_reports`` values of every committed report of ``reg``'s recipes; None (keep the rows of the
    last good ingest), with the damaged or misfiled report named in ``report``, when one cannot be read."""
    from paperzoo import registry

    try:
        found, labels = registry.verdicts(reg, reports_dir), registry.verdict_labels(reg, reports_dir)
        created = {k: str(json.loads((v.report / "result.json").read_text()).get("created", ""))
                   for k, v in found.items()}
    except (ValueError, OSError) as e:
        report.bad(reg.name, str(e))
        return None
    return [dict(path=k, recipe=v.recipe, preset=v.preset, verdict=str(v.verdict), label=labels[k],
                 created=created[k]) for k, v in found.items()]


def _sync_reports(link: PaperzooLink, rows: list[dict]) -> bool:
    """Make ``link.reports`` hold exactly ``rows`` (by path); whether anything changed."""
    have = {r.path: r for r in link.reports}
    want = {r["path"]: r for r in rows}
    changed = False
    for path, row in have.items():
        if path not in want:
            link.reports.remove(row)
            changed = True
    for path, values in want.items():
        row = have.get(path)
        if row is None:
            link.reports.append(PaperzooReport(**values))
            changed = True
        elif any(getattr(row, k) != v for k, v in values.items()):
            for k, v in values.items():
                setattr(row, k, v)
            changed = True
    return changed
