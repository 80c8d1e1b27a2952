"""Recommendations per reading list, as arxiv-sanity-lite makes them but precomputed: tf-idf over title + authors +
abstract, one linear SVM per list (its papers positive, every other paper negative, classes balanced), the
highest-scoring papers not in the list stored in ``recommendations``. Pages only read that table; the SVM is
trained by ``paperzoo hub recommend`` and in the background after a list changes, never inside a request.

Vectoriser: 1-2-grams, 20k features, sublinear tf; min_df 5 / max_df 0.1 (arxiv-sanity-lite's values) once the
corpus has 1,000 papers, min_df 1 / max_df 1.0 below that (a small hub's rare words would all be cut). SVM: C 0.01.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import delete, func, select
from sqlalchemy.orm import sessionmaker

from .config import Settings
from .db import transaction
from .models import ListItem, Paper, ReadingList, Recommendation

TOP = 30
SMALL_CORPUS = 1000
_lock = threading.Lock()
_memo: dict[str, Features] = {}


@dataclass
class Features:
    stamp: tuple[int, int]  # (paper count, newest ingest time) the matrix was built from
    ids: np.ndarray  # (papers,) paper ids, row order of x
    x: object  # scipy.sparse CSR (papers, features)


def _stamp(s) -> tuple[int, int]:
    n, t = s.execute(select(func.count(Paper.id), func.max(Paper.ingested_at))).one()
    return int(n), int(t.timestamp()) if t else 0


def build_features(factory: sessionmaker) -> Features:
    from sklearn.feature_extraction.text import TfidfVectorizer

    with factory() as s:
        stamp = _stamp(s)
        rows = s.execute(select(Paper.id, Paper.title, Paper.authors_text, Paper.abstract).order_by(Paper.id)).all()
    small = len(rows) < SMALL_CORPUS
    vec = TfidfVectorizer(ngram_range=(1, 2), max_features=20000, sublinear_tf=True, strip_accents="unicode",
                          min_df=1 if small else 5, max_df=1.0 if small else 0.1, dtype=np.float32)
    docs = [f"{r[1]} {r[2]} {r[3]}" for r in rows]
    x = vec.fit_transform(docs) if rows else None
    return Features(stamp, np.array([r[0] for r in rows], dtype=np.int64), x)


def features(factory: sessionmaker, settings: Settings) -> Features:
    """The tf-idf matrix, rebuilt only when papers were added or changed since it was built."""
    key = settings.db_url
    with factory() as s:
        stamp = _stamp(s)
    with _lock:
        f = _memo.get(key)
        if f is None or f.stamp != stamp:
            f = _memo[key] = build_features(factory)
    return f


def scores_for(f: Features, positive_ids: list[int]) -> np.ndarray:
    """SVM decision values of every paper for one list (``positive_ids`` its papers). (papers,) float."""
    from sklearn.svm import LinearSVC

    y = np.isin(f.ids, positive_ids).astype(np.int64)
    if y.sum() == 0 or y.sum() == len(y):
        return np.zeros(len(y))
    clf = LinearSVC(class_weight="balanced", C=0.01, tol=1e-6, max_iter=10000)
    clf.fit(f.x, y)
    return clf.decision_function(f.x)


def recommend_list(factory: sessionmaker, settings: Settings, list_id: int, top: int = TOP) -> int:
    """Recompute and store one list's recommendations; returns how many were stored."""
    f = features(factory, settings)
    with factory() as s:
        positives = list(s.scalars(select(ListItem.paper_id).where(ListItem.list_id == list_id)).all())
    picked: list[tuple[int, float]] = []
    if positives and f.x is not None:
        sc = scores_for(f, positives)
        candidates = ~np.isin(f.ids, positives)
        idx = np.flatnonzero(candidates)
        best = idx[np.lexsort((f.ids[idx], -sc[idx]))][:top]  # score descending, ties by paper id
        picked = [(int(f.ids[i]), float(sc[i])) for i in best]
    now = datetime.now(UTC)
    with transaction(factory) as s:
        if s.get(ReadingList, list_id) is None:
            return 0
        s.execute(delete(Recommendation).where(Recommendation.list_id == list_id))
        s.add_all([Recommendation(list_id=list_id, rank=r, paper_id=pid, score=sc, computed_at=now)
                   for r, (pid, sc) in enumerate(picked)])
    return len(picked)


def recommend_all(factory: sessionmaker, settings: Settings) -> dict[str, int]:
    with factory() as s:
        ids = list(s.scalars(select(ReadingList.id)).all())
    stored = sum(recommend_list(factory, settings, i) for i in ids)
    return {"lists": len(ids), "recommendations": stored}


if __name__ == "__main__":  # python -m paperzoo.hub.recommend: recompute every list of the configured hub
    from .config import load_settings
    from .db import make_engine, session_factory

    st = load_settings()
    print(json.dumps(recommend_all(session_factory(make_engine(st.db_url)), st)))
