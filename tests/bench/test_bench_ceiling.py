import time

import pytest
import torch

from paperzoo.bench.ceiling import kernel_ceiling


@pytest.mark.usefixtures("one_thread")
def test_ceiling_separates_gemm_time_from_other_work():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    big = torch.randn(2_000_000)

    def gemm_only():
        return a @ b

    def gemm_and_elementwise():
        (big.exp() + 1).log()
        return a @ b

    pure, mixed = kernel_ceiling(gemm_only, calls=3), kernel_ceiling(gemm_and_elementwise, calls=3)
    assert pure.kernel_ms > 0 and mixed.kernel_ms > 0
    # the elementwise work is outside the kernels: it raises the ceiling and shows among the other ops
    assert mixed.ceiling > pure.ceiling and mixed.ceiling > 1.5
    assert {"aten::exp", "aten::log"} & {name for name, _ in mixed.top}


def test_ceiling_needs_a_kernel():
    x = torch.randn(1000)
    with pytest.raises(ValueError, match="no GEMM or attention kernel"):
        kernel_ceiling(lambda: x + 1, calls=1)


def test_ceiling_wall_time_is_unprofiled():
    a, b = torch.randn(64, 64), torch.randn(64, 64)

    def slower_when_profiled():  # stands in for code the profiler slows down (many small or memory-bound ops)
        time.sleep(0.03 if torch._C._autograd._profiler_enabled() else 0.001)
        return a @ b

    c = kernel_ceiling(slower_when_profiled, calls=3)
    assert c.wall_ms < 20 < 30 <= c.profiled_ms
    assert c.ceiling == pytest.approx(c.wall_ms / c.kernel_ms)


@pytest.mark.usefixtures("one_thread")
def test_peak_ceiling_is_the_kernels_own_speed_and_counts_convolutions(monkeypatch):
    """The bound is FLOPs over kernel time: elementwise work lowers the step's fraction of peak, not its ceiling;
    a convolution's time counts as kernel time (its FLOPs are counted too)."""
    from paperzoo.bench import ceiling

    monkeypatch.setattr("paperzoo.bench.precision.peak_gflops", lambda device="cpu": 50.0)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    big = torch.randn(2_000_000)
    conv, img = torch.nn.Conv2d(8, 16, 3), torch.randn(4, 8, 64, 64)

    def mixed():
        (big.exp() + 1).log()
        return a @ b

    with torch.no_grad():
        rows = {r["case"]: r for r in ceiling.peak_ceilings({"gemm": lambda: a @ b, "mixed": mixed,
                                                             "conv": lambda: conv(img)}, calls=3)}
    gemm, mix = rows["gemm"], rows["mixed"]
    assert gemm["flops"] == mix["flops"] == 2 * 256**3 and gemm["peak_gflops"] == 50.0
    assert mix["fraction_of_peak"] < 0.7 * gemm["fraction_of_peak"]
    assert mix["peak_ceiling"] > 2 * mix["fraction_of_peak"]
    for r in rows.values():
        assert r["kernel_ms"] <= r["wall_ms"] * 1.5 and r["peak_ceiling"] >= r["fraction_of_peak"] * 0.7
    assert rows["conv"]["flops"] > 0 and rows["conv"]["kernel_ms"] > 0
