"""Nerfies' objective (Park et al., 2021, sec. 3.3-3.4): NeRF's photometric loss plus two regularisers of the warp.

``L = MSE_coarse + MSE_fine + lambda_e(step) L_elastic + lambda_b L_background``

* :func:`geman_mcclure`: ``rho(x, c) = 2 (x/c)^2 / ((x/c)^2 + 4)`` (eq. 9), Barron's general robust loss at
  ``alpha = -2``. The official ``general_loss_with_squared_residual`` takes the **squared** residual ``x^2`` (no
  square root is ever taken); so does this one. Near 0 it is ``(x/c)^2 / 2``; it saturates at 2.
* :func:`elastic_loss` (eq. 8-9): at every coarse sample, the singular values ``sigma_k`` of the warp's Jacobian
  ``J = dT/dx`` give ``r^2 = ||log Sigma||_F^2 = sum_k log(max(sigma_k, 1e-6))^2`` (0 exactly for a rigid motion);
  ``rho(r, 0.03)`` weighted by the stop-gradient coarse weights, summed over the ray's samples, averaged over rays;
  coarse network only. Singular values come from ``torch.linalg.svdvals``, whose gradient is finite at repeated
  singular values (the identity warp at initialisation); a full SVD's gradient is NaN there once U or V enters.
* :func:`background_loss` (sec. 3.4): static background points should not move: ``rho(||T(x) - x||, 0.001)``
  (the official code's robust form on the squared distance), averaged over points, weight 1.
* :class:`ElasticSchedule`: the elastic weight over training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from paperzoo.papers.nerf.objective import nerf_loss

from .warp import PAPER_TOTAL_STEPS

__all__ = ["ELASTIC_SCHEDULES", "ElasticSchedule", "background_loss", "elastic_loss", "elastic_residual",
           "geman_mcclure", "nerfies_loss"]

ELASTIC_SCALE = 0.03
BACKGROUND_SCALE = 0.001
SVAL_EPS = 1e-6


def geman_mcclure(sq_residual: Tensor, scale: float) -> Tensor:
    """``rho = 2 (x^2/c^2) / (x^2/c^2 + 4)`` of the squared residual ``x^2`` (elementwise), scale ``c > 0``."""
    _check_scale(scale)
    s = sq_residual / scale**2  # (x/c)^2
    return 2.0 * s / (s + 4.0)


def elastic_residual(jacobian: Tensor, eps: float = SVAL_EPS) -> Tensor:
    """``r^2 = sum_k log(max(sigma_k, eps))^2`` ``(...)`` of Jacobians ``(..., 3, 3)`` (batched ``svdvals``)."""
    _check_jacobian(jacobian)
    j = jacobian.to(torch.promote_types(jacobian.dtype, torch.float32))  # at least fp32 (also under autocast)
    sigma = torch.linalg.svdvals(j)  # (..., 3) singular values
    return torch.log(sigma.clamp_min(eps)).pow(2).sum(dim=-1)  # ||log Sigma||_F^2


def elastic_loss(jacobian: Tensor, weights: Tensor, scale: float = ELASTIC_SCALE, eps: float = SVAL_EPS) -> Tensor:
    """``mean_r sum_i sg(w_ri) rho(r_ri, c)`` for the coarse Jacobians ``(R, S, 3, 3)`` and weights ``(R, S)``."""
    _check_jacobian(jacobian)
    if weights.shape != jacobian.shape[:-2] or weights.ndim != 2:
        raise ValueError(f"weights: expected the coarse weights (R, S) = {tuple(jacobian.shape[:-2])}, got "
                         f"{tuple(weights.shape)}")
    rho = geman_mcclure(elastic_residual(jacobian, eps), scale)  # (R, S)
    return (weights.detach().to(rho.dtype) * rho).sum(dim=-1).mean()  # sg(w)-weighted, summed over samples, mean rays


def background_loss(points: Tensor, warped: Tensor, scale: float = BACKGROUND_SCALE) -> Tensor:
    """``mean_k rho(||T(x_k) - x_k||, c)`` for static points and their warps, both ``(K, 3)``."""
    if not isinstance(points, Tensor) or points.ndim != 2 or points.shape[-1] != 3 or warped.shape != points.shape:
        raise ValueError(f"background points and their warps: expected two (K, 3) tensors, got "
                         f"{tuple(getattr(points, 'shape', ()))} and {tuple(getattr(warped, 'shape', ()))}")
    return geman_mcclure(((warped - points) ** 2).sum(dim=-1), scale).mean()  # rho(||T(x) - x||^2, c)


@dataclass(frozen=True)
class ElasticSchedule:
    """The elastic weight at a step. ``decay`` (``warp_defaults.gin``, the default of the released Nerfies configs):
    ``init`` for ``hold_steps``, then cosine-eased to ``final`` over ``ease_steps``:
    ``lambda = init + (final - init) (1 - cos(pi min((step - hold) / ease, 1))) / 2``; ``constant``: ``init``
    throughout (``gpu_vrig_paper.gin``: 0.001, the paper's quantitative configuration). :meth:`for_run` rescales
    the steps from the paper's 250k to another run length."""

    kind: str = "decay"
    init: float = 0.01
    final: float = 1e-8
    hold_steps: int = 50_000
    ease_steps: int = 100_000

    def __post_init__(self) -> None:
        if self.kind not in ("decay", "constant"):
            raise ValueError(f"ElasticSchedule.kind: expected 'decay' or 'constant', got {self.kind!r}")
        if self.init < 0 or self.final < 0 or self.hold_steps < 0 or self.ease_steps < 0:
            raise ValueError(f"ElasticSchedule: weights and step counts must be >= 0, got {self}")

    def __call__(self, step: int) -> float:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step: expected an int >= 0, got {step!r}")
        if self.kind == "constant" or step < self.hold_steps:
            return self.init
        x = min((step - self.hold_steps) / self.ease_steps, 1.0) if self.ease_steps else 1.0
        return self.init + (self.final - self.init) * 0.5 * (1.0 - math.cos(math.pi * x))  # cosine easing

    def for_run(self, total_steps: int, paper_total: int = PAPER_TOTAL_STEPS) -> ElasticSchedule:
        """The same shape over ``total_steps``: hold and ease scaled by ``total_steps / paper_total`` (50k and 100k
        of 250k are 0.2 and 0.4 of the run)."""
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(f"total_steps: expected an int >= 1, got {total_steps!r}")
        f = total_steps / paper_total
        return replace(self, hold_steps=round(self.hold_steps * f), ease_steps=round(self.ease_steps * f))


ELASTIC_SCHEDULES = {
    "decay": ElasticSchedule(),  # warp_defaults.gin: 0.01 for 50k steps, cosine-eased to 1e-8 over 100k
    "vrig": ElasticSchedule("constant", 0.001),  # gpu_vrig_paper.gin
    "constant": ElasticSchedule("constant", 0.01),  # CONSTANT_ELASTIC_LOSS_SCHED of defaults.gin
}


def nerfies_loss(out, target: Tensor, *, elastic_weight: float = 0.0, background: tuple[Tensor, Tensor] | None = None,
                 background_weight: float = 1.0, elastic_scale: float = ELASTIC_SCALE,
                 background_scale: float = BACKGROUND_SCALE) -> tuple[Tensor, dict[str, Tensor]]:
    """``(loss, metrics)``: coarse + fine MSE of ``out`` (a :class:`~.model.NerfiesOutput`) against ``target``
    ``(R, 3)``, plus ``elastic_weight`` x :func:`elastic_loss` of ``out.jacobian`` and ``out.weights_coarse`` (forward
    with ``return_jacobian=True``), plus ``background_weight`` x :func:`background_loss` of ``background = (points,
    warped)`` (from :meth:`~.model.Nerfies.background_warp`). Metrics: ``mse_coarse``, ``mse``, ``psnr`` (fine),
    and ``elastic`` / ``background`` when computed, all detached."""
    loss, metrics = nerf_loss(out, target)  # MSE_coarse + MSE_fine
    if elastic_weight < 0 or background_weight < 0:
        raise ValueError(f"loss weights must be >= 0, got elastic {elastic_weight}, background {background_weight}")
    if out.jacobian is not None:
        e = elastic_loss(out.jacobian, out.weights_coarse, elastic_scale)
        loss = loss + elastic_weight * e
        metrics["elastic"] = e.detach()
    elif elastic_weight > 0:
        raise ValueError("elastic_weight > 0 needs the warp's Jacobians: call the model with return_jacobian=True "
                         "(and a deformation field)")
    if background is not None:
        b = background_loss(*background, scale=background_scale)
        loss = loss + background_weight * b
        metrics["background"] = b.detach()
    metrics["loss"] = loss.detach()
    return loss, metrics


# ----------------------------------------------------------------------------------------------------- checks
def _check_scale(scale: float) -> None:
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
        raise ValueError(f"scale: expected a number > 0 (the robust loss's c), got {scale!r}")


def _check_jacobian(j: Tensor) -> None:
    if not isinstance(j, Tensor) or not j.is_floating_point() or j.ndim < 2 or j.shape[-2:] != (3, 3):
        raise ValueError(f"jacobian: expected a floating-point tensor of shape (..., 3, 3), got "
                         f"{getattr(j, 'dtype', type(j).__name__)} of shape {tuple(getattr(j, 'shape', ()))}")
