"""arXiv metadata: the API's Atom feed and the metadata snapshot's JSON lines, into ``papers``.

Atom (``export.arxiv.org/api/query``): ``entry/id`` is the versioned abs link, ``published`` is v1's date,
``updated`` the latest version's, ``arxiv:primary_category``, ``category/@term``, ``arxiv:doi``, ``arxiv:comment``,
``arxiv:journal_ref``. Snapshot lines: ``id``, ``authors`` (one string) or ``authors_parsed`` ([last, first, suffix]),
``title``, ``abstract``, ``categories`` (space-separated), ``versions`` ([{version: "v1", created: RFC 2822}]),
``update_date``, ``doi``, ``comments``, ``journal-ref``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload, sessionmaker

from ..db import transaction
from ..ids import parse_arxiv_id
from ..models import Author, Paper, PaperAuthor, PaperVersion
from . import IngestReport, batched

ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV = "{http://arxiv.org/schemas/atom}"


@dataclass
class ArxivRecord:
    arxiv_id: str
    version: int
    title: str
    authors: list[str]
    abstract: str
    categories: list[str]
    published: datetime | None
    updated: datetime | None
    doi: str = ""
    comment: str = ""
    journal_ref: str = ""
    versions: list[tuple[int, datetime | None]] = field(default_factory=list)


def _clean(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _iso(text: str | None) -> datetime | None:
    if not text:
        return None
    d = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def _check(rec: ArxivRecord) -> ArxivRecord:
    if not rec.title:
        raise ValueError("empty title")
    if not rec.authors:
        raise ValueError("no authors")
    if not rec.categories:
        raise ValueError("no categories")
    return rec


def parse_atom(text: str) -> tuple[list[ArxivRecord], IngestReport]:
    """Records of an arXiv API Atom feed, and the report of entries that could not be read."""
    report = IngestReport("arxiv")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ValueError(f"not an Atom feed (XML parse error: {e})") from None
    if root.tag != f"{ATOM}feed":
        raise ValueError(f"not an Atom feed: root element is {root.tag!r}, expected {ATOM}feed")
    out = []
    for n, entry in enumerate(root.iter(f"{ATOM}entry")):
        where = f"entry {n + 1}"
        try:
            raw_id = _clean(entry.findtext(f"{ATOM}id"))
            where = f"entry {n + 1} ({raw_id or 'no id'})"
            ident, version = parse_arxiv_id(raw_id)
            cats = [c.get("term", "") for c in entry.findall(f"{ATOM}category") if c.get("term")]
            primary_el = entry.find(f"{ARXIV}primary_category")
            primary = primary_el.get("term", "") if primary_el is not None else ""
            if primary and primary in cats:
                cats.remove(primary)
            published, updated = _iso(entry.findtext(f"{ATOM}published")), _iso(entry.findtext(f"{ATOM}updated"))
            rec = ArxivRecord(
                arxiv_id=ident, version=version or 1, title=_clean(entry.findtext(f"{ATOM}title")),
                authors=[_clean(a.findtext(f"{ATOM}name")) for a in entry.findall(f"{ATOM}author")
                         if _clean(a.findtext(f"{ATOM}name"))],
                abstract=_clean(entry.findtext(f"{ATOM}summary")),
                categories=([primary] if primary else []) + cats, published=published, updated=updated or published,
                doi=_clean(entry.findtext(f"{ARXIV}doi")), comment=_clean(entry.findtext(f"{ARXIV}comment")),
                journal_ref=_clean(entry.findtext(f"{ARXIV}journal_ref")))
            rec.versions = [(1, published)] + ([(rec.version, updated)] if rec.version > 1 else [])
            out.append(_check(rec))
        except ValueError as e:
            report.bad(where, str(e))
    return out, report


def _snapshot_authors(d: dict) -> list[str]:
    parsed = d.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        names = []
        for a in parsed:
            if not isinstance(a, list) or not a:
                raise ValueError("authors_parsed entries must be [last, first, suffix] lists")
            last, first, suffix = (list(a) + ["", "", ""])[:3]
            names.append(_clean(" ".join(x for x in (first, last, suffix) if x)))
        return [n for n in names if n]
    text = _clean(d.get("authors"))
    return [a.strip() for a in re.split(r",\s*|\s+and\s+", text) if a.strip()]


def parse_snapshot(text: str) -> tuple[list[ArxivRecord], IngestReport]:
    """Records of arXiv metadata snapshot JSON lines, and the report of lines that could not be read."""
    report = IngestReport("arxiv")
    out = []
    for n, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        where = f"line {n + 1}"
        try:
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"not JSON ({e.msg})") from None
            if not isinstance(d, dict):
                raise ValueError("a line must be a JSON object")
            where = f"line {n + 1} ({d.get('id', 'no id')})"
            ident, version = parse_arxiv_id(str(d.get("id", "")))
            versions = []
            for v in d.get("versions") or []:
                m = re.fullmatch(r"v(\d+)", str(v.get("version", "")) if isinstance(v, dict) else "")
                if not m:
                    raise ValueError(f"versions entries must look like {{'version': 'v1', 'created': ...}}, got {v!r}")
                created = v.get("created")
                versions.append((int(m.group(1)), parsedate_to_datetime(created).astimezone(UTC) if created else None))
            versions.sort(key=lambda t: t[0])
            latest = versions[-1][0] if versions else (version or 1)
            update_date = d.get("update_date")
            updated = (versions[-1][1] if versions and versions[-1][1] else
                       datetime.fromisoformat(update_date).replace(tzinfo=UTC) if update_date else None)
            rec = ArxivRecord(
                arxiv_id=ident, version=latest, title=_clean(d.get("title")), authors=_snapshot_authors(d),
                abstract=_clean(d.get("abstract")), categories=str(d.get("categories") or "").split(),
                published=versions[0][1] if versions else updated, updated=updated, doi=_clean(d.get("doi")),
                comment=_clean(d.get("comments")), journal_ref=_clean(d.get("journal-ref")), versions=versions)
            out.append(_check(rec))
        except (ValueError, TypeError) as e:
            report.bad(where, str(e))
    return out, report


def parse(text: str) -> tuple[list[ArxivRecord], IngestReport]:
    """Atom if the text is XML, snapshot JSON lines otherwise."""
    return parse_atom(text) if text.lstrip().startswith("<") else parse_snapshot(text)


def _fields(rec: ArxivRecord) -> tuple:
    return (rec.version, rec.title, ", ".join(rec.authors), rec.abstract, " ".join(rec.categories),
            rec.published, rec.updated, rec.doi, rec.comment, rec.journal_ref)


def _paper_fields(p: Paper) -> tuple:
    return (p.version, p.title, p.authors_text, p.abstract, p.categories, p.published, p.updated, p.doi, p.comment,
            p.journal_ref)


def _authors(s: Session, names: list[str]) -> dict[str, Author]:
    have = {a.name: a for a in s.scalars(select(Author).where(Author.name.in_(set(names)))).all()}
    for name in dict.fromkeys(names):
        if name not in have:
            have[name] = Author(name=name)
            s.add(have[name])
    s.flush()
    return have


def _apply(s: Session, p: Paper, rec: ArxivRecord, authors: dict[str, Author]) -> None:
    (p.version, p.title, p.authors_text, p.abstract, p.categories, p.published, p.updated, p.doi, p.comment,
     p.journal_ref) = _fields(rec)
    p.primary_category = rec.categories[0]
    p.authors = [PaperAuthor(position=i, author_id=authors[a].id) for i, a in enumerate(dict.fromkeys(rec.authors))]
    have = {v.version: v for v in p.versions}
    for v, created in rec.versions:
        if v not in have:
            p.versions.append(PaperVersion(version=v, created=created))
        elif created is not None and have[v].created != created:
            have[v].created = created


def upsert(factory: sessionmaker, records: list[ArxivRecord], report: IngestReport | None = None,
           sample: bool = False, batch: int = 500) -> IngestReport:
    """Insert new papers, update those with a newer version (or corrected fields), leave the rest untouched."""
    report = report or IngestReport("arxiv")
    latest: dict[str, ArxivRecord] = {}
    for rec in records:  # the same paper twice in one input: keep its newest version
        if rec.arxiv_id not in latest or rec.version >= latest[rec.arxiv_id].version:
            latest[rec.arxiv_id] = rec
    for chunk in batched(list(latest.values()), batch):
        with transaction(factory) as s:
            have = {p.arxiv_id: p for p in s.scalars(
                select(Paper).where(Paper.arxiv_id.in_([r.arxiv_id for r in chunk]))
                .options(selectinload(Paper.authors), selectinload(Paper.versions))).all()}
            authors = _authors(s, [a for r in chunk for a in r.authors])
            for rec in chunk:
                p = have.get(rec.arxiv_id)
                if p is None:
                    p = Paper(arxiv_id=rec.arxiv_id, sample=sample)
                    s.add(p)
                    _apply(s, p, rec, authors)
                    report.added += 1
                elif rec.version < p.version or _fields(rec) == _paper_fields(p):
                    report.unchanged += 1
                else:
                    if p.version == 0:  # a placeholder: its metadata now comes from this input
                        p.sample = sample
                    _apply(s, p, rec, authors)
                    report.updated += 1
    return report
