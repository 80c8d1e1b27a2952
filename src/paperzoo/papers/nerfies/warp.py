"""Nerfies' deformation field (Park et al., 2021, sec. 3.2 and 3.5): ``T(x, omega_i) = x'``, observation -> canonical.

In the paper's order:

1. :func:`coarse_to_fine_window` and :func:`coarse_to_fine_alpha` (sec. 3.5, eq. 10-11): the positional encoding of
   ``x`` with each frequency ``j`` scaled by ``w_j(alpha) = (1 - cos(pi clamp(alpha - j, 0, 1))) / 2``; ``alpha``
   rises linearly from 0 to ``m`` (the number of frequencies) over the first part of training. The raw ``x`` in the
   encoding is never windowed, so at ``alpha = 0`` the field sees ``x`` and its code only.
2. The trunk: an MLP (paper: 6 x 128 ReLU, the input joining again at the 5th layer) on
   ``[gamma_alpha(x), omega_i]``, ``omega_i`` the image's 8-d warp code (a GLO embedding held by the model).
3. :class:`SE3Field` (sec. 3.2, eq. 4-7): linear heads give a screw axis ``(w, v)`` in se(3); the warp is the rigid
   motion ``x' = exp([w]_x, v) x`` of the twist, computed by :func:`se3_apply` with a Taylor series below
   ``theta = |w| = 0.1`` (the official code divides by ``theta`` with no guard: NaN when ``w = 0``).
   :class:`TranslationField` is the paper's baseline ``x' = x + t(x, omega_i)``.
4. :meth:`DeformationField.warp_and_jacobian`: the warp and its 3x3 Jacobian ``dx'/dx`` at every point, batched:
   reverse-mode vector-Jacobian products with the three unit vectors in one call, for the elastic loss.

Heads are initialised as the official code (uniform in ``[0, 1e-4)``, zero bias), so the field starts near the
identity; ``head_init=0`` makes it exactly the identity. Hidden layers: Glorot-uniform weights, zero biases (flax's
defaults in the official code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperzoo.nn.posenc import frequency_encoding, frequency_encoding_dim

__all__ = ["C2F_FRACTION", "C2F_PAPER_STEPS", "DEFORMATIONS", "PAPER_TOTAL_STEPS", "SMALL_ANGLE", "DeformationField",
           "SE3Field", "TranslationField", "WarpConfig", "coarse_to_fine_alpha", "coarse_to_fine_window",
           "make_deformation", "ramp_steps", "se3_apply", "se3_apply_unguarded", "se3_matrix", "skew"]

DEFORMATIONS = ("se3", "translation", "none")
PAPER_TOTAL_STEPS = 250_000  # gpu_vrig_paper.gin max_steps
C2F_PAPER_STEPS = 80_000  # ANNEALED_WARP_ALPHA_SCHED num_steps (defaults.gin)
C2F_FRACTION = C2F_PAPER_STEPS / PAPER_TOTAL_STEPS  # 0.32 of the run
SMALL_ANGLE = 0.1  # below this theta the exponential map uses its Taylor series (see _coefficients)


# ------------------------------------------------------------------------------------------------ 1. coarse to fine
def coarse_to_fine_window(alpha: float | Tensor, num_freqs: int, device=None, dtype=torch.float32) -> Tensor:
    """``(num_freqs,)`` weights ``w_j(alpha) = (1 - cos(pi clamp(alpha - j, 0, 1))) / 2``, ``j = 0 .. m-1`` (eq. 10):
    frequency ``j`` is off for ``alpha <= j``, eased in by a half cosine, fully on for ``alpha >= j + 1``."""
    _check_alpha(alpha, num_freqs)
    j = torch.arange(num_freqs, device=device, dtype=dtype)  # (m,)
    a = torch.as_tensor(alpha, device=device, dtype=dtype)
    return 0.5 * (1.0 - torch.cos(math.pi * (a - j).clamp(0.0, 1.0)))  # (m,)


def coarse_to_fine_alpha(step: int, num_freqs: int, ramp_steps: int) -> float:
    """``alpha(step) = m * min(step / N, 1)`` (the official linear schedule); ``N = ramp_steps`` (0: open at once)."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step: expected an int >= 0, got {step!r}")
    if isinstance(ramp_steps, bool) or not isinstance(ramp_steps, int) or ramp_steps < 0:
        raise ValueError(f"ramp_steps: expected an int >= 0, got {ramp_steps!r}")
    return float(num_freqs) if ramp_steps == 0 else num_freqs * min(step / ramp_steps, 1.0)


def ramp_steps(total_steps: int, fraction: float = C2F_FRACTION) -> int:
    """The coarse-to-fine ramp of a run of ``total_steps``: ``round(fraction * total_steps)``; the paper's 80k of
    250k steps is ``fraction = 0.32`` (``ramp_steps(250_000) == C2F_PAPER_STEPS``)."""
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 0:
        raise ValueError(f"total_steps: expected an int >= 0, got {total_steps!r}")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction: expected a number in [0, 1], got {fraction!r}")
    return round(fraction * total_steps)


# ------------------------------------------------------------------------------------------------ 3. SE(3)
def skew(w: Tensor) -> Tensor:
    """``[w]_x`` ``(..., 3, 3)``, the matrix with ``[w]_x y = w x y``."""
    _check_vec3(w, "w")
    z = torch.zeros_like(w[..., 0])
    wx, wy, wz = w.unbind(-1)
    return torch.stack([torch.stack([z, -wz, wy], -1), torch.stack([wz, z, -wx], -1),
                        torch.stack([-wy, wx, z], -1)], -2)


def _coefficients(theta2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``A = sin(theta)/theta``, ``B = (1 - cos theta)/theta^2``, ``C = (theta - sin theta)/theta^3`` of
    ``theta^2`` (..., 1). Closed forms at ``theta >= 0.1``; below, their Taylor series to ``theta^8`` (truncation
    < 3e-18 relative there), so neither the value nor its gradient divides by ``theta``. The closed form of ``C``
    loses ``6 eps / theta^2`` relative to cancellation; at the switch that is ~1e-13 in float64 and ~7e-5 in float32,
    and ``C`` only multiplies ``[w]_x^2 v``, of size ``theta^2 |v|``, so the error in ``x'`` stays near ``eps |v|``.
    Keep the trailing dim of 1: under ``jacfwd`` a Python float times a 0-dim tensor gives float64 tangents
    (torch 2.13), which would turn the Jacobians into float64.
    """
    small = theta2 < SMALL_ANGLE**2
    t = torch.where(small, torch.ones_like(theta2), theta2)  # a safe argument for the closed forms (unused if small)
    th = t.sqrt()
    a_closed = torch.sin(th) / th
    b_closed = 0.5 * (torch.sin(0.5 * th) / (0.5 * th)) ** 2  # (1 - cos th)/th^2 = 2 sin^2(th/2)/th^2, no cancellation
    c_closed = (th - torch.sin(th)) / (th * t)
    s = theta2  # the series in theta^2, by Horner: sum_k (-s)^k / (2k + n)!
    a_series = 1 - s / 6 * (1 - s / 20 * (1 - s / 42 * (1 - s / 72)))  # 1 - s/3! + s^2/5! - s^3/7! + s^4/9!
    b_series = 0.5 * (1 - s / 12 * (1 - s / 30 * (1 - s / 56 * (1 - s / 90))))  # 1/2! - s/4! + s^2/6! - ...
    c_series = (1 - s / 20 * (1 - s / 42 * (1 - s / 72 * (1 - s / 110)))) / 6  # 1/3! - s/5! + s^2/7! - ...
    return (torch.where(small, a_series, a_closed), torch.where(small, b_series, b_closed),
            torch.where(small, c_series, c_closed))


def se3_apply(w: Tensor, v: Tensor, x: Tensor) -> Tensor:
    """``x' = exp(xi) x`` for the twist ``xi = [[w]_x, v; 0, 0]`` (Modern Robotics eq. 3.51 and 3.88), all ``(..., 3)``.

    ``x' = R x + p``, ``R = I + A [w]_x + B [w]_x^2`` (Rodrigues), ``p = (I + B [w]_x + C [w]_x^2) v``, with the
    coefficients of :func:`_coefficients`; ``[w]_x y`` is the cross product ``w x y`` (no 3x3 matrices built).
    The paper's unit axis ``(w/theta, v/theta)`` and magnitude ``theta = |w|`` give the same transform.
    """
    for name, t in (("w", w), ("v", v), ("x", x)):
        _check_vec3(t, name)
    a, b, c = _coefficients((w * w).sum(-1, keepdim=True))  # (..., 1) each
    wx = torch.linalg.cross(w.expand_as(x), x, dim=-1)  # [w]_x x
    wwx = torch.linalg.cross(w.expand_as(x), wx, dim=-1)  # [w]_x^2 x
    wv = torch.linalg.cross(w, v, dim=-1)  # [w]_x v
    wwv = torch.linalg.cross(w, wv, dim=-1)  # [w]_x^2 v
    rx = x + a * wx + b * wwx  # R x = x + A [w]_x x + B [w]_x^2 x
    p = v + b * wv + c * wwv  # p = V v = v + B [w]_x v + C [w]_x^2 v
    return rx + p  # x' = R x + p


def se3_apply_unguarded(w: Tensor, v: Tensor, x: Tensor) -> Tensor:
    """The official code's form (``warping.SE3Field.warp`` + ``rigid_body.exp_se3``): ``theta = |w|``, ``w`` and
    ``v`` divided by ``theta`` with no guard, so ``w = 0`` gives NaN. For comparison only."""
    theta = w.norm(dim=-1, keepdim=True)  # (..., 1)
    wh, vh = w / theta, v / theta  # the unit screw axis (0/0 at theta = 0)
    wx = torch.linalg.cross(wh.expand_as(x), x, dim=-1)
    wwx = torch.linalg.cross(wh.expand_as(x), wx, dim=-1)
    wv = torch.linalg.cross(wh, vh, dim=-1)
    wwv = torch.linalg.cross(wh, wv, dim=-1)
    rx = x + torch.sin(theta) * wx + (1 - torch.cos(theta)) * wwx  # R = I + sin th W + (1 - cos th) W^2
    p = theta * vh + (1 - torch.cos(theta)) * wv + (theta - torch.sin(theta)) * wwv  # (th I + (1-cos) W + ...) v
    return rx + p


def se3_matrix(w: Tensor, v: Tensor) -> Tensor:
    """The homogeneous transform ``exp(xi)`` ``(..., 4, 4)`` of the twist ``(w, v)`` (same coefficients as
    :func:`se3_apply`)."""
    _check_vec3(w, "w")
    _check_vec3(v, "v")
    a, b, c = (k[..., None] for k in _coefficients((w * w).sum(-1, keepdim=True)))  # (..., 1, 1) each
    k = skew(w)  # (..., 3, 3)
    k2 = k @ k
    eye = torch.eye(3, dtype=w.dtype, device=w.device).expand_as(k)
    rot = eye + a * k + b * k2  # R
    p = ((eye + b * k + c * k2) @ v[..., None])  # (..., 3, 1): V v
    top = torch.cat([rot, p], dim=-1)  # (..., 3, 4)
    bottom = torch.zeros_like(top[..., :1, :])
    bottom[..., 0, 3] = 1.0
    return torch.cat([top, bottom], dim=-2)


# ------------------------------------------------------------------------------------------------ 2. the field
@dataclass(frozen=True)
class WarpConfig:
    """The deformation MLP. ``num_layers`` x ``dim`` ReLU trunk on ``[gamma_alpha(x), code]``; the input joins again
    after each layer index in ``skips`` (NeRFMLP's convention: ``(3,)`` feeds the 5th layer, the official
    ``skips=(4,)``, which concatenates before ``hidden_4``).

    ``num_freqs``: ``m``, the encoding's frequencies (8 in the official defaults, 6 in ``gpu_vrig_paper.gin``);
    ``include_input``: the raw ``x`` first in the encoding (official ``use_identity_map=True``; never windowed);
    ``pi``: ``sin(2^k pi x)`` instead of the official ``sin(2^k x)``; ``code_dim``: the warp code ``omega_i``;
    ``head_init``: heads' weights uniform in ``[0, head_init)`` (official 1e-4; 0 = exactly the identity);
    ``alpha_steps``: steps for ``alpha`` to reach ``m`` (the paper 80k of 250k; see :func:`ramp_steps`);
    ``small_angle_guard=False``: the official unguarded exponential map (NaN at ``w = 0``; comparison only).
    """

    num_layers: int = 6
    dim: int = 128
    skips: tuple[int, ...] = (3,)
    num_freqs: int = 8
    include_input: bool = True
    pi: bool = False
    code_dim: int = 8
    head_init: float = 1e-4
    alpha_steps: int = C2F_PAPER_STEPS
    small_angle_guard: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "skips", tuple(self.skips))
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> WarpConfig:
        """``paper`` (6 x 128, m = 8), ``small`` (4 x 64, m = 6), ``tiny`` (tests: 2 x 16, m = 2, 4-d code)."""
        if name not in WARP_PRESETS:
            raise ValueError(f"unknown warp preset {name!r}; valid: {', '.join(WARP_PRESETS)}")
        return replace(cls(**WARP_PRESETS[name]), **overrides)

    @property
    def in_channels(self) -> int:
        return frequency_encoding_dim(3, self.num_freqs, self.include_input) + self.code_dim


WARP_PRESETS: dict[str, dict] = {  # WarpConfig arguments of each preset
    "paper": {},
    # alpha_steps: 0.32 of a 1000-step (small) or 100-step (tiny) run; a recipe sets ramp_steps(its total)
    "small": {"num_layers": 4, "dim": 64, "skips": (1,), "num_freqs": 6, "alpha_steps": 320},
    "tiny": {"num_layers": 2, "dim": 16, "skips": (0,), "num_freqs": 2, "code_dim": 4, "alpha_steps": 32},
}


class DeformationField(nn.Module):
    """``forward(points (..., 3), codes (..., code_dim), alpha) -> warped points (..., 3)``: the trunk on the windowed
    encoding and the code, then the subclass's deformation of ``x`` by the heads' outputs."""

    kind = ""
    head_names: tuple[str, ...] = ()

    def __init__(self, config: WarpConfig) -> None:
        super().__init__()
        if not isinstance(config, WarpConfig):
            raise ValueError(f"{type(self).__name__} expects a WarpConfig, got {type(config).__name__}")
        self.config = c = config
        widths = [c.in_channels] + [c.dim + (c.in_channels if i in c.skips else 0) for i in range(c.num_layers - 1)]
        self.trunk = nn.ModuleList(nn.Linear(w, c.dim) for w in widths)
        self.heads = nn.ModuleDict({name: nn.Linear(c.dim, 3) for name in self.head_names})
        for layer in self.trunk:
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
        for head in self.heads.values():  # near the identity: uniform [0, head_init), zero bias (official)
            if c.head_init > 0:
                nn.init.uniform_(head.weight, 0.0, c.head_init)
            else:
                nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)

    def window(self, alpha: float | Tensor, like: Tensor) -> Tensor:
        return coarse_to_fine_window(alpha, self.config.num_freqs, like.device, like.dtype)  # (m,)

    def _trunk(self, points: Tensor, codes: Tensor, window: Tensor) -> Tensor:
        c = self.config
        enc = frequency_encoding(points, c.num_freqs, include_input=c.include_input, pi=c.pi, window=window)
        x = torch.cat([enc, codes], dim=-1)  # (..., 3 + 6m + code_dim): [gamma_alpha(x), omega_i]
        h = x
        for i, layer in enumerate(self.trunk):
            h = F.relu(layer(h))  # (..., dim)
            if i in c.skips:
                h = torch.cat([x, h], dim=-1)  # the input joins again
        return h

    def _deform(self, points: Tensor, h: Tensor) -> Tensor:  # (..., 3), (..., dim) -> (..., 3)
        raise NotImplementedError

    def _warp(self, points: Tensor, codes: Tensor, window: Tensor) -> Tensor:
        return self._deform(points, self._trunk(points, codes, window))

    def forward(self, points: Tensor, codes: Tensor, alpha: float | Tensor) -> Tensor:
        _check_points_codes(points, codes, self.config.code_dim)
        return self._warp(points, codes, self.window(alpha, points))

    def warp_and_jacobian(self, points: Tensor, codes: Tensor, alpha: float | Tensor) -> tuple[Tensor, Tensor]:
        """Warped points ``(N, 3)`` and the Jacobians ``J[n, a, b] = d x'_a / d x_b`` ``(N, 3, 3)`` of points
        ``(N, 3)``, by reverse-mode AD: the warp once, then its vector-Jacobian products with the three unit
        vectors in one batched call. Points do not interact, so the gradient of ``sum_n x'_{n, a}`` with respect to
        the points is row ``a`` of every point's Jacobian. With grad mode on the Jacobians stay differentiable in
        the parameters (``create_graph``); under ``no_grad`` they are plain values. Faster here than
        ``vmap(jacfwd)`` over points (``paperzoo bench nerfies``), with the same values."""
        _check_points_codes(points, codes, self.config.code_dim)
        if points.ndim != 2:
            raise ValueError(f"points: expected (N, 3) for the Jacobian, got {tuple(points.shape)}")
        graph = torch.is_grad_enabled()
        with torch.enable_grad():
            x = points if points.requires_grad else points.detach().requires_grad_(True)
            warped = self._warp(x, codes, self.window(alpha, x))  # (N, 3)
            units = torch.eye(3, dtype=warped.dtype, device=warped.device)[:, None].expand(3, *warped.shape)
            (rows,) = torch.autograd.grad(warped, x, units, create_graph=graph, is_grads_batched=True)  # (3, N, 3)
        jac = rows.transpose(0, 1)  # (N, 3, 3): J[n, a, b]
        return (warped, jac) if graph else (warped.detach(), jac.detach())


class SE3Field(DeformationField):
    """``x' = exp(w, v) x``: the screw axis ``(w, v)`` from two linear heads (sec. 3.2, eq. 7)."""

    kind = "se3"
    head_names = ("w", "v")

    def _deform(self, points: Tensor, h: Tensor) -> Tensor:
        w, v = self.heads["w"](h), self.heads["v"](h)  # (..., 3) each: the twist in se(3)
        w, v = w.to(points.dtype), v.to(points.dtype)  # the exp map in the points' precision, also under autocast
        exp = se3_apply if self.config.small_angle_guard else se3_apply_unguarded
        return exp(w, v, points)  # x' = exp([w]_x, v) x


class TranslationField(DeformationField):
    """``x' = x + t(x, omega_i)``: the paper's translation baseline (sec. 3.2)."""

    kind = "translation"
    head_names = ("t",)

    def _deform(self, points: Tensor, h: Tensor) -> Tensor:
        return points + self.heads["t"](h).to(points.dtype)  # x' = x + t (in the points' precision)


def make_deformation(kind: str, config: WarpConfig) -> DeformationField | None:
    """The field of ``kind`` (``"se3"``, ``"translation"``), or None for ``"none"`` (a static NeRF)."""
    if kind not in DEFORMATIONS:
        raise ValueError(f"deformation: expected one of {DEFORMATIONS}, got {kind!r}")
    return {"se3": SE3Field, "translation": TranslationField, "none": lambda _: None}[kind](config)


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: WarpConfig) -> None:
    for name in ("num_layers", "dim"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"WarpConfig.{name}: expected an int >= 1, got {v!r}")
    for name in ("num_freqs", "code_dim", "alpha_steps"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"WarpConfig.{name}: expected an int >= 0, got {v!r}")
    if any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < c.num_layers - 1 for s in c.skips):
        raise ValueError(f"WarpConfig.skips: expected layer indices in [0, {c.num_layers - 1}), got {c.skips}")
    if not (isinstance(c.head_init, int | float) and 0.0 <= c.head_init < 1.0):
        raise ValueError(f"WarpConfig.head_init: expected a number in [0, 1), got {c.head_init!r}")


def _check_alpha(alpha: float | Tensor, num_freqs: int) -> None:
    if isinstance(num_freqs, bool) or not isinstance(num_freqs, int) or num_freqs < 0:
        raise ValueError(f"num_freqs: expected an int >= 0, got {num_freqs!r}")
    if isinstance(alpha, Tensor):
        if alpha.ndim != 0 or not alpha.is_floating_point():
            raise ValueError(f"alpha: expected a float or a 0-dim floating-point tensor, got {alpha.dtype} of shape "
                             f"{tuple(alpha.shape)}")
        return  # a tensor may be traced; its range is the caller's
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 <= alpha <= num_freqs:
        raise ValueError(f"alpha: expected a number in [0, m = {num_freqs}] (the coarse-to-fine parameter), "
                         f"got {alpha!r}")


def _check_vec3(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.ndim < 1 or x.shape[-1] != 3:
        raise ValueError(f"{name}: expected a floating-point tensor of shape (..., 3), got "
                         f"{getattr(x, 'dtype', type(x).__name__)} of shape {tuple(getattr(x, 'shape', ()))}")


def _check_points_codes(points: Tensor, codes: Tensor, code_dim: int) -> None:
    _check_vec3(points, "points")
    want = (*points.shape[:-1], code_dim)
    if not isinstance(codes, Tensor) or not codes.is_floating_point() or tuple(codes.shape) != want:
        raise ValueError(f"codes: expected a floating-point tensor of shape {want} (one warp code per point), got "
                         f"{getattr(codes, 'dtype', type(codes).__name__)} of shape "
                         f"{tuple(getattr(codes, 'shape', ()))}")
