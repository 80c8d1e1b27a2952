"""Rays, sampling and volume rendering (Mildenhall et al., 2020, sec. 4 and 5.2), batched over rays and samples.

In the paper's order:

1. :func:`get_rays`: one ray per pixel from a camera-to-world pose and the focal length (Blender/OpenGL camera:
   x right, y up, looking down -z; pixel ``(i, j)`` at ``((i - W/2) / f, -(j - H/2) / f, -1)`` as the official code).
2. :func:`stratified_samples` (eq. 2): ``N_c`` depths, one uniform draw in each of ``N_c`` evenly spaced bins
   between ``near`` and ``far`` (bin midpoints as edges, as the official code), evenly spaced at evaluation.
3. :func:`composite` (eq. 3): ``C(r) = sum_i T_i (1 - exp(-sigma_i delta_i)) c_i``, ``T_i = prod_{j<i}
   exp(-sigma_j delta_j)``; ``delta_i`` is the gap to the next sample times ``|d|`` (the last gap is 1e10); a white
   background adds ``1 - sum_i w_i``.
4. :func:`sample_pdf` (eq. 5): ``N_f`` more depths drawn from the piecewise-constant PDF of the coarse weights
   (inverse transform sampling on the bin midpoints; weights[1:-1] + 1e-5; deterministic ``u`` at evaluation).
5. :func:`render_rays`: the coarse network on the stratified depths, the fine network on the sorted union of both
   sets; the new depths carry no gradient and nothing flows from the fine pass into the coarse one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .model import NeRFConfig, NeRFMLP

__all__ = ["NeRF", "RenderConfig", "RenderOutput", "composite", "get_rays", "render_image", "render_rays", "sample_pdf",
           "stratified_samples"]

LAST_DELTA = 1e10  # the official code's "infinite" last interval


# ------------------------------------------------------------------------------------------------ 1. rays
def get_rays(height: int, width: int, focal: float, c2w: Tensor, pixel_offset: float = 0.0) -> tuple[Tensor, Tensor]:
    """Ray origins and (unnormalised) directions, each ``(..., H, W, 3)``, for poses ``c2w`` ``(..., 4, 4)`` or
    ``(..., 3, 4)``. ``pixel_offset=0.5`` aims at pixel centres (nerfstudio); 0 is the official code's choice."""
    _check_pose(c2w)
    _check_image_size(height, width, focal)
    dev, dt = c2w.device, c2w.dtype
    j, i = torch.meshgrid(torch.arange(height, device=dev, dtype=dt), torch.arange(width, device=dev, dtype=dt),
                          indexing="ij")  # (H, W): row j, column i
    cam = torch.stack([(i + pixel_offset - 0.5 * width) / focal, -(j + pixel_offset - 0.5 * height) / focal,
                       -torch.ones_like(i)], dim=-1)  # (H, W, 3) in camera axes
    rot = c2w[..., None, None, :3, :3]  # (..., 1, 1, 3, 3)
    rays_d = (rot @ cam[..., None]).squeeze(-1)  # (..., H, W, 3): R d_cam
    rays_o = c2w[..., None, None, :3, 3].expand_as(rays_d)  # the camera centre
    return rays_o, rays_d


# ------------------------------------------------------------------------------------------------ 2. stratified
def stratified_samples(near: float, far: float, num_samples: int, num_rays: int, perturb: bool,
                       generator: torch.Generator | None = None, device=None, dtype=torch.float32) -> Tensor:
    """Depths ``(num_rays, num_samples)``, sorted: ``t_i ~ U[lower_i, upper_i]`` between midpoints (eq. 2)."""
    if not 0 <= near < far:
        raise ValueError(f"expected 0 <= near < far, got near={near}, far={far}")
    t = torch.linspace(0.0, 1.0, num_samples, device=device, dtype=dtype)
    z = (near * (1.0 - t) + far * t).expand(num_rays, num_samples)  # evenly spaced from near to far
    if not perturb:
        return z.contiguous()
    mids = 0.5 * (z[:, 1:] + z[:, :-1])
    upper = torch.cat([mids, z[:, -1:]], dim=-1)
    lower = torch.cat([z[:, :1], mids], dim=-1)
    u = torch.rand(z.shape, generator=generator, device=device, dtype=dtype)
    return lower + (upper - lower) * u


# ------------------------------------------------------------------------------------------------ 3. compositing
@dataclass
class Composite:
    rgb: Tensor  # (R, 3)
    depth: Tensor  # (R,)
    acc: Tensor  # (R,) opacity sum_i w_i
    weights: Tensor  # (R, S) w_i = T_i alpha_i


def composite(rgb: Tensor, sigma: Tensor, z: Tensor, rays_d: Tensor, white_background: bool = True) -> Composite:
    """Volume rendering of samples ``rgb`` (R, S, 3), ``sigma`` (R, S) >= 0 at depths ``z`` (R, S) (eq. 3)."""
    delta = torch.cat([z[:, 1:] - z[:, :-1], torch.full_like(z[:, :1], LAST_DELTA)], dim=-1)  # (R, S)
    delta = delta * rays_d.norm(dim=-1, keepdim=True)  # depths are along d, distances in world units
    alpha = 1.0 - torch.exp(-sigma * delta)  # alpha_i = 1 - exp(-sigma_i delta_i)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], dim=-1), dim=-1)[:, :-1]
    weights = alpha * trans  # w_i = T_i alpha_i, T_i = prod_{j<i} (1 - alpha_j)
    color = (weights[..., None] * rgb).sum(dim=-2)  # C(r) = sum_i w_i c_i
    acc = weights.sum(dim=-1)
    if white_background:
        color = color + (1.0 - acc[..., None])  # what the rays do not hit is white
    return Composite(color, (weights * z).sum(dim=-1), acc, weights)


# ------------------------------------------------------------------------------------------------ 4. hierarchical
def sample_pdf(bins: Tensor, weights: Tensor, num_samples: int, deterministic: bool,
               generator: torch.Generator | None = None) -> Tensor:
    """Inverse-transform samples ``(R, num_samples)`` from the piecewise-constant PDF with ``weights`` (R, B-1) on the
    intervals between ``bins`` (R, B) (eq. 5). ``u`` is evenly spaced in [0, 1] when ``deterministic``."""
    _check_pdf(bins, weights)
    weights = weights + 1e-5  # no empty interval (and no division by zero on an all-zero ray)
    pdf = weights / weights.sum(dim=-1, keepdim=True)
    cdf = torch.cat([torch.zeros_like(pdf[:, :1]), torch.cumsum(pdf, dim=-1)], dim=-1)  # (R, B), from 0 to 1
    r = bins.shape[0]
    if deterministic:
        u = torch.linspace(0.0, 1.0, num_samples, device=bins.device, dtype=bins.dtype).expand(r, num_samples)
    else:
        u = torch.rand(r, num_samples, generator=generator, device=bins.device, dtype=bins.dtype)
    u = u.contiguous()
    above = torch.searchsorted(cdf, u, right=True)  # first cdf entry > u
    below = (above - 1).clamp(min=0)
    above = above.clamp(max=cdf.shape[-1] - 1)
    idx = torch.stack([below, above], dim=-1).flatten(1)  # (R, 2N)
    cdf_g = torch.gather(cdf, 1, idx).view(r, num_samples, 2)
    bins_g = torch.gather(bins, 1, idx).view(r, num_samples, 2)
    denom = cdf_g[..., 1] - cdf_g[..., 0]
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


# ------------------------------------------------------------------------------------------------ 5. coarse + fine
@dataclass
class RenderOutput:
    """Per ray: the coarse and fine colours (R, 3), the fine depth and opacity (R,), and the fine weights."""

    rgb_coarse: Tensor
    rgb: Tensor
    depth: Tensor
    acc: Tensor
    weights: Tensor


def _shade(model, rays_o: Tensor, rays_d: Tensor, z: Tensor, noise_std: float, white_background: bool,
           generator: torch.Generator | None) -> Composite:
    points = rays_o[:, None, :] + rays_d[:, None, :] * z[..., None]  # (R, S, 3): o + t d
    viewdirs = (rays_d / rays_d.norm(dim=-1, keepdim=True))[:, None, :].expand_as(points)  # unit directions
    rgb, raw = model(points, viewdirs if model.config.use_viewdirs else None)  # one batched call for R x S points
    rgb, raw = rgb.float(), raw.float()  # compositing in fp32 also under bf16 autocast (cumprod of 1 - alpha)
    sigma = model.density(raw, noise_std, generator)
    return composite(rgb, sigma, z, rays_d, white_background)


def render_rays(coarse, fine, rays_o: Tensor, rays_d: Tensor, near: float, far: float, num_coarse: int = 64,
                num_fine: int = 128, perturb: bool = True, noise_std: float = 0.0, white_background: bool = True,
                generator: torch.Generator | None = None) -> RenderOutput:
    """Render rays ``rays_o``, ``rays_d`` (R, 3) with the coarse model and, if ``num_fine > 0``, the fine one
    (``fine=None`` reuses the coarse network for the fine pass, as the official code without ``N_importance``)."""
    _check_rays(rays_o, rays_d)
    z = stratified_samples(near, far, num_coarse, rays_o.shape[0], perturb, generator, rays_o.device, rays_o.dtype)
    c = _shade(coarse, rays_o, rays_d, z, noise_std, white_background, generator)
    if num_fine == 0:
        return RenderOutput(c.rgb, c.rgb, c.depth, c.acc, c.weights)
    mids = 0.5 * (z[:, 1:] + z[:, :-1])  # (R, Nc - 1) bin edges
    z_fine = sample_pdf(mids, c.weights[:, 1:-1].detach(), num_fine, deterministic=not perturb, generator=generator)
    z_all, _ = torch.sort(torch.cat([z, z_fine.detach()], dim=-1), dim=-1)  # (R, Nc + Nf), no gradient to coarse
    f = _shade(fine if fine is not None else coarse, rays_o, rays_d, z_all, noise_std, white_background, generator)
    return RenderOutput(c.rgb, f.rgb, f.depth, f.acc, f.weights)


@dataclass(frozen=True)
class RenderConfig:
    """How rays are rendered: the scene bounds, the samples per ray and the training-time randomness.

    Blender scenes: near 2, far 6, white background. The paper: 64 coarse + 128 fine samples. ``num_fine=0`` renders
    with the coarse network alone (the "no hierarchical sampling" ablation).
    """

    near: float = 2.0
    far: float = 6.0
    num_coarse: int = 64
    num_fine: int = 128
    noise_std: float = 0.0
    white_background: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.near < self.far:
            raise ValueError(f"RenderConfig: expected 0 <= near < far, got near={self.near}, far={self.far}")
        if self.num_coarse < 2 or self.num_fine < 0:
            raise ValueError(f"RenderConfig: expected num_coarse >= 2 and num_fine >= 0, got {self.num_coarse}, "
                             f"{self.num_fine}")


class NeRF(nn.Module):
    """The coarse and fine networks with their renderer: ``forward(rays_o, rays_d) -> RenderOutput``.

    Training mode perturbs the stratified depths and draws the fine ones at random; eval mode is deterministic.
    """

    def __init__(self, config: NeRFConfig, render: RenderConfig | None = None) -> None:
        super().__init__()
        self.config, self.render = config, render or RenderConfig()
        self.coarse = NeRFMLP(config)
        self.fine = NeRFMLP(config) if self.render.num_fine > 0 else None

    def forward(self, rays_o: Tensor, rays_d: Tensor) -> RenderOutput:
        r = self.render
        return render_rays(self.coarse, self.fine, rays_o, rays_d, r.near, r.far, r.num_coarse, r.num_fine,
                           perturb=self.training, noise_std=r.noise_std if self.training else 0.0,
                           white_background=r.white_background)


@torch.no_grad()
def render_image(render: Callable[[Tensor, Tensor], RenderOutput], height: int, width: int, focal: float,
                 c2w: Tensor, chunk: int = 256) -> dict[str, Tensor]:
    """Render one view ``c2w`` (4, 4) through ``render(rays_o, rays_d)`` in chunks of ``chunk`` rays (bounded memory;
    about 2^16 points per chunk keeps the MLP's activations in cache: 256 rays of 64 + 192 samples).

    Returns ``{"rgb": (H, W, 3), "depth": (H, W), "acc": (H, W)}`` of the fine pass.
    """
    if c2w.shape[-2:] not in ((4, 4), (3, 4)) or c2w.ndim != 2:
        raise ValueError(f"c2w: expected one pose (4, 4) or (3, 4), got {tuple(c2w.shape)}")
    rays_o, rays_d = (r.reshape(-1, 3) for r in get_rays(height, width, focal, c2w))
    parts = [render(rays_o[i:i + chunk], rays_d[i:i + chunk]) for i in range(0, rays_o.shape[0], chunk)]
    return {"rgb": torch.cat([p.rgb for p in parts]).view(height, width, 3),
            "depth": torch.cat([p.depth for p in parts]).view(height, width),
            "acc": torch.cat([p.acc for p in parts]).view(height, width)}


# ----------------------------------------------------------------------------------------------------- checks
def _check_pose(c2w: Tensor) -> None:
    if not isinstance(c2w, Tensor) or not c2w.is_floating_point() or c2w.ndim < 2 or c2w.shape[-2:] not in (
            (4, 4), (3, 4)):
        raise ValueError(f"c2w: expected floating-point camera-to-world poses of shape (..., 4, 4) or (..., 3, 4), "
                         f"got {getattr(c2w, 'dtype', type(c2w).__name__)} {tuple(getattr(c2w, 'shape', ()))}")


def _check_image_size(height: int, width: int, focal: float) -> None:
    if not (isinstance(height, int) and isinstance(width, int) and height > 0 and width > 0):
        raise ValueError(f"height and width must be positive ints, got {height!r}, {width!r}")
    if not focal > 0:
        raise ValueError(f"focal must be a positive number of pixels, got {focal!r}")


def _check_rays(rays_o: Tensor, rays_d: Tensor) -> None:
    for name, r in (("rays_o", rays_o), ("rays_d", rays_d)):
        if not isinstance(r, Tensor) or not r.is_floating_point() or r.ndim != 2 or r.shape[-1] != 3:
            raise ValueError(f"{name}: expected a floating-point tensor (rays, 3), got "
                             f"{getattr(r, 'dtype', type(r).__name__)} {tuple(getattr(r, 'shape', ()))}")
    if rays_o.shape != rays_d.shape:
        raise ValueError(f"rays_o and rays_d must have the same shape, got {tuple(rays_o.shape)} and "
                         f"{tuple(rays_d.shape)}")


def _check_pdf(bins: Tensor, weights: Tensor) -> None:
    if bins.ndim != 2 or weights.ndim != 2 or weights.shape != (bins.shape[0], bins.shape[1] - 1):
        raise ValueError(f"sample_pdf: expected bins (R, B) and weights (R, B - 1), got {tuple(bins.shape)} and "
                         f"{tuple(weights.shape)}")
    if not torch.compiler.is_compiling() and bool((weights < 0).any()):  # a value check: eager only (no graph break)
        raise ValueError("sample_pdf: weights must be >= 0")
