"""``paperzoo bench vatt`` in its quick mode: one row per keep rate, costs falling with the rate, MBS counted."""


from paperzoo.bench.vatt import KEEP_RATES, run


def test_quick_bench_rows(monkeypatch, one_thread):
    monkeypatch.setenv("PAPERZOO_BENCH_QUICK", "1")
    rows, meta = run(repeats=1)
    assert [r.name for r in rows] == [f"vatt train step keep-{k}" for k in KEEP_RATES]
    flops = [r.flops for r in rows]
    act = [r.extra["activation_mib"] for r in rows]
    assert flops == sorted(flops, reverse=True) and act == sorted(act, reverse=True)
    assert rows[0].peer_ms is None and all(r.peer_ms > 0 for r in rows[1:])  # the peer: the same model at keep 1
    mbs = meta["mbs_video_forward_counted"]
    assert mbs["keep-1.0"]["gflops"] > 500 and 0.4 < mbs["keep-0.5"]["ratio to keep 1"] < 0.5
