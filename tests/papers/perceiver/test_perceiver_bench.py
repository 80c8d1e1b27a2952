"""The Perceiver bench: slope fit, similar model sizes, a short scaling run and the budget stop."""

import math

from paperzoo.bench import perceiver as bench


def test_slope_is_nan_below_two_points():
    assert abs(bench._slope([1024, 2048], [1.0, 4.0]) - 2) < 1e-9
    assert math.isnan(bench._slope([1], [1.0]))


def test_models_have_similar_size_and_scaling_rows():
    models = bench.build_scaling_models()
    n = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    assert abs(n["perceiver"] - n["transformer"]) / n["transformer"] < 0.15
    rows, meta = bench.scaling(lengths=(32, 64), repeats=1, budget_s=1e-9, memory=False)
    assert [r.extra["length"] for r in rows] == [32, 64]
    assert rows[0].peer == "transformer" and rows[1].peer_ms is None  # stopped by the (tiny) budget
    assert meta["transformer_stopped_at"] == 64 and meta["params"] == n


def test_flop_slopes_linear_vs_quadratic():
    meta = bench.flop_scaling(lengths=(4096, 16384, 65536))
    assert meta["perceiver_flop_slope_4k_64k"] <= 1.0
    assert meta["transformer_flop_slope_4k_64k"] >= 1.7
