"""Social mentions: an export file (JSON lines or CSV) or a source adapter (Bluesky, Mastodon), into ``mentions``.

A record: ``source``, ``post_id``, ``account``, ``posted_at`` (ISO 8601), ``reposts``, ``likes``, ``url``, and the
paper either as ``paper`` (an arXiv id or link) or found in ``text`` (arxiv.org/abs|pdf links, ``arXiv:`` ids).
A post linking two papers is two rows. A paper the hub has no metadata for yet gets a placeholder row that
``hub ingest arxiv`` fills in later. Counts of a post seen again are updated; nothing else about it changes.
After a run that changed anything, every mentioned paper's points are snapshotted (Rising compares snapshots).
"""

from __future__ import annotations

import csv
import io
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import unescape

from sqlalchemy import select, tuple_
from sqlalchemy.orm import sessionmaker

from .. import ranking
from ..config import Settings
from ..db import transaction
from ..ids import find_arxiv_ids, normalize_arxiv_id
from ..models import Mention, MentionSnapshot, Paper
from . import IngestReport, batched

FIELDS = ("source", "post_id", "account", "posted_at", "reposts", "likes", "url", "paper", "text")


@dataclass(frozen=True)
class MentionRecord:
    source: str
    post_id: str
    account: str
    posted_at: datetime
    arxiv_ids: tuple[str, ...]
    reposts: int = 0
    likes: int = 0
    url: str = ""


def _count(v, name: str) -> int:
    if v in (None, ""):
        return 0
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a whole number >= 0, got {v!r}") from None
    if n < 0:
        raise ValueError(f"{name} must be >= 0, got {n}")
    return n


def record_from_dict(d: dict) -> MentionRecord:
    """One export row as a record; a row missing a field or linking no arXiv paper raises ``ValueError``."""
    for key in ("source", "post_id", "account", "posted_at"):
        if not str(d.get(key) or "").strip():
            raise ValueError(f"missing {key!r} (a row needs {', '.join(FIELDS[:4])} and a paper or text)")
    try:
        posted = datetime.fromisoformat(str(d["posted_at"]).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"posted_at must be ISO 8601 (2026-01-31T12:00:00Z), got {d['posted_at']!r}") from None
    posted = posted if posted.tzinfo else posted.replace(tzinfo=UTC)
    ids = [normalize_arxiv_id(str(d["paper"]))] if str(d.get("paper") or "").strip() else []
    ids += find_arxiv_ids(str(d.get("text") or "")) + find_arxiv_ids(str(d.get("url_linked") or ""))
    if not ids:
        raise ValueError("links no arXiv paper (no 'paper' field and no arxiv.org link or arXiv: id in 'text')")
    return MentionRecord(source=str(d["source"]).strip().lower()[:40], post_id=str(d["post_id"]).strip()[:300],
                         account=str(d["account"]).strip().lower()[:300], posted_at=posted,
                         arxiv_ids=tuple(dict.fromkeys(ids)), reposts=_count(d.get("reposts"), "reposts"),
                         likes=_count(d.get("likes"), "likes"), url=str(d.get("url") or "")[:2000])


def parse_export(text: str) -> tuple[list[MentionRecord], IngestReport]:
    """Records of a JSON-lines or CSV export (CSV when the first line has a comma and does not start with '{')."""
    report = IngestReport("mentions")
    first = text.lstrip().split("\n", 1)[0]
    if first.startswith("{") or not first:
        rows = []
        for n, line in enumerate(text.splitlines()):
            if line.strip():
                try:
                    d = json.loads(line)
                    rows.append((f"line {n + 1}", d if isinstance(d, dict) else None))
                except json.JSONDecodeError as e:
                    rows.append((f"line {n + 1}", f"not JSON ({e.msg})"))
    else:
        reader = csv.DictReader(io.StringIO(text))
        missing = {"source", "post_id", "account", "posted_at"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"CSV header lacks {sorted(missing)}; expected columns {', '.join(FIELDS)}")
        rows = [(f"row {n + 2}", d) for n, d in enumerate(reader)]
    out = []
    for where, d in rows:
        if not isinstance(d, dict):
            report.bad(where, d if isinstance(d, str) else "a line must be a JSON object")
            continue
        try:
            out.append(record_from_dict(d))
        except ValueError as e:
            report.bad(where, str(e))
    return out, report


# ---- source adapters: public search APIs, through an injectable HTTP getter (recorded responses in tests) ----

GetJson = Callable[[str, dict], dict | list]


def http_get_json(url: str, params: dict, timeout: float = 30.0) -> dict | list:
    full = url + ("?" + urllib.parse.urlencode(params) if params else "")
    req = urllib.request.Request(full, headers={"User-Agent": "paperzoo-hub", "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 (https URLs of the adapters)
        return json.loads(r.read().decode("utf-8"))


class Bluesky:
    """``app.bsky.feed.searchPosts`` of the public AppView: posts matching ``query``, paged by ``cursor``."""

    name = "bluesky"
    url = "https://public.api.bsky.app/xrpc/app.bsky.feed.searchPosts"

    def __init__(self, query: str = "arxiv.org", per_page: int = 100) -> None:
        self.query, self.per_page = query, per_page

    def fetch(self, get: GetJson, max_pages: int = 5) -> Iterable[dict]:
        cursor = None
        for _ in range(max_pages):
            params = {"q": self.query, "limit": self.per_page, "sort": "latest"}
            if cursor:
                params["cursor"] = cursor
            page = get(self.url, params)
            for post in page.get("posts", []):
                yield self.to_row(post)
            cursor = page.get("cursor")
            if not cursor or not page.get("posts"):
                return

    @staticmethod
    def to_row(post: dict) -> dict:
        record = post.get("record") or {}
        links = [f.get("uri", "") for facet in record.get("facets") or [] for f in facet.get("features") or []
                 if f.get("$type") == "app.bsky.richtext.facet#link"]
        external = ((record.get("embed") or {}).get("external") or {}).get("uri", "")
        uri = post.get("uri", "")
        handle = (post.get("author") or {}).get("handle", "")
        rkey = uri.rsplit("/", 1)[-1] if uri else ""
        return {"source": "bluesky", "post_id": uri, "account": handle,
                "posted_at": record.get("createdAt") or post.get("indexedAt"),
                "reposts": post.get("repostCount", 0) + post.get("quoteCount", 0), "likes": post.get("likeCount", 0),
                "url": f"https://bsky.app/profile/{handle}/post/{rkey}" if handle and rkey else "",
                "text": " ".join([record.get("text", ""), *links, external])}


class Mastodon:
    """A Mastodon instance's public hashtag timeline ``/api/v1/timelines/tag/TAG``, paged by ``max_id``."""

    name = "mastodon"

    def __init__(self, instance: str = "https://mastodon.social", tag: str = "arxiv", per_page: int = 40) -> None:
        if not re.fullmatch(r"https://[A-Za-z0-9.\-]+", instance):
            raise ValueError(f"instance must be an https origin like https://mastodon.social, got {instance!r}")
        self.url = f"{instance}/api/v1/timelines/tag/{urllib.parse.quote(tag)}"
        self.per_page = per_page

    def fetch(self, get: GetJson, max_pages: int = 5) -> Iterable[dict]:
        max_id = None
        for _ in range(max_pages):
            params = {"limit": self.per_page}
            if max_id:
                params["max_id"] = max_id
            statuses = get(self.url, params)
            if not statuses:
                return
            for st in statuses:
                yield self.to_row(st)
            max_id = statuses[-1].get("id")

    @staticmethod
    def to_row(st: dict) -> dict:
        text = unescape(re.sub(r"<[^>]+>", " ", st.get("content") or ""))
        hrefs = re.findall(r'href="([^"]+)"', st.get("content") or "")
        card = (st.get("card") or {}).get("url", "")
        return {"source": "mastodon", "post_id": st.get("uri") or st.get("url") or str(st.get("id", "")),
                "account": (st.get("account") or {}).get("acct", ""), "posted_at": st.get("created_at"),
                "reposts": st.get("reblogs_count", 0), "likes": st.get("favourites_count", 0),
                "url": st.get("url") or "", "text": " ".join([text, *map(unescape, hrefs), card])}


ADAPTERS = {"bluesky": Bluesky, "mastodon": Mastodon}


def fetch_from(adapter, get: GetJson = http_get_json, max_pages: int = 5) -> tuple[list[MentionRecord],
                                                                                     IngestReport]:
    """Records from a source adapter; posts that link no arXiv paper are not mentions and are left out silently,
    posts that cannot be read are reported."""
    report = IngestReport(f"mentions ({adapter.name})")
    out = []
    for n, row in enumerate(adapter.fetch(get, max_pages=max_pages)):
        if not find_arxiv_ids(row.get("text", "")):
            continue
        try:
            out.append(record_from_dict(row))
        except ValueError as e:
            report.bad(f"post {n + 1} ({row.get('post_id', '?')})", str(e))
    return out, report


# ---- writing ----

def upsert(factory: sessionmaker, settings: Settings, records: list[MentionRecord], report: IngestReport | None = None,
           sample: bool = False, batch: int = 1000, snapshot_at: datetime | None = None) -> IngestReport:
    report = report or IngestReport("mentions")
    rows = {(r.source, r.post_id, a): r for r in records for a in r.arxiv_ids}  # later duplicates win
    for chunk in batched(list(rows.items()), batch):
        with transaction(factory) as s:
            ids = sorted({a for (_, _, a), _ in chunk})
            papers = dict(s.execute(select(Paper.arxiv_id, Paper.id).where(Paper.arxiv_id.in_(ids))).all())
            for a in ids:
                if a not in papers:  # placeholder until its metadata is ingested
                    p = Paper(arxiv_id=a, sample=sample)
                    s.add(p)
                    s.flush()
                    papers[a] = p.id
            keys = [(src, post, papers[a]) for (src, post, a), _ in chunk]
            have = {(m.source, m.post_id, m.paper_id): m for m in s.scalars(
                select(Mention).where(tuple_(Mention.source, Mention.post_id, Mention.paper_id).in_(keys))).all()}
            for key, ((_, _, _), r) in zip(keys, chunk, strict=True):
                m = have.get(key)
                if m is None:
                    s.add(Mention(source=r.source, post_id=r.post_id, account=r.account, posted_at=r.posted_at,
                                  reposts=r.reposts, likes=r.likes, url=r.url, paper_id=key[2], sample=sample))
                    report.added += 1
                elif (m.reposts, m.likes) != (r.reposts, r.likes):
                    m.reposts, m.likes = r.reposts, r.likes
                    report.updated += 1
                else:
                    report.unchanged += 1
    if report.added or report.updated:
        snapshot(factory, settings, snapshot_at)
    return report


def snapshot(factory: sessionmaker, settings: Settings, at: datetime | None = None) -> int:
    """Record every mentioned paper's points (last 30 days' mentions up to ``at``) at ``at`` (default now)."""
    from ..queries import account_points

    at = at or datetime.now(UTC)
    with transaction(factory) as s:
        ids, p, _ = account_points(s, settings, at - ranking.HOT_SPAN, until=at)
        s.add_all([MentionSnapshot(paper_id=int(i), taken_at=at, points=float(v)) for i, v in zip(ids, p,
                                                                                                  strict=True)])
    return len(ids)


def shift_to(records: list[MentionRecord], end: datetime) -> list[MentionRecord]:
    """The same records moved in time so that the newest is at ``end`` (for the bundled sample)."""
    if not records:
        return records
    delta = end - max(r.posted_at for r in records)
    return [MentionRecord(r.source, r.post_id, r.account, r.posted_at + delta, r.arxiv_ids, r.reposts, r.likes, r.url)
            for r in records]


def ingest_sample(factory: sessionmaker, settings: Settings, records: list[MentionRecord],
                  now: datetime | None = None, split_hours: float = 12.0) -> IngestReport:
    """The bundled sample, shifted to end now, in two passes (older than ``split_hours``, then the rest), each
    followed by a snapshot, so that Rising has two snapshots to compare. Posts already there are left alone."""
    now = now or datetime.now(UTC)
    with factory() as s:
        if s.scalar(select(Mention.id).where(Mention.sample.is_(True)).limit(1)) is not None:
            rep = IngestReport("mentions (bundled sample)")
            rep.unchanged = sum(len(r.arxiv_ids) for r in records)
            return rep
    shifted = shift_to(records, now)
    cut = now - timedelta(hours=split_hours)
    report = IngestReport("mentions (bundled sample)")
    upsert(factory, settings, [r for r in shifted if r.posted_at <= cut], report, sample=True, snapshot_at=cut)
    upsert(factory, settings, [r for r in shifted if r.posted_at > cut], report, sample=True, snapshot_at=now)
    return report
