"""The MobileNetV2 bench runs and reports rows with ratios (small sizes here; the real run is `paperzoo bench`)."""

import pytest

from paperzoo.bench.mobilenetv2 import run


@pytest.mark.slow
def test_bench_rows(monkeypatch):
    monkeypatch.setenv("PAPERZOO_BENCH_QUICK", "1")
    rows, meta = run(sizes=(32,), batches=(1,), train_batch=2, train_size=32, width=0.35)
    names = [(r.name, r.case) for r in rows]
    assert names == [("mobilenetv2 inference", "eager, batch 1, 32x32"),
                     ("mobilenetv2 inference", "deployed, batch 1, 32x32"),
                     ("mobilenetv2 training fwd+bwd", "eager, batch 2, 32x32")]
    assert all(r.ratio is not None and r.ratio > 0 and r.flops > 0 for r in rows)
    assert rows[1].extra["max_abs_logit_diff_vs_hf"] < 1e-4
    assert "notes" in meta
