"""``paperzoo bench transformer-mods`` on the tiny model, one timed call per row: the rows it writes."""

import pytest

from paperzoo.bench.transformer_mods import run

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rows_compare_each_variant_with_the_baseline_at_counted_flops():
    rows, meta = run(variants=("swiglu", "switch"), repeats=1, warmup=0, threads=1, size="tiny", batch=4)
    assert [r.name for r in rows] == ["swiglu vs vanilla", "switch vs vanilla"]
    for r in rows:
        assert r.peer == "vanilla" and r.flops > 0 and 0 < r.fraction_of_peak < 1
        assert r.extra["steps_per_s"] == pytest.approx(1e3 / r.ours_ms)
    glu, switch = rows
    # GLU matched to the baseline's parameters: the same FLOPs per token within 2%
    assert glu.extra["flops_per_token"] == pytest.approx(glu.extra["baseline_flops_per_token"], rel=0.02)
    # Switch: twice the FFN parameters in half the layers' worth of experts, about the dense FLOPs per token
    assert switch.extra["params"] > 1.3 * meta["baseline_params"]
    assert switch.extra["flops_per_token"] == pytest.approx(switch.extra["baseline_flops_per_token"], rel=0.3)
