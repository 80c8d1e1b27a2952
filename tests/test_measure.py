"""The measurement module: log-log slopes and activation bytes (FLOPs, peak and timing have their own tests)."""

import pytest
import torch

from paperzoo.measure import activation_bytes, loglog_slope


def test_loglog_slope_recovers_exponents():
    xs = [1024, 2048, 4096, 8192]
    assert loglog_slope(xs, [3e-6 * x for x in xs]) == pytest.approx(1.0, abs=1e-9)
    assert loglog_slope(xs, [x**2 for x in xs]) == pytest.approx(2.0, abs=1e-9)
    assert loglog_slope(xs, [7.0] * 4) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match=">= 2 values"):
        loglog_slope([1], [1.0])
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [0.0, 1.0])


def test_activation_bytes_counts_what_backward_keeps():
    x = torch.randn(64, 32, requires_grad=True)
    w = torch.randn(32, 16, requires_grad=True)
    # x @ w saves both operands for backward: 64*32 + 32*16 floats
    assert activation_bytes(lambda: x @ w) == (64 * 32 + 32 * 16) * 4
    with torch.no_grad():
        assert activation_bytes(lambda: x @ w) == 0  # nothing is kept without autograd
    assert activation_bytes(lambda: (x @ w).relu()) > activation_bytes(lambda: x @ w)


def test_count_flops_counts_cpu_fused_attention_like_its_matmuls():
    """torch's registry counts the CPU's fused SDPA kernel as 0 FLOPs; ours counts its two matmuls (forward) and the
    backward's five (flash recomputes the scores), as torch's formula does for the GPU kernels."""
    from paperzoo.measure import count_flops

    b, h, L, e = 2, 4, 16, 8
    q = torch.randn(b, h, L, e)
    fwd = count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
    assert fwd == 2 * (2 * b * h * L * L * e)
    qg = q.clone().requires_grad_()
    both = count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(qg, qg, qg).sum().backward())
    assert both == 7 * (2 * b * h * L * L * e)


def test_count_flops_under_autograd_grad_on_a_leaf():
    """torch.autograd.grad with respect to a leaf input (Captum's integrated gradients does this) crashed inside
    torch's module tracker (pytorch/pytorch#131753); the count is forward 2 m k n plus the input gradient's 2 m n k
    (no weight gradient is asked for)."""
    from paperzoo.measure import count_flops

    lin = torch.nn.Linear(16, 4)
    x = torch.randn(8, 16, requires_grad=True)
    assert count_flops(lambda: torch.autograd.grad(lin(x).sum(), x)) == 2 * (2 * 8 * 16 * 4)


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_count_flops_of_a_grouped_convolution_backward(groups):
    """fwd+bwd of a 3 x 3 convolution with ``groups``: forward 2 B H W C_out (C_in / groups) 9, and the input and the
    weight gradient the same each (torch's registry counts the weight gradient ``groups`` times too many)."""
    from paperzoo.measure import count_flops

    b, c, hw = 2, 16, 8
    conv = torch.nn.Conv2d(c, c, 3, padding=1, groups=groups, bias=False)
    x = torch.randn(b, c, hw, hw, requires_grad=True)
    fwd = 2 * b * hw * hw * c * (c // groups) * 9
    assert count_flops(lambda: conv(x)) == fwd
    assert count_flops(lambda: conv(x).sum().backward()) == 3 * fwd
