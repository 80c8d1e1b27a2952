"""Ranking formulas: monotone in mentions, decaying with age, zero for zero mentions, deterministic ties,
one account counted once, bots never, reposts weighted."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from paperzoo.hub import ranking


def test_points_count_distinct_accounts_and_weight_reposts():
    # rows are (paper, distinct account): paper 0 has 3 accounts, paper 1 one account with 8 reposts
    p = ranking.points(np.array([0, 0, 0, 1]), np.array([0, 0, 0, 8]), 3, repost_weight=0.25)
    assert p.tolist() == [3.0, 1.0 + 0.25 * 8, 0.0]


def test_hot_is_monotone_in_points_and_decays_with_age():
    pts = np.arange(0, 50, dtype=float)
    h = ranking.hot(pts, np.full(50, 10.0))
    assert h[0] == 0.0 and np.all(np.diff(h) > 0)
    ages = np.linspace(0, 500, 50)
    h = ranking.hot(np.full(50, 10.0), ages)
    assert np.all(np.diff(h) < 0)
    # the formula itself: P^0.8 / (age + 2)^1.8
    assert ranking.hot(np.array([5.0]), np.array([3.0]))[0] == pytest.approx(5 ** 0.8 / 5 ** 1.8)


def test_order_breaks_ties_by_arxiv_id_newest_first():
    o = ranking.order(np.array([1.0, 2.0, 1.0, 1.0]), ["2101.00001", "1901.00001", "2301.00001", "0704.0001"])
    assert o.tolist() == [1, 2, 0, 3]
    assert ranking.order(np.array([1.0, 1.0]), ["b", "a"]).tolist() == ranking.order(np.array([1.0, 1.0]),
                                                                                     ["b", "a"]).tolist()


def test_velocity_is_zero_without_an_earlier_snapshot():
    v = ranking.velocity(np.array([10.0, 10.0]), np.array([4.0, 0.0]), np.array([3.0, 0.0]))
    assert v.tolist() == [2.0, 0.0]


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        ranking.points(np.array([0, 5]), np.array([0, 0]), 2)
    with pytest.raises(ValueError, match="window must be one of"):
        ranking.window_start("year", datetime.now(UTC))
    with pytest.raises(ValueError, match="one shape"):
        ranking.hot(np.ones(2), np.ones(3))


# ---- the same rules through the database ----

_POSTS = iter(range(10**9))


def _mention(s, paper_id, account, when, reposts=0):
    from paperzoo.hub.models import Mention

    s.add(Mention(source="test", post_id=f"p{next(_POSTS)}", account=account, posted_at=when, reposts=reposts,
                  paper_id=paper_id))


def _ids(factory):
    from sqlalchemy import select

    from paperzoo.hub.models import Paper

    with factory() as s:
        return dict(s.execute(select(Paper.arxiv_id, Paper.id)).all())


def test_views_in_the_database(factory, settings, backend):
    from hub_helpers import seed_papers

    from paperzoo.hub.db import transaction
    from paperzoo.hub.queries import compute_ranking

    a, b, c, d = seed_papers(factory, 4)
    ids = _ids(factory)
    now = datetime.now(UTC)
    with transaction(factory) as s:
        for k in range(50):  # one account posting 50 times about a: counts once
            _mention(s, ids[a], "spammer", now - timedelta(hours=1, minutes=k))
        for k in range(3):  # three accounts about b
            _mention(s, ids[b], f"reader{k}", now - timedelta(hours=1))
        for k in range(6):  # six accounts about c, but all of them bots
            _mention(s, ids[c], f"bot{k}", now - timedelta(hours=1))
    with factory() as s:
        from dataclasses import replace

        st = replace(settings, bots=frozenset(f"bot{k}" for k in range(6)))
        hot = compute_ranking(s, st, "hot", now=now)
        inv = {v: k for k, v in ids.items()}
        order = [inv[int(i)] for i in hot.paper_ids]
        assert order[:2] == [b, a]  # 3 accounts beat 1 account's 50 posts
        assert set(order[2:]) == {c, d}  # the bots' paper scores 0 like the unmentioned one
        assert order[2:] == sorted(order[2:], reverse=True)  # zero scores tie: newest id first
        top = compute_ranking(s, st, "top", "day", now=now)
        assert [inv[int(i)] for i in top.paper_ids] == [b, a] and top.scores.tolist() == [3.0, 1.0]
        top_all = compute_ranking(s, settings, "top", "all", now=now)  # without the bot list c leads
        assert inv[int(top_all.paper_ids[0])] == c
        assert compute_ranking(s, st, "top", "day", cat="cs.CV", now=now).paper_ids.tolist() == [ids[b]]
        new = compute_ranking(s, st, "new", now=now)
        assert [inv[int(i)] for i in new.paper_ids] == [d, c, b, a]


def test_rising_is_the_velocity_between_the_last_two_snapshots(factory, settings):
    from hub_helpers import seed_papers

    from paperzoo.hub.db import transaction
    from paperzoo.hub.ingest.mentions import snapshot
    from paperzoo.hub.queries import compute_ranking

    a, b = seed_papers(factory, 2)
    ids = _ids(factory)
    now = datetime.now(UTC)
    with transaction(factory) as s:
        for k in range(5):
            _mention(s, ids[a], f"r{k}", now - timedelta(hours=30))
        _mention(s, ids[b], "x", now - timedelta(hours=30))
    snapshot(factory, settings, now - timedelta(hours=10))
    with transaction(factory) as s:
        for k in range(4):
            _mention(s, ids[b], f"late{k}", now - timedelta(hours=2))
    snapshot(factory, settings, now)
    with factory() as s:
        r = compute_ranking(s, settings, "rising", now=now)
    assert r.paper_ids.tolist() == [ids[b]]  # a did not move, b gained 4 points in 10 hours
    assert r.scores.tolist() == pytest.approx([0.4])
