"""The IWS bench's peer (the official sequential ensemble) predicts what ours predicts; the quick bench runs."""

import pytest


@pytest.mark.slow
@pytest.mark.data("youtube-spam")
def test_quick_bench_rows(monkeypatch, one_thread):
    from paperzoo.bench.iws import run

    monkeypatch.setenv("PAPERZOO_BENCH_QUICK", "1")
    rows, meta = run()
    q, lat = rows
    # the same math in another order (fused BCE-with-logits vs sigmoid + BCELoss, Adam's rounding): 200 epochs
    # drift the probabilities apart by ~1e-3 (test_iws_expert checks 2e-5 agreement over 60 epochs)
    assert q.extra["max_abs_diff"] < 1e-2 and q.peer_ms > q.ours_ms
    assert lat.extra["under_1s"] and meta["n_lfs"] > 0 and meta["peak_rss_mb"] > 0
