"""Nerfies' deformation field: the SE(3) exponential against matrix_exp, the coarse-to-fine window and schedule, the
fields at initialisation, and the batched Jacobian against per-point autograd."""

import math

import pytest
import torch

from paperzoo.nn.posenc import frequency_encoding
from paperzoo.papers.nerfies import (
    C2F_PAPER_STEPS,
    SE3Field,
    TranslationField,
    WarpConfig,
    coarse_to_fine_alpha,
    coarse_to_fine_window,
    ramp_steps,
    se3_apply,
    se3_matrix,
    skew,
)
from paperzoo.papers.nerfies.warp import SMALL_ANGLE, se3_apply_unguarded


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny tensors: one thread (see tests/conftest.py)."""


def _twist_matrix(w, v):
    """The 4x4 twist [[w]_x, v; 0, 0] whose matrix exponential is the rigid motion."""
    xi = torch.zeros(*w.shape[:-1], 4, 4, dtype=w.dtype)
    xi[..., :3, :3] = skew(w)
    xi[..., :3, 3] = v
    return xi


def _with_angle(theta, n=8, seed=0):
    """``n`` random twists (float64) whose rotation angle |w| is exactly ``theta``, and points to move."""
    g = torch.Generator().manual_seed(seed)
    axis = torch.nn.functional.normalize(torch.randn(n, 3, generator=g, dtype=torch.float64), dim=-1)
    v, x = torch.randn(2, n, 3, generator=g, dtype=torch.float64)
    return axis * theta, v, x


def _reference(w, v, x):
    t = torch.linalg.matrix_exp(_twist_matrix(w, v))  # (n, 4, 4)
    return t, (t[..., :3, :3] @ x[..., None]).squeeze(-1) + t[..., :3, 3]


# ------------------------------------------------------------------------------------------------ exponential map
@pytest.mark.parametrize("theta", [0.0, 1e-8, 1e-4, SMALL_ANGLE * (1 - 1e-9), SMALL_ANGLE * (1 + 1e-9), 0.7, 2.0,
                                   math.pi - 1e-6, math.pi, 4.0])
def test_se3_exp_equals_matrix_exp_of_the_twist(theta):
    w, v, x = _with_angle(theta)
    t, want = _reference(w, v, x)
    assert torch.allclose(se3_matrix(w, v), t, atol=1e-13, rtol=0)
    assert torch.allclose(se3_apply(w, v, x), want, atol=1e-13, rtol=0)


def test_se3_exp_at_random_twists_and_the_rotation_is_orthonormal():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(200, 3, generator=g, dtype=torch.float64) * 1.5
    v, x = torch.randn(2, 200, 3, generator=g, dtype=torch.float64)
    t, want = _reference(w, v, x)
    assert torch.allclose(se3_apply(w, v, x), want, atol=1e-12, rtol=0)
    rot = se3_matrix(w, v)[:, :3, :3]
    assert torch.allclose(rot.transpose(-1, -2) @ rot, torch.eye(3, dtype=torch.float64).expand(200, 3, 3), atol=1e-13)
    assert torch.allclose(torch.linalg.det(rot), torch.ones(200, dtype=torch.float64), atol=1e-13)


@pytest.mark.parametrize("theta", [0.0, 1e-8, 0.05, 1.3])
def test_se3_exp_gradients_are_finite_and_match_matrix_exp(theta):
    w, v, x = _with_angle(theta, n=4, seed=2)
    w, v = w.requires_grad_(), v.requires_grad_()
    coef = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    gw, gv = torch.autograd.grad((se3_apply(w, v, x) * coef).sum(), (w, v))
    assert torch.isfinite(gw).all() and torch.isfinite(gv).all()
    rw, rv = torch.autograd.grad((_reference(w, v, x)[1] * coef).sum(), (w, v))
    assert torch.allclose(gw, rw, atol=1e-10, rtol=0) and torch.allclose(gv, rv, atol=1e-10, rtol=0)


def test_the_official_unguarded_form_is_nan_at_the_identity_and_ours_is_not():
    w, v, x = _with_angle(0.0, n=3)
    assert torch.isnan(se3_apply_unguarded(w, v, x)).all()
    assert torch.equal(se3_apply(w, v, x), x + v)  # exp(0, v) x = x + v exactly
    w, v, x = _with_angle(0.9, n=3)  # away from 0 both are the same map
    assert torch.allclose(se3_apply_unguarded(w, v, x), se3_apply(w, v, x), atol=1e-13)


# ------------------------------------------------------------------------------------------------ coarse to fine
def test_window_at_zero_at_integers_and_at_m():
    m = 5
    assert torch.equal(coarse_to_fine_window(0.0, m), torch.zeros(m))
    assert torch.equal(coarse_to_fine_window(float(m), m), torch.ones(m))
    for j in range(m):  # alpha = j: frequencies below j fully on, j and above off
        w = coarse_to_fine_window(float(j), m, dtype=torch.float64)
        assert torch.equal(w, (torch.arange(m) < j).double())
        half = coarse_to_fine_window(j + 0.5, m, dtype=torch.float64)[j]  # (1 - cos(pi/2)) / 2
        assert abs(half.item() - 0.5) < 1e-15
        q = coarse_to_fine_window(j + 0.25, m, dtype=torch.float64)[j]
        assert abs(q.item() - (1 - math.cos(math.pi / 4)) / 2) < 1e-15


def test_the_raw_input_is_never_windowed():
    x = torch.randn(6, 3)
    e = frequency_encoding(x, 4, window=coarse_to_fine_window(0.0, 4))
    assert torch.equal(e[:, :3], x) and (e[:, 3:] == 0).all()


def test_schedule_rises_linearly_to_m_and_scales_with_the_run():
    m, n = 8, 1000
    assert coarse_to_fine_alpha(0, m, n) == 0.0
    assert coarse_to_fine_alpha(n // 4, m, n) == pytest.approx(m / 4)
    assert coarse_to_fine_alpha(n, m, n) == m and coarse_to_fine_alpha(5 * n, m, n) == m
    assert coarse_to_fine_alpha(3, m, 0) == m  # no ramp: open at once
    assert ramp_steps(250_000) == C2F_PAPER_STEPS == 80_000 and ramp_steps(1000) == 320
    assert WarpConfig.preset("paper").alpha_steps == C2F_PAPER_STEPS


def test_bad_schedule_and_window_inputs_raise():
    with pytest.raises(ValueError, match=r"alpha: expected a number in \[0, m = 4\]"):
        coarse_to_fine_window(4.5, 4)
    with pytest.raises(ValueError, match="step: expected an int >= 0"):
        coarse_to_fine_alpha(-1, 8, 100)
    with pytest.raises(ValueError, match="fraction"):
        ramp_steps(100, 1.5)


# ------------------------------------------------------------------------------------------------ the fields
@pytest.mark.parametrize("cls", [SE3Field, TranslationField])
def test_fields_start_at_the_identity(cls):
    g = torch.Generator().manual_seed(4)
    x, codes = torch.rand(64, 3, generator=g) * 2 - 1, torch.rand(64, 8, generator=g) * 0.05
    torch.manual_seed(0)
    exact = cls(WarpConfig(head_init=0.0))  # zero heads: exactly the identity (the Taylor branch at w = 0)
    assert torch.equal(exact(x, codes, 8.0), x)
    torch.manual_seed(0)
    official = cls(WarpConfig())  # heads uniform in [0, 1e-4): near the identity
    moved = (official(x, codes, 8.0) - x).norm(dim=-1)
    assert moved.max() < 2e-2 and moved.max() > 0


def test_fields_refuse_bad_inputs():
    f = SE3Field(WarpConfig.preset("tiny"))
    with pytest.raises(ValueError, match=r"codes: expected a floating-point tensor of shape \(5, 4\)"):
        f(torch.rand(5, 3), torch.rand(5, 8), 1.0)
    with pytest.raises(ValueError, match=r"points: expected a floating-point tensor of shape \(\.\.\., 3\)"):
        f(torch.rand(5, 2), torch.rand(5, 4), 1.0)
    with pytest.raises(ValueError, match="WarpConfig.skips"):
        WarpConfig(num_layers=2, skips=(1,))
    with pytest.raises(ValueError, match="unknown warp preset"):
        WarpConfig.preset("huge")


# ------------------------------------------------------------------------------------------------ Jacobian
@pytest.mark.parametrize("cls", [SE3Field, TranslationField])
def test_batched_jacobian_equals_per_point_autograd(cls):
    torch.manual_seed(5)
    f = cls(WarpConfig.preset("tiny", head_init=0.5)).double()  # large heads: a far-from-identity warp
    g = torch.Generator().manual_seed(6)
    x = torch.rand(5, 3, generator=g, dtype=torch.float64) * 2 - 1
    codes = torch.rand(5, 4, generator=g, dtype=torch.float64)
    warped, jac = f.warp_and_jacobian(x, codes, 1.5)
    assert jac.shape == (5, 3, 3) and torch.allclose(warped, f(x, codes, 1.5), atol=1e-14)
    for n in range(5):  # the reference, one point at a time (test only)
        want = torch.autograd.functional.jacobian(lambda p, n=n: f(p[None], codes[n:n + 1], 1.5)[0], x[n])
        assert torch.allclose(jac[n], want, atol=1e-12, rtol=0)
    assert (jac - torch.eye(3, dtype=torch.float64)).abs().max() > 1e-2  # a real deformation, not the identity


def test_jacobian_keeps_the_dtype_and_is_differentiable_in_the_parameters():
    torch.manual_seed(7)
    f = SE3Field(WarpConfig.preset("tiny", head_init=0.1))
    _, jac = f.warp_and_jacobian(torch.rand(6, 3), torch.rand(6, 4), 2.0)
    assert jac.dtype == torch.float32  # a Python float times a 0-dim tensor would make the tangents float64
    jac.pow(2).sum().backward()
    grads = [p.grad for p in f.parameters()]
    assert all(gr is not None and torch.isfinite(gr).all() for gr in grads) and any(gr.abs().sum() > 0 for gr in grads)


def test_jacobian_under_no_grad_is_a_plain_value_and_keeps_the_points_graph_otherwise():
    torch.manual_seed(8)
    f = SE3Field(WarpConfig.preset("tiny", head_init=0.3))
    x, codes = torch.rand(4, 3), torch.rand(4, 4)
    with torch.no_grad():
        warped, jac = f.warp_and_jacobian(x, codes, 2.0)
    assert not warped.requires_grad and not jac.requires_grad and not x.requires_grad
    _, want = f.warp_and_jacobian(x, codes, 2.0)
    assert torch.equal(jac, want.detach())
    # points that carry a graph (a pose being optimised) keep it through the warp
    shift = torch.zeros(3, requires_grad=True)
    warped, _ = f.warp_and_jacobian(x + shift, codes, 2.0)
    warped.sum().backward()
    assert shift.grad is not None and shift.grad.abs().sum() > 0
