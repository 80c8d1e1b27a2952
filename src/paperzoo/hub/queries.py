"""What the pages and the JSON API show, computed once for both: ranked views, a paper's mentions, activity feeds."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import Float, and_, func, literal, or_, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session, selectinload
from sqlalchemy.sql.functions import FunctionElement

from . import ranking
from .config import Settings
from .models import ListItem, Mention, MentionSnapshot, Note, Paper, PaperzooLink, ReadingList

VIEWS = ("hot", "new", "top", "rising")


class epoch(FunctionElement):
    """Seconds since 1970 of a stored (naive UTC) datetime, computed by the database."""

    type = Float()
    inherit_cache = True


@compiles(epoch, "sqlite")
def _epoch_sqlite(element, compiler, **kw):
    return f"((julianday({compiler.process(element.clauses, **kw)}) - 2440587.5) * 86400.0)"


@compiles(epoch, "postgresql")
def _epoch_pg(element, compiler, **kw):
    return f"CAST(EXTRACT(EPOCH FROM {compiler.process(element.clauses, **kw)}) AS DOUBLE PRECISION)"


@dataclass
class Ranked:
    paper_ids: np.ndarray  # (n,) in rank order
    scores: np.ndarray  # (n,)
    computed: float


class RankCache:
    """Ranked id lists per (view, window, category), recomputed after ``ttl`` seconds; one request computes a
    stale entry while the others asking for it wait for that result instead of computing it too."""

    def __init__(self, ttl: float) -> None:
        self.ttl, self._d, self._lock, self._key_locks = ttl, {}, threading.Lock(), {}

    def get(self, key, compute) -> Ranked:
        with self._lock:
            hit = self._d.get(key)
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        if hit is not None and time.monotonic() - hit.computed < self.ttl:
            return hit
        with key_lock:
            with self._lock:
                hit = self._d.get(key)
            if hit is not None and time.monotonic() - hit.computed < self.ttl:
                return hit  # computed by the request we waited for
            value = compute()
            value.computed = time.monotonic()
            with self._lock:
                self._d[key] = value
            return value

    def clear(self) -> None:
        with self._lock:
            self._d.clear()


def category_filter(cat: str):
    """Papers listing ``cat`` among their space-separated categories."""
    return (literal(" ") + Paper.categories + literal(" ")).like(f"% {cat} %")


def account_points(s: Session, settings: Settings, since: datetime | None, cat: str = "",
                   repost_weight: float = ranking.REPOST_WEIGHT, until: datetime | None = None,
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(paper ids, P, first-mention epoch) of every paper mentioned in [since, until] by a non-bot account."""
    q = select(Mention.paper_id, Mention.account, func.max(Mention.reposts), func.min(epoch(Mention.posted_at)))
    conds = []
    if since is not None:
        conds.append(Mention.posted_at >= since)
    if until is not None:
        conds.append(Mention.posted_at <= until)
    if settings.bots:
        conds.append(func.lower(Mention.account).not_in(sorted(settings.bots)))
    if cat:
        q = q.join(Paper, Paper.id == Mention.paper_id)
        conds.append(category_filter(cat))
    rows = s.execute(q.where(*conds).group_by(Mention.paper_id, Mention.account)).all()
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    arr = np.array([(r[0], r[2] or 0, r[3]) for r in rows], dtype=np.float64)  # (rows, 3)
    ids, idx = np.unique(arr[:, 0].astype(np.int64), return_inverse=True)
    p = ranking.points(idx, arr[:, 1], len(ids), repost_weight)
    first = np.full(len(ids), np.inf)
    np.minimum.at(first, idx, arr[:, 2])
    return ids, p, first


def _all_papers(s: Session, cat: str) -> tuple[np.ndarray, list[str], np.ndarray]:
    q = select(Paper.id, Paper.arxiv_id, epoch(Paper.published))
    if cat:
        q = q.where(category_filter(cat))
    rows = s.execute(q).all()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    published = np.array([np.nan if r[2] is None else r[2] for r in rows], dtype=np.float64)
    return ids, [r[1] for r in rows], published


def compute_ranking(s: Session, settings: Settings, view: str, window: str = "week", cat: str = "",
                    now: datetime | None = None) -> Ranked:
    now = now or datetime.now(UTC)
    if view == "hot":
        ids, keys, published = _all_papers(s, cat)
        m_ids, p, first = account_points(s, settings, now - ranking.HOT_SPAN, cat)
        pos = np.searchsorted(ids, m_ids) if len(ids) else np.zeros(0, np.int64)  # ids come sorted by primary key
        if len(ids) and not np.all(np.diff(ids) > 0):
            order_ = np.argsort(ids)
            ids, published, keys = ids[order_], published[order_], [keys[i] for i in order_]
            pos = np.searchsorted(ids, m_ids)
        pts, first_all = np.zeros(len(ids)), np.full(len(ids), np.nan)
        pts[pos], first_all[pos] = p, first
        scores = ranking.hot(pts, ranking.age_hours(first_all, published, now.timestamp()))
        o = ranking.order(scores, keys)
        return Ranked(ids[o], scores[o], 0.0)
    if view == "top":
        m_ids, p, _ = account_points(s, settings, ranking.window_start(window, now), cat)
        keys = _arxiv_ids(s, m_ids)
        o = ranking.order(p, keys)
        return Ranked(m_ids[o], p[o], 0.0)
    if view == "rising":
        return _rising(s, cat)
    if view == "new":
        q = select(Paper.id, epoch(Paper.published))
        if cat:
            q = q.where(category_filter(cat))
        rows = s.execute(q.order_by(Paper.published.desc().nulls_last(), Paper.arxiv_id.desc())).all()
        return Ranked(np.array([r[0] for r in rows], dtype=np.int64),
                      np.array([r[1] or 0.0 for r in rows], dtype=np.float64), 0.0)
    raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")


def _arxiv_ids(s: Session, ids: np.ndarray) -> list[str]:
    if not len(ids):
        return []
    got = dict(s.execute(select(Paper.id, Paper.arxiv_id).where(Paper.id.in_([int(i) for i in ids]))).all())
    return [got[int(i)] for i in ids]


def _rising(s: Session, cat: str) -> Ranked:
    rn = func.row_number().over(partition_by=MentionSnapshot.paper_id, order_by=MentionSnapshot.taken_at.desc())
    sub = select(MentionSnapshot.paper_id, MentionSnapshot.points, epoch(MentionSnapshot.taken_at).label("t"),
                 rn.label("rn")).subquery()
    q = select(sub.c.paper_id, sub.c.points, sub.c.t, sub.c.rn).where(sub.c.rn <= 2)
    if cat:
        q = q.join(Paper, Paper.id == sub.c.paper_id).where(category_filter(cat))
    rows = s.execute(q).all()
    if not rows:
        return Ranked(np.zeros(0, np.int64), np.zeros(0), 0.0)
    arr = np.array([(r[0], r[1], r[2], r[3]) for r in rows], dtype=np.float64)
    ids, idx = np.unique(arr[:, 0].astype(np.int64), return_inverse=True)
    last, before = np.zeros(len(ids)), np.zeros(len(ids))
    t_last, t_before = np.zeros(len(ids)), np.zeros(len(ids))
    one, two = arr[:, 3] == 1, arr[:, 3] == 2
    last[idx[one]], t_last[idx[one]] = arr[one, 1], arr[one, 2]
    before[idx[two]], t_before[idx[two]] = arr[two, 1], arr[two, 2]
    hours = np.where(np.isin(np.arange(len(ids)), idx[two]), (t_last - t_before) / 3600.0, 0.0)
    v = ranking.velocity(last, before, hours)
    keep = v > 0
    ids, v = ids[keep], v[keep]
    o = ranking.order(v, _arxiv_ids(s, ids))
    return Ranked(ids[o], v[o], 0.0)


def ranked_page(s: Session, settings: Settings, cache: RankCache, view: str, window: str, cat: str, page: int,
                now: datetime | None = None) -> tuple[list[tuple[Paper, float]], int]:
    """One page of a view: [(paper, score)], total count."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")
    ranking.window_start(window, datetime.now(UTC))  # validates the window
    r = cache.get((view, window if view == "top" else "", cat),
                  lambda: compute_ranking(s, settings, view, window, cat, now))
    size = settings.page_size
    chunk = r.paper_ids[(page - 1) * size: page * size]
    papers = load_papers(s, [int(i) for i in chunk])
    return [(papers[int(i)], float(sc)) for i, sc in zip(chunk, r.scores[(page - 1) * size: page * size],
                                                         strict=True) if int(i) in papers], len(r.paper_ids)


def load_papers(s: Session, ids: list[int]) -> dict[int, Paper]:
    if not ids:
        return {}
    rows = s.scalars(select(Paper).where(Paper.id.in_(ids))
                     .options(selectinload(Paper.link).selectinload(PaperzooLink.reports))).all()
    return {p.id: p for p in rows}


def mention_counts(s: Session, paper_ids: list[int], settings: Settings) -> dict[int, int]:
    """Distinct non-bot accounts that mentioned each paper (all time)."""
    if not paper_ids:
        return {}
    q = select(Mention.paper_id, func.count(func.distinct(Mention.account))).where(Mention.paper_id.in_(paper_ids))
    if settings.bots:
        q = q.where(func.lower(Mention.account).not_in(sorted(settings.bots)))
    return dict(s.execute(q.group_by(Mention.paper_id)).all())


def sparkline(s: Session, paper_id: int, settings: Settings, days: int = 30,
              now: datetime | None = None) -> list[int]:
    """Mentions per day over the last ``days`` days (oldest first)."""
    now = now or datetime.now(UTC)
    start = now - timedelta(days=days)
    q = select(epoch(Mention.posted_at)).where(Mention.paper_id == paper_id, Mention.posted_at >= start)
    if settings.bots:
        q = q.where(func.lower(Mention.account).not_in(sorted(settings.bots)))
    t = np.array(s.scalars(q).all(), dtype=np.float64)
    day = np.clip(((t - start.timestamp()) // 86400).astype(np.int64), 0, days - 1) if len(t) else t.astype(int)
    return np.bincount(day, minlength=days).tolist()


def sparkline_svg_points(counts: list[int], width: int = 120, height: int = 24) -> str:
    """The ``points`` attribute of an SVG polyline drawing ``counts``."""
    top = max(max(counts), 1)
    step = width / max(len(counts) - 1, 1)
    return " ".join(f"{i * step:.1f},{height - 1 - (c / top) * (height - 2):.1f}" for i, c in enumerate(counts))


def visible_notes(s: Session, paper_id: int, viewer_id: int | None) -> list[Note]:
    """Public notes on a paper, and the viewer's own (public or not)."""
    cond = Note.public.is_(True) if viewer_id is None else or_(Note.public.is_(True), Note.owner_id == viewer_id)
    return list(s.scalars(select(Note).where(Note.paper_id == paper_id, cond)
                          .options(selectinload(Note.owner)).order_by(Note.updated_at.desc())).all())


def feed_events(s: Session, followee_ids: list[int], limit: int, offset: int) -> list[tuple[str, datetime, object]]:
    """What the followed users did in public: papers added to public lists, public notes; newest first."""
    if not followee_ids:
        return []
    added = s.execute(select(ListItem, ReadingList).join(ReadingList, ReadingList.id == ListItem.list_id)
                      .where(ReadingList.owner_id.in_(followee_ids), ReadingList.public.is_(True))
                      .options(selectinload(ListItem.paper)).order_by(ListItem.added_at.desc())
                      .limit(limit + offset)).all()
    noted = s.scalars(select(Note).where(Note.owner_id.in_(followee_ids), Note.public.is_(True))
                      .options(selectinload(Note.paper), selectinload(Note.owner))
                      .order_by(Note.updated_at.desc()).limit(limit + offset)).all()
    events = [("added", item.added_at, (item, lst)) for item, lst in added] + [("noted", n.updated_at, n)
                                                                                for n in noted]
    events.sort(key=lambda e: e[1], reverse=True)
    return events[offset: offset + limit]


def implemented_papers(s: Session) -> list[tuple[PaperzooLink, Paper]]:
    return list(s.execute(select(PaperzooLink, Paper).join(Paper, Paper.id == PaperzooLink.paper_id)
                          .order_by(PaperzooLink.name)).all())


def public_lists_of(s: Session, owner_id: int, viewer_id: int | None, limit: int = 50,
                    offset: int = 0) -> list[ReadingList]:
    """The owner's public lists (and the private ones too when the owner is looking)."""
    cond = ReadingList.public.is_(True) if viewer_id != owner_id else and_(literal(True))
    return list(s.scalars(select(ReadingList).where(ReadingList.owner_id == owner_id, cond)
                          .order_by(ReadingList.updated_at.desc(), ReadingList.id.desc())
                          .limit(limit).offset(offset)).all())
