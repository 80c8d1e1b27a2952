"""Synthetic non-rigid captures with ground truth, written in the Nerfies layout (:mod:`paperzoo.data.nerfies`).

The scene, in the normalised coordinates the capture's ``scene.json`` defines (``world = x / scale + center``):

* **Canonical object**: four soft ellipsoids (a body, a head, two arms; seeded jitter of a fixed layout). Shape
  ``k`` has density ``density_max * sigmoid(-g_k(y) / softness)`` with ``g_k(y) = |q| (|q| - 1) / |diag(1 / r_k) q|``,
  ``q = diag(1 / r_k) Q_k^T (y - c_k)`` (the first-order distance to the ellipsoid: zero exactly on it, the signed
  distance for a sphere, so the edge is equally soft all round), and colour
  ``base_k + 0.25 sin(freq_k D_k (y - c_k) + phase_k)`` (stripes of a different direction per channel).
* **Static background**: the half-space ``z < plane_z`` (same soft edge) with a checker-like texture
  ``base + 0.2 sin(freq_x y_x + phase_cx) sin(freq_y y_y + phase_cy)`` per channel ``c``. ``points.npy`` holds
  points on the plane seen by training cameras; the warp is exactly the identity there.
* **Motion**, as the map from observed space (frame ``f``) to canonical space (what Nerfies learns)::

      W_f(x) = x + m(|x|) (R_f x + t_f + sum_k a_fk phi_k(x) - x),   phi_k(x) = exp(-|x - mu_k|^2 / (2 s_k^2))

  a rigid transform about the origin plus Gaussian-RBF displacements, blended to the identity by
  ``m(r) = 1 - smoothstep5((r - mask_inner) / (mask_outer - mask_inner))`` (1 on the object, 0 from
  ``mask_outer`` on: the background never moves). Each motion parameter follows a smooth path
  ``amplitude * sum_j w_j sin(pi n_j u) / sum_j |w_j|`` in the capture time ``u = f / (frames - 1)``, zero at
  ``u = 0``: frame 0 is the rest frame (identity warp; the canonical scene is frame 0's geometry).
  :func:`true_warp` returns ``W_f(x)`` and its analytic Jacobian.
* **Cameras**: a training rig on a slowly moving selfie-like path in front of the object and a validation rig at
  a fixed baseline to its right, both looking at the object and observing the same instants (the paper's
  validation-rig protocol); different OpenCV intrinsics and distortion per rig.

Rendering (:func:`render_nonrigid`) with NeRF's quadrature (eq. 3; last interval 1e10, white background), float64,
in chunks of rays, on two segments per ray where all the density is: ``samples`` evenly spaced depths across the
frame's object ball (radius ``object_radius[f]``, a bound on where the deformed object can be: the canonical
support radius plus a bound on the displacement) and ``plane_samples`` across the plane's edge (from
``20 * softness`` above the plane to ``FAR_MARGIN`` below it, where the warp is the identity). Outside both segments
the density is below ``1e-7 * density_max``. Object samples go through ``W_f`` and the object's fields, plane
samples through the plane's.

Output folder (:func:`generate_nonrigid`): the Nerfies layout (``dataset.json``, ``metadata.json``, ``scene.json``,
``camera/<id>.json``, ``rgb/1x`` and ``rgb/2x``, ``points.npy``) plus ``truth/params.json`` (everything above:
the scene, the per-frame warp parameters, the renderer's settings), ``truth/depth.npy``, ``truth/alpha.npy`` and
``truth/object_alpha.npy`` (N, H, W) float32 at 1x in the order of ``params.json`` ``ids``, and ``manifest.json``
(sha256 of every file). Everything follows from the seed; see ``NONRIGID.md`` for the presets and parameters.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from paperzoo.data.nerfies import Cameras, camera_from_json
from paperzoo.data.store import sha256_file

__all__ = ["PRESETS", "NonrigidParams", "NonrigidPreset", "NonrigidTruth", "canonical_fields", "generate_nonrigid",
           "load_nonrigid_truth", "render_nonrigid", "true_warp"]

FORMAT = "paperzoo-nonrigid/1"
SCENE_SCALE = 0.25  # world = normalised / SCENE_SCALE + SCENE_CENTER
SCENE_CENTER = (0.5, -1.0, 2.0)
PLANE_Z = -1.6
DENSITY_MAX = 100.0
SOFTNESS = 0.004
SUPPORT = 18.0  # the object's support: g <= SUPPORT * softness (density >= 1.5e-8 density_max)
PLANE_TOP = 20.0  # plane samples start PLANE_TOP * softness above the plane (density 2e-9 density_max there)
FAR_MARGIN = 0.1  # and end this far below it
PLANE_SAMPLES = 24
MASK_INNER, MASK_OUTER = 0.7, 1.48
LAST_DELTA = 1e10  # NeRF's "infinite" last interval
# Motion amplitudes (normalised units, radians): rotation vector, translation, each RBF's displacement.
ROTVEC_AMPLITUDE = (0.05, 0.12, 0.04)
TRANSLATION_AMPLITUDE = (0.04, 0.03, 0.03)
RBF_AMPLITUDE = 0.05
HARMONICS = (0.8, 1.7, 2.6)
# The fixed layout the seed jitters: centre, radii, tilt about z.
SHAPES = (((0.0, -0.05, 0.0), (0.30, 0.34, 0.24), 0.0),  # body
          ((0.0, 0.42, 0.02), (0.16, 0.16, 0.15), 0.0),  # head
          ((-0.36, 0.02, 0.05), (0.08, 0.22, 0.08), 0.45),  # arms
          ((0.36, 0.02, 0.05), (0.08, 0.22, 0.08), -0.45))
# Cameras: distance of the training path from the object, the validation rig's baseline, intrinsics per rig
# (focal as a multiple of the image width, principal point as a fraction of the size, OpenCV distortion).
CAMERA_DISTANCE = 2.6
RIG_BASELINE = 0.3
RIGS = ({"name": "train", "focal": 1.45, "pp": (0.51, 0.492), "radial": (-0.05, 0.012, 0.0),
         "tangential": (0.0008, -0.0006)},
        {"name": "val", "focal": 1.53, "pp": (0.488, 0.506), "radial": (0.035, -0.01, 0.002),
         "tangential": (-0.0005, 0.0007)})


@dataclass(frozen=True)
class NonrigidPreset:
    """``frames`` instants (each seen by both rigs: 2 x frames images), square images of ``size`` px, ``samples``
    per ray across the object ball, ``points`` background points, images written at ``scales`` (1x, 2x, ...);
    ``motion`` multiplies the rigid motion's amplitudes (rotation and translation) and ``rbf_motion`` the RBF
    displacements' (the same seeded paths, scaled; 1 and 1 are the base motion)."""

    frames: int
    size: int
    samples: int
    points: int
    scales: tuple[int, ...] = (1, 2)
    chunk: int = 256  # rays per rendering chunk (bounds memory: chunk x samples points at a time)
    motion: float = 1.0
    rbf_motion: float = 1.0

    def __post_init__(self) -> None:
        if self.frames < 2 or self.size < 8 or self.samples < 8 or self.points < 1 or 1 not in self.scales:
            raise ValueError(f"NonrigidPreset: expected frames >= 2, size >= 8, samples >= 8, points >= 1 and scale "
                             f"1 among scales, got {self}")
        for name in ("motion", "rbf_motion"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 < v <= 8.0:
                raise ValueError(f"NonrigidPreset.{name}: expected a number in (0, 8] (a factor of the motion "
                                 f"amplitudes), got {v!r}")
        if any(self.size % s for s in self.scales):
            raise ValueError(f"NonrigidPreset: size {self.size} must be divisible by every scale {self.scales}")


PRESETS = {
    "tiny": NonrigidPreset(frames=4, size=32, samples=96, points=256),
    "small": NonrigidPreset(frames=40, size=128, samples=128, points=4096),
    "large": NonrigidPreset(frames=60, size=200, samples=192, points=8192),
    # `small` with 4x the rigid motion and 2x the RBF displacements (mean motion at the surface ~3.5x: ~5 px at
    # 64 px instead of ~1.5); the RBFs only 2x so the warp stays invertible (min det J ~0.35; 0.66 at 1x, < 0 at 4x);
    # 160 samples across the larger object ball keep the ray spacing of `small`
    "small-motion4": NonrigidPreset(frames=40, size=128, samples=160, points=4096, motion=4.0, rbf_motion=2.0),
}


# ------------------------------------------------------------------------------------------------ parameters
def _rotation(rotvec: Tensor) -> Tensor:
    """Rodrigues: rotation matrices (..., 3, 3) of rotation vectors (..., 3), exact at zero (Taylor below 1e-4)."""
    theta2 = (rotvec * rotvec).sum(-1)
    theta = theta2.sqrt()
    small = theta < 1e-4
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 1.0 - theta2 / 6.0, torch.sin(safe) / safe)  # sin(t) / t
    b = torch.where(small, 0.5 - theta2 / 24.0, (1.0 - torch.cos(safe)) / (safe * safe))  # (1 - cos t) / t^2
    x, y, z = rotvec.unbind(-1)
    zero = torch.zeros_like(x)
    k = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], dim=-1).reshape(*rotvec.shape[:-1], 3, 3)
    eye = torch.eye(3, dtype=rotvec.dtype, device=rotvec.device).expand_as(k)
    return eye + a[..., None, None] * k + b[..., None, None] * (k @ k)


@dataclass(frozen=True)
class NonrigidParams:
    """The analytic scene and motion of a capture (float64 tensors; see the module docstring for the formulas).

    Shapes (S of them): shape_center (S, 3), shape_radii (S, 3), shape_axes (S, 3, 3) (columns = the ellipsoid's
    axes), color_base (S, 3), color_dirs (S, 3, 3) (row c = the stripe direction of channel c), color_freq (S,),
    color_phase (S, 3). Background: plane_z, plane_base (3,), plane_freq (2,), plane_phase (3, 2).
    Warp (K RBFs, F frames): rbf_center (K, 3), rbf_width (K,), times (F,), rotvec (F, 3), rotation (F, 3, 3),
    translation (F, 3), rbf_amplitude (F, K, 3), object_radius (F,) (the ball the deformed object stays in).
    Scalars: density_max, softness, mask_inner, mask_outer.
    """

    shape_center: Tensor
    shape_radii: Tensor
    shape_axes: Tensor
    color_base: Tensor
    color_dirs: Tensor
    color_freq: Tensor
    color_phase: Tensor
    plane_z: float
    plane_base: Tensor
    plane_freq: Tensor
    plane_phase: Tensor
    rbf_center: Tensor
    rbf_width: Tensor
    times: Tensor
    rotvec: Tensor
    rotation: Tensor
    translation: Tensor
    rbf_amplitude: Tensor
    object_radius: Tensor
    density_max: float
    softness: float
    mask_inner: float
    mask_outer: float

    @property
    def frames(self) -> int:
        return self.times.shape[0]

    @classmethod
    def from_json(cls, d: dict) -> NonrigidParams:
        """From the ``scene`` and ``warp`` entries of ``truth/params.json``."""
        def t(v):
            return torch.tensor(v, dtype=torch.float64)

        sc, wp = d["scene"], d["warp"]
        shapes, frames = sc["shapes"], wp["frames"]
        rotvec = t([f["rotvec"] for f in frames])
        return cls(
            shape_center=t([s["center"] for s in shapes]), shape_radii=t([s["radii"] for s in shapes]),
            shape_axes=_rotation(t([s["rotvec"] for s in shapes])), color_base=t([s["color_base"] for s in shapes]),
            color_dirs=_rotation(t([s["color_rotvec"] for s in shapes])),
            color_freq=t([s["color_freq"] for s in shapes]), color_phase=t([s["color_phase"] for s in shapes]),
            plane_z=float(sc["plane"]["z"]), plane_base=t(sc["plane"]["base"]), plane_freq=t(sc["plane"]["freq"]),
            plane_phase=t(sc["plane"]["phase"]), rbf_center=t(wp["rbf_center"]), rbf_width=t(wp["rbf_width"]),
            times=t([f["time"] for f in frames]), rotvec=rotvec, rotation=_rotation(rotvec),
            translation=t([f["translation"] for f in frames]), rbf_amplitude=t([f["rbf_amplitude"] for f in frames]),
            object_radius=t([f["object_radius"] for f in frames]), density_max=float(sc["density_max"]),
            softness=float(sc["softness"]), mask_inner=float(wp["mask_inner"]), mask_outer=float(wp["mask_outer"]))

    def to(self, dtype: torch.dtype) -> NonrigidParams:
        return NonrigidParams(**{f.name: v.to(dtype) if isinstance(v := getattr(self, f.name), Tensor) else v
                                 for f in fields(self)})


def _path(rng: np.random.Generator, amplitude, shape: tuple[int, ...]) -> np.ndarray:
    """Weights (len(HARMONICS), *shape) of smooth paths ``amplitude * sum_j w_j sin(pi n_j u) / sum_j |w_j|``."""
    w = rng.uniform(-1.0, 1.0, (len(HARMONICS), *shape))
    return w / np.abs(w).sum(0, keepdims=True) * np.asarray(amplitude, dtype=np.float64)


def _eval_path(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The paths of :func:`_path` at times ``u`` (F,): (F, *shape)."""
    s = np.sin(np.pi * np.asarray(HARMONICS)[:, None] * u[None, :])  # (J, F)
    return np.einsum("jf,j...->f...", s, w)


def _r(a, digits: int = 10):
    """Nested lists of floats rounded to ``digits`` decimals: the JSON files define the scene, not the float64
    draws, so a last-bit difference between platforms rarely changes a byte."""
    return np.round(np.asarray(a, dtype=np.float64), digits).tolist()


def _support_radius(shapes: list[dict], directions: int = 20000) -> float:
    """The radius of a ball (about the origin) outside which every shape's density is below its support level
    ``g <= SUPPORT * softness``. Along a ray ``c_k + t u`` from a shape's centre ``|q| = t alpha(u)`` and
    ``|diag(1 / r) q| = t beta(u)``, so ``g = (alpha / beta) (t alpha - 1)`` is affine in ``t``: the support ends at
    ``t = (1 + G beta / alpha) / alpha``, exactly; the maximum over ``directions`` directions (a Fibonacci sphere) is
    taken with a 0.01 margin."""
    gap = SUPPORT * SOFTNESS
    k = np.arange(directions) + 0.5
    polar, azimuth = np.arccos(1.0 - 2.0 * k / directions), np.pi * (1.0 + 5.0 ** 0.5) * k
    u = np.stack([np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)], axis=-1)
    radius = 0.0
    for shape in shapes:
        radii = np.asarray(shape["radii"])
        axes = _rotation(torch.tensor(shape["rotvec"], dtype=torch.float64)).numpy()
        local = u @ axes  # Q^T u per direction
        alpha = np.linalg.norm(local / radii, axis=-1)
        beta = np.linalg.norm(local / radii ** 2, axis=-1)
        t = (1.0 + gap * beta / alpha) / alpha
        radius = max(radius, float(np.linalg.norm(np.asarray(shape["center"]) + t[:, None] * u, axis=-1).max()))
    return radius + 0.01


def _object_radius(support: float, rotvec, translation, amplitude, rbf_center, rbf_width) -> float:
    """The radius of a ball holding the deformed object of one frame: the largest ``r`` with
    ``r - D(r) <= support``, where ``D(r) = m(r) (theta r + |t| + sum_k |a_k| exp(-max(0, r - |mu_k|)^2 / (2 s_k^2)))``
    bounds ``|W(x) - x|`` on ``|x| = r`` (so ``|W(x)| > support`` beyond it); a 0.01 margin covers the grid."""
    r = np.linspace(0.0, MASK_OUTER, 14801)
    s = np.clip((r - MASK_INNER) / (MASK_OUTER - MASK_INNER), 0.0, 1.0)
    m = 1.0 - s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)
    gap = np.maximum(0.0, r[:, None] - np.linalg.norm(rbf_center, axis=-1))
    rbf = (np.linalg.norm(amplitude, axis=-1) * np.exp(-gap ** 2 / (2.0 * np.asarray(rbf_width) ** 2))).sum(-1)
    bound = m * (np.linalg.norm(rotvec) * r + np.linalg.norm(translation) + rbf)
    inside = r - bound <= support
    return float(r[inside].max()) + 0.01


def _draw_params(seed: int, frames: int, motion: float = 1.0, rbf_motion: float = 1.0) -> dict:
    """The scene and motion for ``seed`` (independent of the preset but for the frame times and the factors of the
    rigid and RBF amplitudes) as JSON entries."""
    scene_rng, warp_rng, _, _ = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    shapes = []
    for center, radii, tilt in SHAPES:
        shapes.append({
            "center": _r(np.asarray(center) + scene_rng.uniform(-0.03, 0.03, 3)),
            "radii": _r(np.asarray(radii) * scene_rng.uniform(0.92, 1.08, 3)),
            "rotvec": _r(np.array([0.0, 0.0, tilt]) + scene_rng.uniform(-0.15, 0.15, 3)),
            "color_base": _r(scene_rng.uniform(0.3, 0.7, 3)),
            "color_rotvec": _r(scene_rng.uniform(-np.pi, np.pi, 3)),
            "color_freq": _r(scene_rng.uniform(14.0, 22.0)),
            "color_phase": _r(scene_rng.uniform(0.0, 2 * np.pi, 3)),
        })
    plane = {"z": PLANE_Z, "base": _r(scene_rng.uniform(0.45, 0.7, 3)), "freq": _r(scene_rng.uniform(7.0, 11.0, 2)),
             "phase": _r(scene_rng.uniform(0.0, 2 * np.pi, (3, 2)))}
    k = len(SHAPES)
    rbf_center = _r(np.array([s["center"] for s in shapes]) + warp_rng.uniform(-0.05, 0.05, (k, 3)))
    rbf_width = _r(warp_rng.uniform(0.16, 0.24, k))
    u = np.arange(frames) / (frames - 1)
    rot = _r(_eval_path(_path(warp_rng, np.multiply(ROTVEC_AMPLITUDE, motion), (3,)), u))
    trans = _r(_eval_path(_path(warp_rng, np.multiply(TRANSLATION_AMPLITUDE, motion), (3,)), u))
    amp = _r(_eval_path(_path(warp_rng, RBF_AMPLITUDE * rbf_motion, (k, 3)), u))
    support = _support_radius(shapes)
    frame_list = []
    for f in range(frames):
        radius = _object_radius(support, rot[f], trans[f], amp[f], rbf_center, rbf_width)
        frame_list.append({"frame": f, "time": _r(u[f]), "rotvec": rot[f], "translation": trans[f],
                           "rbf_amplitude": amp[f], "object_radius": _r(radius)})
    if max(f["object_radius"] for f in frame_list) >= -(PLANE_Z + PLANE_TOP * SOFTNESS):
        raise ValueError("nonrigid: the object ball reaches the plane's samples; lower the motion amplitudes")
    return {"scene": {"shapes": shapes, "plane": plane, "density_max": DENSITY_MAX, "softness": SOFTNESS,
                      "support_radius": _r(support)},
            "warp": {"mask_inner": MASK_INNER, "mask_outer": MASK_OUTER, "rbf_center": rbf_center,
                     "rbf_width": rbf_width, "frames": frame_list}}


# ------------------------------------------------------------------------------------------------ the fields
def _as_params(params) -> NonrigidParams:
    p = getattr(params, "params", params)
    if not isinstance(p, NonrigidParams):
        raise ValueError(f"params: expected NonrigidParams or NonrigidTruth, got {type(params).__name__}")
    return p


def _check_points(x: Tensor, name: str = "x") -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.ndim < 1 or x.shape[-1] != 3:
        raise ValueError(f"{name}: expected a floating-point tensor (..., 3), got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")


def _check_frame(frame, frames: int):
    """``frame`` as an int or an int64 tensor of warp ids in [0, frames) (ValueError otherwise)."""
    if isinstance(frame, Tensor):
        if frame.dtype != torch.long:
            raise ValueError(f"frame: expected an int or an int64 tensor, got {frame.dtype}")
        if frame.ndim == 0:
            frame = int(frame)
    elif isinstance(frame, bool) or not isinstance(frame, int):
        raise ValueError(f"frame: expected an int or an int64 tensor, got {type(frame).__name__}")
    bad = bool(((frame < 0) | (frame >= frames)).any()) if isinstance(frame, Tensor) else not 0 <= frame < frames
    if bad:
        raise ValueError(f"frame: expected warp ids in [0, {frames}), got {frame}")
    return frame


def _warp_rows(p: NonrigidParams, frame: int, x: Tensor) -> tuple[Tensor, ...]:
    """``W_f`` on points stored as rows ``x`` (3, P) (contiguous per coordinate: fast elementwise maths).

    Returns ``(W_f(x) (3, P), phi (K, P), displacement (3, P), m (P,), s (P,), |x| (P,))``.
    """
    inv_var = (1.0 / (p.rbf_width * p.rbf_width))[:, None]  # (K, 1)
    sq = x[0] * x[0] + x[1] * x[1] + x[2] * x[2]
    d2 = torch.addmm((p.rbf_center * p.rbf_center).sum(-1, keepdim=True) + sq, p.rbf_center, x, alpha=-2.0)
    phi = torch.exp(-0.5 * d2.clamp(min=0.0) * inv_var)  # (K, P)
    disp = torch.addmm(p.translation[frame][:, None], p.rotation[frame], x) + p.rbf_amplitude[frame].T @ phi - x
    r = sq.sqrt()
    s = ((r - p.mask_inner) / (p.mask_outer - p.mask_inner)).clamp(0.0, 1.0)
    m = 1.0 - s * s * s * (10.0 + s * (-15.0 + 6.0 * s))  # 1 - smoothstep5: 1 on the object, 0 far out
    return x + m * disp, phi, disp, m, s, r


def true_warp(params, frame, x: Tensor, jacobian: bool = True) -> tuple[Tensor, Tensor | None]:
    """The ground-truth warp of ``frame`` from observed to canonical space: ``(W_f(x) (..., 3), dW_f/dx (..., 3, 3))``.

    ``params``: :class:`NonrigidParams` or :class:`NonrigidTruth`; ``frame``: an int (the warp id) or an int64 tensor
    broadcastable to ``x.shape[:-1]`` (one frame per point); ``x`` (..., 3) in normalised coordinates. ``J[..., i, j]
    = d W_i / d x_j`` in closed form (``None`` if not ``jacobian``); differentiable by autograd as well.
    """
    p = _as_params(params)
    _check_points(x)
    frame = _check_frame(frame, p.frames)
    p = p.to(x.dtype)
    inv_var = 1.0 / (p.rbf_width * p.rbf_width)  # (K,)
    rot, amp = p.rotation[frame], p.rbf_amplitude[frame]  # (..., 3, 3), (..., K, 3)
    if isinstance(frame, int):  # one frame: the row layout of the renderer
        xc, phi, disp, m, s, r = _warp_rows(p, frame, x.reshape(-1, 3).T.contiguous())
        xc, disp = xc.T.reshape(x.shape), disp.T.reshape(x.shape)
        phi = phi.T.reshape(*x.shape[:-1], -1)
        m, s, r = (v.view(x.shape[:-1]) for v in (m, s, r))
    else:  # a frame per point
        diff = x[..., None, :] - p.rbf_center
        phi = torch.exp(-0.5 * (diff * diff).sum(-1) * inv_var)
        disp = (rot @ x[..., None]).squeeze(-1) + p.translation[frame] + (phi[..., None] * amp).sum(-2) - x
        r = x.norm(dim=-1)
        s = ((r - p.mask_inner) / (p.mask_outer - p.mask_inner)).clamp(0.0, 1.0)
        m = 1.0 - s * s * s * (10.0 + s * (-15.0 + 6.0 * s))
        xc = x + m[..., None] * disp
    if not jacobian:
        return xc, None
    diff = x[..., None, :] - p.rbf_center  # (..., K, 3)
    grad_phi = -(phi * inv_var)[..., None] * diff  # (..., K, 3)
    j_obj = rot + torch.einsum("...ki,...kj->...ij", amp.expand_as(grad_phi), grad_phi)
    dm_dr = -30.0 * s * s * (1.0 - s) * (1.0 - s) / (p.mask_outer - p.mask_inner)  # zero outside (inner, outer)
    grad_m = (dm_dr / torch.where(r > 0, r, torch.ones_like(r)))[..., None] * x  # (..., 3)
    eye = torch.eye(3, dtype=x.dtype, device=x.device)
    jac = eye + m[..., None, None] * (j_obj - eye) + disp[..., :, None] * grad_m[..., None, :]
    return xc, jac


def _object_fields(p: NonrigidParams, y: Tensor) -> tuple[Tensor, Tensor]:
    """The object's density (P,) and density-weighted colour sum (3, P) at canonical points stored as rows (3, P)."""
    n = p.shape_center.shape[0]
    # Matrix products give every shape's q = A_k (y - c_k), diag(1 / r_k) q and colour phases as (3, n, P) blocks
    # (coordinate or channel j of shape k in row j * n + k).
    loc_w = (p.shape_axes / p.shape_radii[:, None, :]).permute(2, 0, 1).reshape(3 * n, 3)  # Q_k[:, j] / r_kj
    grad_w = loc_w / p.shape_radii.T.reshape(3 * n, 1)  # Q_k[:, j] / r_kj^2
    col_w = (p.color_freq[:, None, None] * p.color_dirs).permute(1, 0, 2).reshape(3 * n, 3)  # freq_k D_k[c]
    centers = p.shape_center.repeat(3, 1)  # (3n, 3): c_k for row j * n + k

    def affine(w: Tensor, extra: Tensor | float = 0.0) -> Tensor:  # w (y - c_k) (+ extra) as (3, n, P)
        return torch.addmm(extra - (centers * w).sum(-1, keepdim=True), w, y).view(3, n, -1)

    q = affine(loc_w)
    k0 = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2]).sqrt()  # |q| (n, P): 1 on the ellipsoid
    q = affine(grad_w)
    k1 = (q[0] * q[0] + q[1] * q[1] + q[2] * q[2]).sqrt()  # |diag(1 / r_k) q|
    rmin = p.shape_radii.min(dim=-1).values[:, None]
    g = torch.where(k1 > 1e-12, k0 / k1.clamp(min=1e-12), rmin) * (k0 - 1.0)  # ~ signed distance (exact on spheres)
    sig_k = p.density_max * torch.sigmoid(-g / p.softness)  # (n, P)
    col_k = p.color_base.T[:, :, None] + 0.25 * torch.sin(affine(col_w, p.color_phase.T.reshape(3 * n, 1)))
    return sig_k.sum(0), (sig_k * col_k).sum(1)


def _plane_fields(p: NonrigidParams, y: Tensor) -> tuple[Tensor, Tensor]:
    """The background's density (P,) and density-weighted colour (3, P) at points stored as rows (3, P)."""
    sig = p.density_max * torch.sigmoid((p.plane_z - y[2]) / p.softness)
    wave = torch.sin(p.plane_freq[None, :, None] * y[None, :2] + p.plane_phase[:, :, None])  # (3, 2, P)
    return sig, sig * (p.plane_base[:, None] + 0.2 * wave[:, 0] * wave[:, 1])


def canonical_fields(params, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The canonical scene at points ``y`` (..., 3): ``(sigma (...), rgb (..., 3), object_sigma (...))`` where
    ``sigma`` is the total density (object + background plane) and ``object_sigma`` the object's share."""
    p = _as_params(params)
    _check_points(y, "y")
    p = p.to(y.dtype)
    rows = y.reshape(-1, 3).T.contiguous()
    sig_obj, col_obj = _object_fields(p, rows)
    sig_bg, col_bg = _plane_fields(p, rows)
    sigma = sig_obj + sig_bg
    rgb = (col_obj + col_bg) / (sigma + 1e-10)
    shape = y.shape[:-1]
    return sigma.reshape(shape), rgb.T.reshape(*shape, 3), sig_obj.reshape(shape)


# ------------------------------------------------------------------------------------------------ rendering
def _composite(rgb: Tensor, sigma: Tensor, z: Tensor, rays_d: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """NeRF's quadrature (eq. 3), the same arithmetic as ``paperzoo.papers.nerf.render.composite`` (the data layer
    cannot import a paper; a test holds the two equal): ``(rgb on white, depth, acc, weights)``."""
    delta = torch.cat([z[:, 1:] - z[:, :-1], torch.full_like(z[:, :1], LAST_DELTA)], dim=-1)
    delta = delta * rays_d.norm(dim=-1, keepdim=True)
    alpha = 1.0 - torch.exp(-sigma * delta)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], dim=-1), dim=-1)[:, :-1]
    weights = alpha * trans
    acc = weights.sum(dim=-1)
    color = (weights[..., None] * rgb).sum(dim=-2) + (1.0 - acc[..., None])
    return color, (weights * z).sum(dim=-1), acc, weights


def _segments(p: NonrigidParams, frame: int, o: Tensor, d: Tensor, samples: int,
              plane_samples: int) -> tuple[Tensor, Tensor]:
    """Depths (R, samples) across the frame's object ball and (R, plane_samples) across the plane's edge."""
    radius = float(p.object_radius[frame])
    a, b = (d * d).sum(-1), (o * d).sum(-1)
    disc = b * b - a * ((o * o).sum(-1) - radius * radius)
    root = disc.clamp(min=0.0).sqrt()
    t_in = ((-b - root) / a).clamp(min=0.0)
    t_out = torch.where(disc > 0, (-b + root) / a, t_in).clamp(min=t_in)  # a missed ball: one point, no weight
    u = torch.linspace(0.0, 1.0, samples, dtype=o.dtype, device=o.device)
    z_obj = t_in[:, None] + (t_out - t_in)[:, None] * u
    dz = d[:, 2]
    hits = dz < -1e-6
    safe = torch.where(hits, dz, -torch.ones_like(dz))
    top = (p.plane_z + PLANE_TOP * p.softness - o[:, 2]) / safe
    bottom = (p.plane_z - FAR_MARGIN - o[:, 2]) / safe
    top = torch.where(hits, top, t_out + 1.0).clamp(min=t_out)  # rays that never reach the plane: empty space
    bottom = torch.where(hits, bottom, t_out + 2.0)
    v = torch.linspace(0.0, 1.0, plane_samples, dtype=o.dtype, device=o.device)
    return z_obj, top[:, None] + (bottom - top)[:, None] * v


def render_nonrigid(params, frame: int, origins: Tensor, directions: Tensor, samples: int = 192,
                    plane_samples: int = PLANE_SAMPLES, chunk: int = 256) -> dict[str, Tensor]:
    """Ground-truth rendering of rays ``origins``, ``directions`` (R, 3) (normalised coordinates) at ``frame``.

    Returns ``{"rgb": (R, 3), "depth": (R,), "alpha": (R,), "object_alpha": (R,)}`` in the rays' dtype: the colour on
    white, the expected termination distance ``sum_i w_i t_i`` (in units of ``|d|``), the opacity ``sum_i w_i`` and
    the object's part of it (the weight of the object segment). ``chunk`` rays at a time.
    """
    p = _as_params(params)
    frame = _check_frame(frame, p.frames)
    if not isinstance(frame, int):
        raise ValueError("render_nonrigid: expected one frame (an int)")
    for name, r in (("origins", origins), ("directions", directions)):
        if not isinstance(r, Tensor) or not r.is_floating_point() or r.ndim != 2 or r.shape[-1] != 3:
            raise ValueError(f"{name}: expected a floating-point tensor (rays, 3), got "
                             f"{getattr(r, 'dtype', type(r).__name__)} {tuple(getattr(r, 'shape', ()))}")
    if origins.shape != directions.shape or samples < 2 or plane_samples < 2 or chunk < 1:
        raise ValueError(f"render_nonrigid: expected origins and directions of one shape, samples >= 2, "
                         f"plane_samples >= 2, chunk >= 1, got {tuple(origins.shape)}, {tuple(directions.shape)}, "
                         f"{samples}, {plane_samples}, {chunk}")
    p = p.to(origins.dtype)
    parts = []
    for i in range(0, origins.shape[0], chunk):
        o, d = origins[i:i + chunk], directions[i:i + chunk]
        z_obj, z_bg = _segments(p, frame, o, d, samples, plane_samples)
        x = (o.T[:, :, None] + d.T[:, :, None] * z_obj).reshape(3, -1)  # (3, r * samples): rows per coordinate
        y = _warp_rows(p, frame, x)[0]
        sig_obj, col_obj = _object_fields(p, y)  # the plane is negligible in the object ball
        sig_bg, col_bg = _plane_fields(p, (o.T[:, :, None] + d.T[:, :, None] * z_bg).reshape(3, -1))
        sigma = torch.cat([sig_obj.view(z_obj.shape), sig_bg.view(z_bg.shape)], dim=1)  # (r, S)
        col = torch.cat([col_obj.view(3, *z_obj.shape), col_bg.view(3, *z_bg.shape)], dim=2)  # (3, r, S)
        color, depth, acc, weights = _composite((col / (sigma + 1e-10)).permute(1, 2, 0), sigma,
                                                torch.cat([z_obj, z_bg], dim=1), d)
        parts.append((color, depth, acc, weights[:, :samples].sum(-1)))
    keys = ("rgb", "depth", "alpha", "object_alpha")
    return {k: torch.cat([q[j] for q in parts]) for j, k in enumerate(keys)}


# ------------------------------------------------------------------------------------------------ cameras
def _look_at(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera rotation (rows: x right, y down, z forward) of a camera at ``position`` facing ``target``,
    world +y up."""
    fwd = target - position
    fwd = fwd / np.linalg.norm(fwd)
    right = np.cross(fwd, np.array([0.0, 1.0, 0.0]))
    right = right / np.linalg.norm(right)
    return np.stack([right, np.cross(fwd, right), fwd])


def _camera_dicts(seed: int, frames: int, size: int) -> list[list[dict]]:
    """``[rig][frame]`` camera JSON dicts (world units) for both rigs."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[2])
    ph = rng.uniform(0.0, 2 * np.pi, 5)
    u = np.arange(frames) / (frames - 1)
    centre = np.stack([0.32 * np.sin(2 * np.pi * 0.55 * u + ph[0]), 0.12 * np.sin(2 * np.pi * 0.8 * u + ph[1]),
                       CAMERA_DISTANCE + 0.08 * np.sin(2 * np.pi * 0.6 * u + ph[2])], axis=-1)
    target = np.stack([0.03 * np.sin(2 * np.pi * 0.7 * u + ph[3]), 0.05 + 0.03 * np.sin(2 * np.pi * 0.9 * u + ph[4]),
                       np.zeros_like(u)], axis=-1)
    out = []
    for k, rig in enumerate(RIGS):
        cams = []
        for f in range(frames):
            pos = centre[f]
            if k:  # the validation rig: a fixed baseline to the right of the training camera
                pos = pos + RIG_BASELINE * _look_at(centre[f], target[f])[0]
            world = pos / SCENE_SCALE + np.asarray(SCENE_CENTER)
            cams.append({"orientation": _r(_look_at(pos, target[f]), 12), "position": _r(world, 12),
                         "focal_length": _r(rig["focal"] * size), "principal_point": _r(np.asarray(rig["pp"]) * size),
                         "skew": 0.0, "pixel_aspect_ratio": 1.0, "radial_distortion": list(rig["radial"]),
                         "tangential": list(rig["tangential"]), "image_size": [size, size]})
        out.append(cams)
    return out


# ------------------------------------------------------------------------------------------------ writing
def _dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _save_png(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.round(np.clip(rgb, 0.0, 1.0) * 255.0).astype(np.uint8)).save(path, format="PNG")


def _hash_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): sha256_file(p)
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def _verify(root: Path) -> dict:
    """The manifest of ``root`` after checking every file's sha256 (ValueError naming the first mismatch)."""
    path = root / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is missing or damaged ({e!r}); regenerate the capture with generate_nonrigid") from e
    have = _hash_files(root)
    for rel, digest in files.items():
        if have.get(rel) != digest:
            what = "is missing" if rel not in have else "does not match its sha256 in manifest.json"
            raise ValueError(f"{root / rel} {what}; the capture was changed after generation: regenerate it with "
                             f"generate_nonrigid(preset={manifest.get('preset')!r}, seed={manifest.get('seed')!r}) "
                             f"into an empty folder")
    return manifest


def _cfg_json(cfg: NonrigidPreset) -> dict:
    """The preset as JSON; the motion factors only when they are not 1, so the captures written before they existed
    keep their bytes and manifests."""
    return {f.name: list(v) if isinstance(v := getattr(cfg, f.name), tuple) else v for f in fields(cfg)
            if not (f.name in ("motion", "rbf_motion") and getattr(cfg, f.name) == 1.0)}


def generate_nonrigid(out_dir: str | os.PathLike, preset: str | NonrigidPreset = "small", seed: int = 0,
                      progress: bool = True) -> Path:
    """Write the capture of ``preset`` ('tiny', 'small', 'large' or a :class:`NonrigidPreset`) for ``seed`` to
    ``out_dir`` and return it; the same seed gives the same bytes (``manifest.json`` lists every file's sha256).

    ``out_dir`` must not exist, be empty, or already hold this very capture (same preset and seed, every file
    matching the manifest: it is returned as is, nothing is rendered). The folder appears complete or not at all
    (written next to it, then renamed).
    """
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; valid: {tuple(PRESETS)} or a NonrigidPreset")
        name, cfg = preset, PRESETS[preset]
    elif isinstance(preset, NonrigidPreset):
        name, cfg = "custom", preset
    else:
        raise ValueError(f"preset: expected a name in {tuple(PRESETS)} or a NonrigidPreset, got {preset!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        try:
            manifest = _verify(out)
        except ValueError as e:
            raise ValueError(f"{out} exists and is not a complete capture ({e}); remove it or choose another "
                             f"folder") from None
        if (manifest.get("preset"), manifest.get("seed"), manifest.get("config")) != (name, seed, _cfg_json(cfg)):
            raise ValueError(f"{out} holds the capture of preset {manifest.get('preset')!r} seed "
                             f"{manifest.get('seed')!r}, not {name!r} seed {seed}; remove it or choose another folder")
        return out
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        _write(tmp, name, cfg, seed, progress)
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _write(root: Path, name: str, cfg: NonrigidPreset, seed: int, progress: bool) -> None:
    f_count, size = cfg.frames, cfg.size
    truth = _draw_params(seed, f_count, cfg.motion, cfg.rbf_motion)
    rig_dicts = _camera_dicts(seed, f_count, size)
    ids = [[f"{rig['name']}_{f:06d}" for f in range(f_count)] for rig in RIGS]
    # Cameras exactly as the reader sees them: parsed back from the JSON dicts and normalised.
    cams = [Cameras.cat([camera_from_json(c, "generated", SCENE_CENTER, SCENE_SCALE, torch.float64) for c in rig])
            for rig in rig_dicts]
    rays = [c.rays() for c in cams]  # (F, H, W, 3) pairs per rig
    if max(float(d[..., 2].max()) for _, d in rays) > -0.1:
        raise ValueError("nonrigid camera setup: every ray must face the background plane (direction z < -0.1)")
    radius = max(f["object_radius"] for f in truth["warp"]["frames"])
    near = math.floor((min(float(c.position.norm(dim=-1).min()) for c in cams) - radius) * 10.0) / 10.0
    far = math.ceil((max(float(((PLANE_Z - FAR_MARGIN - o[..., 2]) / d[..., 2]).max()) for o, d in rays)) * 10) / 10
    truth.update({"format": FORMAT, "preset": name, "seed": seed, "config": _cfg_json(cfg),
                  "ids": ids[0] + ids[1], "rigs": [rig["name"] for rig in RIGS],
                  "normalisation": {"scale": SCENE_SCALE, "center": list(SCENE_CENTER)},
                  "render": {"samples": cfg.samples, "plane_samples": PLANE_SAMPLES, "plane_top": PLANE_TOP,
                             "far_margin": FAR_MARGIN, "white_background": True, "dtype": "float64",
                             "near": near, "far": far}})
    params = NonrigidParams.from_json(truth)

    depth, alpha, obj_alpha, bg_candidates = [], [], [], []
    bar = _Progress(progress, 2 * f_count, f"nonrigid {name} seed {seed}")
    try:
        for k in range(len(RIGS)):
            for f in range(f_count):
                o, d = rays[k][0][f].reshape(-1, 3), rays[k][1][f].reshape(-1, 3)
                out = render_nonrigid(params, f, o, d, cfg.samples, PLANE_SAMPLES, cfg.chunk)
                rgb = out["rgb"].reshape(size, size, 3).numpy()
                for s in cfg.scales:
                    small = rgb.reshape(size // s, s, size // s, s, 3).mean(axis=(1, 3))
                    _save_png(root / "rgb" / f"{s}x" / f"{ids[k][f]}.png", small)
                depth.append(out["depth"].reshape(size, size).float().numpy())
                alpha.append(out["alpha"].reshape(size, size).float().numpy())
                obj_alpha.append(out["object_alpha"].reshape(size, size).float().numpy())
                if k == 0:  # background pixels of training views: opaque, no object
                    seen = (out["object_alpha"] < 1e-4) & (out["alpha"] > 0.999)
                    bg_candidates.append(torch.nonzero(seen).squeeze(-1) + f * size * size)
                _dump(root / "camera" / f"{ids[k][f]}.json", rig_dicts[k][f])
                bar.advance()
    finally:
        bar.close()

    # Background points: plane hits of randomly chosen background pixels of the training rig (exactly on the plane).
    cand = torch.cat(bg_candidates).numpy()
    if cand.size < cfg.points:
        raise ValueError(f"only {cand.size} background pixels for {cfg.points} points; lower NonrigidPreset.points")
    pts_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[3])
    pick = torch.from_numpy(cand[np.sort(pts_rng.choice(cand.size, cfg.points, replace=False))])
    o_all, d_all = rays[0][0].reshape(-1, 3)[pick], rays[0][1].reshape(-1, 3)[pick]
    pts = o_all + d_all * ((PLANE_Z - o_all[:, 2]) / d_all[:, 2])[:, None]
    pts[:, 2] = PLANE_Z
    world = pts.numpy() / SCENE_SCALE + np.asarray(SCENE_CENTER)
    np.save(root / "points.npy", world)

    all_ids = ids[0] + ids[1]
    _dump(root / "dataset.json", {"count": len(all_ids), "num_exemplars": f_count, "ids": all_ids,
                                  "train_ids": ids[0], "val_ids": ids[1]})
    _dump(root / "metadata.json", {ids[k][f]: {"warp_id": f, "appearance_id": f, "camera_id": k,
                                               "time": truth["warp"]["frames"][f]["time"]}
                                   for k in range(len(RIGS)) for f in range(f_count)})
    _dump(root / "scene.json", {"scale": SCENE_SCALE, "center": list(SCENE_CENTER), "near": near, "far": far,
                                "bbox": [_r(world.min(0)), _r(world.max(0))]})
    _dump(root / "truth" / "params.json", truth)
    np.save(root / "truth" / "depth.npy", np.stack(depth))
    np.save(root / "truth" / "alpha.npy", np.stack(alpha))
    np.save(root / "truth" / "object_alpha.npy", np.stack(obj_alpha))
    _dump(root / "manifest.json", {"format": FORMAT, "preset": name, "seed": seed, "config": _cfg_json(cfg),
                                   "files": _hash_files(root)})


class _Progress:
    """A rich bar over the images when enabled (and nothing otherwise)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn())
            self.bar.start()
            self.task = self.bar.add_task(label, total=total)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


# ------------------------------------------------------------------------------------------------ reading
@dataclass
class NonrigidTruth:
    """The ground truth of a generated capture: ``params`` (the analytic scene and warp), ``ids`` (the order of the
    arrays), depth, alpha and object_alpha (N, H, W) float32 at 1x, points (P, 3) float64 background points in
    normalised coordinates, the ``manifest`` (preset, seed, sha256 of every file) and ``meta`` (params.json)."""

    root: Path
    params: NonrigidParams
    ids: tuple[str, ...]
    depth: Tensor
    alpha: Tensor
    object_alpha: Tensor
    points: Tensor
    manifest: dict
    meta: dict

    def index(self, item: str) -> int:
        """The position of image id ``item`` in the arrays."""
        try:
            return self.ids.index(item)
        except ValueError:
            raise ValueError(f"unknown id {item!r}; this capture has {len(self.ids)} ids such as "
                             f"{self.ids[:2]}") from None


def load_nonrigid_truth(path: str | os.PathLike, verify: bool = True) -> NonrigidTruth:
    """Read the ground truth of the capture in ``path`` (written by :func:`generate_nonrigid`); with ``verify``,
    check every file against ``manifest.json`` first (ValueError naming the first file that differs)."""
    root = Path(path)
    meta_path = root / "truth" / "params.json"
    if not meta_path.is_file():
        raise ValueError(f"{meta_path} is missing: {root} is not a capture written by generate_nonrigid")
    try:
        manifest = _verify(root) if verify else json.loads((root / "manifest.json").read_text())
    except OSError as e:
        raise ValueError(f"{root / 'manifest.json'} is unreadable ({e}); regenerate the capture") from e
    try:
        meta = json.loads(meta_path.read_text())
        params = NonrigidParams.from_json(meta)
        scale, center = float(meta["normalisation"]["scale"]), np.asarray(meta["normalisation"]["center"])
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise ValueError(f"{meta_path} is damaged or of another format ({e!r}); expected {FORMAT!r}; regenerate "
                         f"the capture") from e
    arrays = {k: torch.from_numpy(np.load(root / "truth" / f"{k}.npy")) for k in ("depth", "alpha", "object_alpha")}
    points = torch.from_numpy((np.load(root / "points.npy") - center) * scale)
    return NonrigidTruth(root=root, params=params, ids=tuple(meta["ids"]), points=points, manifest=manifest,
                         meta=meta, **arrays)
