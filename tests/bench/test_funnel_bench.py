"""``paperzoo bench funnel`` at toy sizes: the rows' structure, and ours == HF in the bench's own setup (no timing)."""

import pytest
import torch

from paperzoo.bench import all_benches
from paperzoo.bench.funnel import build_pair, costs, flop_table, inputs, run

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rows_and_parity_at_toy_sizes():
    rows, meta = run(configs=(("2-2", 2, 16), ("1-1-1", 2, 24)), repeats=1, warmup=0, dim=32, num_heads=2,
                     head_dim=16, ffn_dim=64, vocab=100, peak=100.0)
    assert [r.name for r in rows[:4]] == [
        "funnel FunnelModel 2-2 + 2 dec fwd", "funnel FunnelModel 2-2 + 2 dec fwd+bwd",
        "funnel FunnelBaseModel 2-2 fwd", "funnel FunnelBaseModel 2-2 fwd+bwd"]
    assert len(rows) == 8
    for r in rows:
        assert r.peer == "transformers" and r.ours_ms > 0 and r.peer_ms > 0 and r.ratio > 0
        assert r.flops > 0 and r.peak_gflops == 100.0 and r.fraction_of_peak > 0
        assert r.extra["ours_min_ms"] <= r.ours_ms
    by = {r.name: r for r in rows}
    assert by["funnel FunnelModel 2-2 + 2 dec fwd+bwd"].flops > 2 * by["funnel FunnelModel 2-2 + 2 dec fwd"].flops
    assert by["funnel FunnelModel 2-2 + 2 dec fwd"].flops > by["funnel FunnelBaseModel 2-2 fwd"].flops
    assert len(meta["max_abs_diff_vs_hf"]) == 4
    for d in meta["max_abs_diff_vs_hf"].values():
        assert d["output"] < 1e-4 and d["grad"] < 1e-3
    assert meta["config"]["configs"][1] == {"blocks": "1-1-1", "batch": 2, "seq": 24}


def test_pair_is_in_train_mode_without_dropout_and_inputs_are_padded():
    hf, ours = build_pair("1-1", "FunnelBaseModel", dim=32, num_heads=2, head_dim=16, ffn_dim=64, vocab=100)
    assert hf.training and ours.training and ours.config.dropout == ours.config.attn_dropout == 0.0
    x = inputs(4, 20, 100)
    assert x["attention_mask"][0].all() and not x["attention_mask"].all()
    assert set(x["token_type_ids"].unique().tolist()) == {0, 1}
    with torch.no_grad():
        torch.testing.assert_close(ours(**x).last_hidden_state, hf(**x).last_hidden_state, atol=1e-5, rtol=1e-5)


def test_registered():
    assert all_benches()["funnel"] == "paperzoo.bench.funnel:run"
    assert all_benches()["funnel-costs"] == "paperzoo.bench.funnel:costs"


def test_flop_table_orders_the_paper_layouts():
    rows = flop_table(dim=64, num_heads=2, head_dim=32, ffn_dim=256, seq_lens=(64,))
    f = {r["model"]: r["gflop_per_token"] for r in rows}
    assert f["B4-4-4"] < f["B6-6-6"] < f["B6-6-6+dec"]
    assert f["B6-3x2-3x2"] == pytest.approx(f["B6-6-6"])  # repeats share weights, not compute
    assert f["L11"] < f["L12"]
    assert next(r for r in rows if r["model"] == "L12")["vs_L12"] == pytest.approx(1.0)


def test_costs_of_the_tiny_preset():
    rows, meta = costs("tiny", repeats=1, warmup=0, paper_table=False)
    assert [r.name for r in rows] == ["funnel 1-1 vs L2 pretrain step", "funnel 1-1 vs L2 finetune step"]
    assert meta["standard_depth"] == 2 and meta["configs"]["standard"].blocks == "2"
    for r in rows:
        assert r.peer == "standard" and r.ours_ms > 0 and r.peer_ms > 0
        assert r.flops > 0 and r.extra["peer_flops"] > 0
        assert r.extra["ours_activation_MiB"] > 0 and r.extra["peer_activation_MiB"] > 0
    pre, fine = rows
    # Funnel pretrains with its decoder: more FLOPs per step than the matched baseline; it fine-tunes without: fewer
    assert pre.flops > pre.extra["peer_flops"]
    assert fine.flops < fine.extra["peer_flops"]
