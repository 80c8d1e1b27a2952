"""``paperzoo bench switch`` at one expert count and one timed call: the rows it writes (no timing asserted)."""

import pytest
import torch

from paperzoo.bench.switch import D, _Experts, run
from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rows_at_eight_experts():
    rows, meta = run(experts=(8,), repeats=1, warmup=0, threads=1)
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
