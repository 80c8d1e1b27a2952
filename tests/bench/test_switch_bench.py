"""``paperzoo bench switch`` at one expert count and one timed call: the rows it writes (no timing asserted)."""

import pytest
import torch

from paperzoo.bench.switch import D, _Experts, floor_overhead, run
from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rows_at_eight_experts():
    rows, meta = run(experts=(8,), repeats=1, warmup=0, threads=1, wide=())
    assert [r.name for r in rows] == ["switch vs HF, 8 experts", "switch vs dense, 8 experts, cf 1.0",
                                      "switch vs dense, 8 experts, cf 1.25",
                                      "switch expert matmuls only vs dense, 8 experts"]
    assert rows[0].extra["max_abs_diff"] <= 1e-4 and rows[0].peer == "transformers"
    for r in rows[1:]:
        assert r.peer == "dense FFN" and r.extra["overhead"] == pytest.approx(r.ours_ms / r.peer_ms - 1)
    assert {"overhead_8_cf1.0", "overhead_8_cf1.25", "overhead_8_experts_only"} <= meta.keys()


def test_experts_only_module_is_the_layers_expert_computation():
    moe = SwitchMoE(SwitchMoEConfig(dim=D, ffn_dim=64, num_experts=4, jitter_eps=0.0))
    h = torch.randn(4, 5, D)
    want = torch.stack([torch.relu(h[e] @ moe.w1[e]) @ moe.w2[e] for e in range(4)])
    torch.testing.assert_close(_Experts(moe)(h), want)


def test_wide_rows_carry_the_memory_traffic_floor():
    rows, meta = run(experts=(), repeats=1, warmup=0, threads=1, wide=((64, 128),), wide_experts=(8, 32))
    assert [r.name for r in rows] == ["switch vs dense, 8 experts, cf 1.0, d 64",
                                      "switch vs dense, 32 experts, cf 1.0, d 64"]
    assert [(r.extra["dim"], r.extra["ffn_dim"]) for r in rows] == [(64, 128)] * 2
    assert {"overhead_8_cf1.0_d64", "overhead_32_cf1.0_d64"} <= meta.keys() and meta["memory_bandwidth_gbs"] > 0
    for r in rows:
        want = floor_overhead(r.extra["experts"], 64, 128, r.peer_ms, meta["memory_bandwidth_gbs"])
        assert r.extra["floor_overhead"] == pytest.approx(want)


def test_the_floor_is_the_extra_weight_traffic_over_the_bandwidth():
    # 31 extra experts x 2 x 512 x 2048 weights x 12 bytes = 780 MB; at 20 GB/s that is 39 ms, 3.9x a 10 ms dense step
    assert floor_overhead(32, 512, 2048, dense_ms=10.0, bandwidth_gbs=20.0) == pytest.approx(3.9, rel=1e-2)
    assert floor_overhead(1, 512, 2048, 10.0, 20.0) == 0.0
    assert floor_overhead(32, 512, 2048, 10.0, 20.0, "bf16") == pytest.approx(1.5 * floor_overhead(32, 512, 2048,
                                                                                                 10.0, 20.0))
    with pytest.raises(ValueError, match="precision must be one of"):
        floor_overhead(8, 8, 8, 1.0, 1.0, "fp16")
