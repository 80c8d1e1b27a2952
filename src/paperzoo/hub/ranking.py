"""Ranking: Hot, Top, New, Rising (the About page shows these formulas).

Points of a paper over a set of mentions:
    P = U + w_r * R
U = distinct accounts that mentioned it (one account posting 50 times counts once; accounts on the bot/ban list
never count), R = the sum over those accounts of the reposts of their most reposted post about it, w_r the repost
weight (default 0.25: a repost is a weaker signal than a post of one's own).

Hot (Hacker News' form, without HN's submitter vote since nobody submits here), over the last 30 days' mentions:
    hot = P^0.8 / (age_hours + 2)^1.8
age = hours since the paper's first mention in those 30 days (its arXiv date if it has none). Zero points score 0,
so papers nobody mentions follow the mentioned ones.
Top over a window (day, week, month, all): P of the mentions inside the window.
New: arXiv first-version date, newest first.
Rising: velocity between the last two mention snapshots, (P_last - P_before) / hours between them.
Ties always break by arXiv id, newest first (descending), so every ordering is deterministic.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

REPOST_WEIGHT = 0.25
POWER = 0.8  # exponent of the points
GRAVITY = 1.8  # exponent of the age
AGE_OFFSET_H = 2.0
HOT_SPAN = timedelta(days=30)
WINDOWS = {"day": timedelta(days=1), "week": timedelta(days=7), "month": timedelta(days=30), "all": None}


def points(paper_idx: np.ndarray, best_reposts: np.ndarray, n_papers: int,
           repost_weight: float = REPOST_WEIGHT) -> np.ndarray:
    """P per paper from one row per (paper, distinct account): ``paper_idx`` (rows,) int in [0, n_papers),
    ``best_reposts`` (rows,) the account's most reposted post about that paper. Returns (n_papers,) float."""
    paper_idx = np.asarray(paper_idx, dtype=np.int64)
    best_reposts = np.asarray(best_reposts, dtype=np.float64)
    _check_rows(paper_idx, best_reposts, n_papers)
    u = np.bincount(paper_idx, minlength=n_papers)  # U: distinct accounts
    r = np.bincount(paper_idx, weights=best_reposts, minlength=n_papers)  # R
    return u + repost_weight * r  # P = U + w_r R


def hot(p: np.ndarray, age_hours: np.ndarray, power: float = POWER, gravity: float = GRAVITY) -> np.ndarray:
    """hot = P^power / (age_hours + 2)^gravity, elementwise; negative ages (clock skew) count as 0."""
    p = np.asarray(p, dtype=np.float64)
    age = np.clip(np.asarray(age_hours, dtype=np.float64), 0.0, None)
    if p.shape != age.shape:
        raise ValueError(f"points and ages must have one shape, got {p.shape} and {age.shape}")
    return np.power(np.clip(p, 0.0, None), power) / np.power(age + AGE_OFFSET_H, gravity)


def velocity(p_last: np.ndarray, p_before: np.ndarray, hours: np.ndarray) -> np.ndarray:
    """Rising: (P_last - P_before) / hours between the snapshots; 0 where there is no earlier snapshot (hours <= 0)."""
    p_last, p_before, hours = (np.asarray(a, dtype=np.float64) for a in (p_last, p_before, hours))
    out = np.zeros_like(p_last)
    ok = hours > 0
    out[ok] = (p_last[ok] - p_before[ok]) / hours[ok]
    return out


def order(scores: np.ndarray, tie_keys: list[str]) -> np.ndarray:
    """Indices by score descending, ties by ``tie_keys`` descending (arXiv ids: newest first; deterministic)."""
    scores = np.asarray(scores, dtype=np.float64)
    if len(tie_keys) != len(scores):
        raise ValueError(f"one tie key per score expected, got {len(tie_keys)} keys for {len(scores)} scores")
    keys = np.asarray(tie_keys, dtype=object)
    tie_rank = np.argsort(np.argsort(keys, kind="stable"), kind="stable")
    return np.lexsort((-tie_rank, -scores))


def window_start(window: str, now: datetime) -> datetime | None:
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
    span = WINDOWS[window]
    return None if span is None else now - span


def age_hours(first_seen: np.ndarray, fallback: np.ndarray, now: float) -> np.ndarray:
    """Hours since each paper's first mention (epoch seconds), else its arXiv date, else 0; NaN marks missing."""
    first_seen, fallback = np.asarray(first_seen, dtype=np.float64), np.asarray(fallback, dtype=np.float64)
    t = np.where(np.isnan(first_seen), fallback, first_seen)
    return np.where(np.isnan(t), 0.0, (now - t) / 3600.0)


def _check_rows(paper_idx: np.ndarray, reposts: np.ndarray, n: int) -> None:
    if paper_idx.ndim != 1 or paper_idx.shape != reposts.shape:
        raise ValueError(f"paper_idx and best_reposts must be 1-D of one length, got {paper_idx.shape} and "
                         f"{reposts.shape}")
    if len(paper_idx) and (paper_idx.min() < 0 or paper_idx.max() >= n):
        raise ValueError(f"paper_idx must lie in [0, {n}), got {paper_idx.min()}..{paper_idx.max()}")
    if len(reposts) and reposts.min() < 0:
        raise ValueError("reposts must be >= 0")
