"""Nerfies' objective: Geman-McClure by hand, the elastic loss (rigid ~0, shear > 0, finite gradients at the
identity, coarse weights detached, warp-only), the background loss, the elastic schedule and the combined loss."""

import math

import pytest
import torch

from paperzoo.papers.nerfies import (
    ELASTIC_SCHEDULES,
    ElasticSchedule,
    Nerfies,
    NerfiesConfig,
    WarpConfig,
    background_loss,
    elastic_loss,
    elastic_residual,
    geman_mcclure,
    nerfies_loss,
    se3_matrix,
)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny tensors: one thread (see tests/conftest.py)."""


def _rotations(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, 3, generator=g, dtype=torch.float64)
    return se3_matrix(w, torch.zeros_like(w))[:, :3, :3]


# ------------------------------------------------------------------------------------------------ Geman-McClure
def test_geman_mcclure_by_hand():
    c = 0.03
    sq = torch.tensor([0.0, c**2, 4 * c**2, 1e6 * c**2], dtype=torch.float64)  # x = 0, c, 2c, 1000c
    want = torch.tensor([0.0, 2 / 5, 2 * 4 / (4 + 4), 2 * 1e6 / (1e6 + 4)], dtype=torch.float64)
    assert torch.allclose(geman_mcclure(sq, c), want, atol=1e-15, rtol=0)
    tiny = torch.tensor([1e-6 * c**2], dtype=torch.float64)  # near 0: (x/c)^2 / 2
    assert torch.allclose(geman_mcclure(tiny, c), tiny / c**2 / 2, rtol=1e-6)


def test_geman_mcclure_is_barrons_general_loss_at_alpha_minus_two():
    x = torch.rand(50, dtype=torch.float64) * 0.2
    c, a = 0.03, -2.0
    general = abs(a - 2) / a * (((x / c) ** 2 / abs(a - 2) + 1) ** (a / 2) - 1)  # Barron (2019), eq. 1
    assert torch.allclose(geman_mcclure(x**2, c), general, atol=1e-14)


# ------------------------------------------------------------------------------------------------ elastic
def test_elastic_residual_is_zero_for_rigid_and_log_squares_otherwise():
    assert elastic_residual(_rotations(20)).abs().max() < 1e-25
    a = torch.tensor([0.3, -0.7], dtype=torch.float64)
    one = torch.ones(2, dtype=torch.float64)
    scale = torch.diag_embed(torch.stack([a.exp(), one, one], -1))
    assert torch.allclose(elastic_residual(_rotations(2) @ scale), a**2, atol=1e-14)  # R diag(e^a, 1, 1): r^2 = a^2
    shear = torch.eye(3, dtype=torch.float64)
    shear[0, 1] = 0.5
    lam = torch.linalg.eigvalsh(shear.T @ shear)  # sigma_k^2, by another route
    assert elastic_residual(shear).item() == pytest.approx((0.5 * lam.log()).pow(2).sum().item(), abs=1e-14)
    assert elastic_residual(shear) > 1e-3


def test_elastic_loss_rigid_is_zero_and_shear_is_weighted_summed_and_averaged():
    rigid = _rotations(6).view(2, 3, 3, 3)
    w = torch.rand(2, 3, dtype=torch.float64)
    assert elastic_loss(rigid, w) < 1e-20
    shear = torch.eye(3, dtype=torch.float64).repeat(2, 3, 1, 1)
    shear[0, 1, 0, 1] = 0.5  # one sheared sample, ray 0 sample 1
    rho = geman_mcclure(elastic_residual(shear[0, 1]), 0.03)
    assert elastic_loss(shear, w).item() == pytest.approx((w[0, 1] * rho).item() / 2, rel=1e-12)  # mean over 2 rays


def test_elastic_gradients_are_finite_at_the_identity_and_skip_the_weights():
    eye = torch.eye(3).repeat(4, 5, 1, 1).requires_grad_()
    w = torch.rand(4, 5, requires_grad=True)
    elastic_loss(eye, w).backward()
    assert torch.isfinite(eye.grad).all() and w.grad is None  # weights are stop-gradient
    j = torch.diag(torch.tensor([2.0, 2.0, 1.0], dtype=torch.float64)).requires_grad_()  # repeated sigma != 1
    elastic_residual(j).backward()
    want = torch.diag(torch.tensor([2 * math.log(2) / 2, 2 * math.log(2) / 2, 0.0], dtype=torch.float64))
    assert torch.allclose(j.grad, want, atol=1e-12)  # d/dJ sum log(sigma)^2 = diag(2 log(sigma) / sigma)


def test_elastic_through_the_model_reaches_only_the_warp_and_is_finite_at_the_identity():
    torch.manual_seed(0)
    m = Nerfies(NerfiesConfig.preset("tiny", warp=WarpConfig.preset("tiny", head_init=0.0)))
    out = m(**Nerfies.example_inputs(m.config, batch=4))
    e = elastic_loss(out.jacobian, out.weights_coarse)
    assert e.abs() < 1e-10  # the identity warp is rigid
    e.backward()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in m.parameters())
    for mlp in (m.coarse, m.fine):
        assert all(p.grad is None or (p.grad == 0).all() for p in mlp.parameters())
    torch.manual_seed(0)
    m = Nerfies(NerfiesConfig.preset("tiny", warp=WarpConfig.preset("tiny", head_init=0.3)))  # a real deformation
    out = m(**Nerfies.example_inputs(m.config, batch=4))
    elastic_loss(out.jacobian, out.weights_coarse).backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in m.warp.parameters())
    assert all(p.grad is None or (p.grad == 0).all() for p in m.coarse.parameters())


# ------------------------------------------------------------------------------------------------ background
def test_background_loss_zero_for_static_points_robust_for_moved_ones():
    x = torch.rand(10, 3, dtype=torch.float64)
    assert background_loss(x, x) == 0
    t = torch.full((10, 3), 0.01, dtype=torch.float64)  # |T(x) - x|^2 = 3e-4 = 300 c^2
    assert background_loss(x, x + t).item() == pytest.approx(2 * 300 / 304, rel=1e-12)
    torch.manual_seed(1)
    m = Nerfies(NerfiesConfig.preset("tiny", deformation="translation", warp=WarpConfig.preset("tiny", head_init=0.0)))
    pts, warped = m.background_warp(torch.rand(32, 3), generator=torch.Generator().manual_seed(0))
    assert background_loss(pts, warped) == 0
    with torch.no_grad():
        m.warp.heads["t"].bias.fill_(0.01)
    pts, warped = m.background_warp(torch.rand(32, 3), generator=torch.Generator().manual_seed(0))
    assert background_loss(pts, warped).item() == pytest.approx(2 * 300 / 304, rel=1e-4)


# ------------------------------------------------------------------------------------------------ schedule
def test_elastic_schedule_decay_constant_and_run_scaling():
    s = ELASTIC_SCHEDULES["decay"]
    assert s(0) == s(49_999) == s(50_000) == 0.01
    assert s(100_000) == pytest.approx((0.01 + 1e-8) / 2)  # half-way through the cosine
    assert s(75_000) == pytest.approx(0.01 + (1e-8 - 0.01) * (1 - math.cos(math.pi / 4)) / 2)
    assert s(150_000) == pytest.approx(1e-8) and s(10**6) == pytest.approx(1e-8)
    assert ELASTIC_SCHEDULES["vrig"](123_456) == 0.001
    short = s.for_run(1000)
    assert (short.hold_steps, short.ease_steps) == (200, 400) and short(400) == pytest.approx(s(100_000))
    with pytest.raises(ValueError, match="ElasticSchedule.kind"):
        ElasticSchedule("linear")


# ------------------------------------------------------------------------------------------------ combined
def test_nerfies_loss_adds_its_parts():
    torch.manual_seed(2)
    m = Nerfies(NerfiesConfig.preset("tiny", warp=WarpConfig.preset("tiny", head_init=0.3)))
    out = m(**Nerfies.example_inputs(m.config, batch=4))
    target = torch.rand(4, 3)
    bg = m.background_warp(torch.rand(16, 3))
    loss, metrics = nerfies_loss(out, target, elastic_weight=0.01, background=bg, background_weight=2.0)
    want = (((out.rgb_coarse - target) ** 2).mean() + ((out.rgb - target) ** 2).mean()
            + 0.01 * elastic_loss(out.jacobian, out.weights_coarse) + 2.0 * background_loss(*bg))
    assert torch.allclose(loss, want) and set(metrics) == {"mse_coarse", "mse", "psnr", "elastic", "background", "loss"}
    loss.backward()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in m.parameters())
    plain = m(**{**Nerfies.example_inputs(m.config, batch=4), "return_jacobian": False})
    with pytest.raises(ValueError, match="return_jacobian=True"):
        nerfies_loss(plain, target, elastic_weight=0.01)
    with pytest.raises(ValueError, match=r"target: expected the rendered shape \(4, 3\)"):
        nerfies_loss(plain, target[:2])
