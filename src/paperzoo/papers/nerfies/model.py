"""Nerfies (Park et al., 2021, sec. 3): a deformation field into one canonical NeRF, ``G(x, d, psi_i, omega_i) =
F(T(x, omega_i), d, psi_i)`` (eq. 3).

Per image ``i`` two GLO codes (Bojanowski et al., 2018), learned embeddings initialised uniform in ``[0, 0.05)`` as
the official code: the warp code ``omega_i`` (8-d) conditions the deformation field ``T`` (:mod:`.warp`); the
appearance code ``psi_i`` (8-d) joins the canonical NeRF's colour branch, ``[feature, gamma(d), psi_i]``, and never
its density (sec. 3.1, following NeRF-W). An optional camera code (2-d, per rig camera) joins the colour branch too.

Rendering is NeRF's (:mod:`paperzoo.papers.nerf.render`): stratified coarse depths, the coarse canonical MLP at the
warped coarse points, ``sample_pdf`` on the detached coarse weights, the fine MLP at the warped sorted union. The
view direction is the observed ray's (the official code does not rotate it by the warp). The coarse pass keeps what
the losses need: the observed points, the warped points, the weights and, on request, the warp's Jacobians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor, nn

from paperzoo.papers.nerf.model import NeRFConfig, NeRFMLP
from paperzoo.papers.nerf.render import Composite, RenderConfig, composite, sample_pdf, stratified_samples

from .warp import DEFORMATIONS, WarpConfig, coarse_to_fine_alpha, make_deformation

__all__ = ["Nerfies", "NerfiesConfig", "NerfiesOutput", "PRESETS"]


@dataclass(frozen=True)
class NerfiesConfig:
    """The whole model: the canonical NeRF ``template``, the deformation field ``warp`` of kind ``deformation``
    (``"se3"``, ``"translation"``, or ``"none"`` = a static NeRF with appearance codes), the per-image codes and
    the renderer.

    ``num_images``: rows of the warp and appearance code tables (one per training image); ``appearance_dim``: 0
    disables the appearance code; ``condition_appearance=False``: the official code as shipped, whose colour branch
    gets no appearance code (see the README); ``num_cameras`` > 0 adds a ``camera_dim``-d code per rig camera
    (``gpu_vrig_paper.gin``); ``code_init``: codes uniform in ``[0, code_init)``.
    The template's ``condition_dim`` is set here from the codes it receives.
    """

    template: NeRFConfig = field(default_factory=lambda: NeRFConfig.preset(
        "paper", skips=(3,), xyz_freqs=8, density_activation="softplus"))
    warp: WarpConfig = field(default_factory=WarpConfig)
    deformation: str = "se3"
    num_images: int = 100
    appearance_dim: int = 8
    condition_appearance: bool = True
    num_cameras: int = 0
    camera_dim: int = 2
    code_init: float = 0.05
    render: RenderConfig = field(default_factory=lambda: RenderConfig(
        num_coarse=128, num_fine=128, white_background=False))

    def __post_init__(self) -> None:
        _check_config(self)
        object.__setattr__(self, "template", replace(self.template, condition_dim=self.condition_dim))

    @property
    def condition_dim(self) -> int:
        """Channels the colour branch gets besides ``gamma(d)``: the appearance code (if it conditions) + camera."""
        return (self.appearance_dim if self.condition_appearance else 0) + (self.camera_dim if self.num_cameras else 0)

    @classmethod
    def preset(cls, name: str, **overrides) -> NerfiesConfig:
        """``paper`` (template 8 x 256, warp 6 x 128, 128 + 128 samples), ``small`` (4 x 128 and 4 x 64, 32 + 64),
        ``tiny`` (tests: 2 x 32 and 2 x 16, 8 + 8)."""
        if name not in PRESETS:
            raise ValueError(f"unknown Nerfies preset {name!r}; valid: {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name](), **overrides})


PRESETS = {  # the NerfiesConfig arguments of each preset (functions: configs are built on demand)
    # the official code at 250k steps (gpu_vrig_paper.gin, gpu_quarterhd.gin): 8 x 256 template whose MLP skips=(4,)
    # concatenates before hidden_4 (= NeRFMLP skips=(3,)), 8 point frequencies, softplus density, 128 + 128 samples
    "paper": lambda: {},
    "small": lambda: {"template": NeRFConfig.preset("small"), "warp": WarpConfig.preset("small"), "num_images": 32,
                      "render": RenderConfig(num_coarse=32, num_fine=64, white_background=False)},
    "tiny": lambda: {"template": NeRFConfig.preset("tiny"), "warp": WarpConfig.preset("tiny"), "num_images": 4,
                     "appearance_dim": 4, "render": RenderConfig(num_coarse=8, num_fine=8, white_background=False)},
}


@dataclass
class NerfiesOutput:
    """Per ray ``(R, ...)``: fine ``rgb``, ``depth``, ``acc``, ``weights`` (R, Nc + Nf) (the coarse pass's when
    ``num_fine == 0``), the coarse ``rgb_coarse``, ``depth_coarse``, ``acc_coarse``, ``weights_coarse`` (R, Nc); and
    for the losses the coarse samples' observed ``points`` and ``warped`` points (R, Nc, 3), and the warp's
    ``jacobian`` (R, Nc, 3, 3) when asked for (None otherwise, or without a deformation field)."""

    rgb_coarse: Tensor
    rgb: Tensor
    depth: Tensor
    acc: Tensor
    weights: Tensor
    depth_coarse: Tensor
    acc_coarse: Tensor
    weights_coarse: Tensor
    points: Tensor
    warped: Tensor
    jacobian: Tensor | None = None


class Nerfies(nn.Module):
    """``forward(rays_o (R, 3), rays_d (R, 3), image_ids (R,) long, alpha=None, step=None, camera_ids=None,
    return_jacobian=False) -> NerfiesOutput``.

    ``alpha`` is the coarse-to-fine parameter in ``[0, m]``; or give the training ``step`` and it follows
    :func:`~.warp.coarse_to_fine_alpha` over ``warp.alpha_steps``; neither: ``alpha = m`` (every frequency, for
    rendering a trained model). Training mode perturbs the depths and draws the fine ones at random; eval mode is
    deterministic.
    """

    config_class = NerfiesConfig

    def __init__(self, config: NerfiesConfig) -> None:
        super().__init__()
        if not isinstance(config, NerfiesConfig):
            raise ValueError(f"Nerfies expects a NerfiesConfig, got {type(config).__name__}")
        self.config = c = config
        self.warp = make_deformation(c.deformation, c.warp)
        self.warp_codes = self._codes(c.num_images, c.warp.code_dim) if self.warp is not None else None
        self.appearance_codes = self._codes(c.num_images, c.appearance_dim) if c.appearance_dim else None
        self.camera_codes = self._codes(c.num_cameras, c.camera_dim) if c.num_cameras else None
        self.coarse = NeRFMLP(c.template)
        self.fine = NeRFMLP(c.template) if c.render.num_fine > 0 else None

    def _codes(self, n: int, dim: int) -> nn.Embedding:
        table = nn.Embedding(n, dim)
        nn.init.uniform_(table.weight, 0.0, self.config.code_init)  # GLO codes, uniform [0, 0.05) (official)
        return table

    @staticmethod
    def example_inputs(config: NerfiesConfig, batch: int = 2) -> dict:
        """``batch`` rays from a camera ring of radius 4 towards the origin, image ids, half-open window, Jacobians."""
        g = torch.Generator().manual_seed(0)
        angle = torch.rand(batch, generator=g) * 2 * math.pi
        rays_o = torch.stack([4 * angle.cos(), 4 * angle.sin(), torch.rand(batch, generator=g) - 0.5], dim=-1)
        rays_d = -rays_o + 0.3 * torch.randn(batch, 3, generator=g)
        inputs = {"rays_o": rays_o, "rays_d": rays_d / rays_d.norm(dim=-1, keepdim=True),
                  "image_ids": torch.randint(0, config.num_images, (batch,), generator=g),
                  "alpha": config.warp.num_freqs / 2, "return_jacobian": True}
        if config.num_cameras:
            inputs["camera_ids"] = torch.randint(0, config.num_cameras, (batch,), generator=g)
        return inputs

    def resolve_alpha(self, alpha: float | Tensor | None, step: int | None) -> float | Tensor:
        m = self.config.warp.num_freqs
        if alpha is not None and step is not None:
            raise ValueError("give alpha or step, not both")
        if step is not None:
            return coarse_to_fine_alpha(step, m, self.config.warp.alpha_steps)
        return float(m) if alpha is None else alpha

    def condition(self, image_ids: Tensor, camera_ids: Tensor | None) -> Tensor | None:
        """``(R, condition_dim)``: ``[psi_i, camera code]`` for the colour branch, or None."""
        c, parts = self.config, []
        if c.appearance_dim and c.condition_appearance:
            parts.append(self.appearance_codes(image_ids))  # (R, appearance_dim): psi_i
        if c.num_cameras:
            parts.append(self.camera_codes(camera_ids))  # (R, camera_dim)
        return torch.cat(parts, dim=-1) if parts else None

    def warp_points(self, points: Tensor, image_ids: Tensor, alpha: float | Tensor, jacobian: bool = False
                    ) -> tuple[Tensor, Tensor | None]:
        """``x' = T(x, omega_i)`` for points ``(R, S, 3)`` of rays with ``image_ids`` (R,) (or points ``(K, 3)``
        with ids ``(K,)``), and the Jacobians ``(..., 3, 3)`` if ``jacobian``. Identity without a field."""
        if getattr(points, "ndim", 0) == 2:
            _check_static_points(points)
        else:
            _check_ray_points(points)
        _check_ids(image_ids, "image_ids", self.config.num_images, points.shape[0])
        return self._warp_points(points, image_ids, alpha, jacobian)

    def _warp_points(self, points: Tensor, image_ids: Tensor, alpha: float | Tensor, jacobian: bool = False
                     ) -> tuple[Tensor, Tensor | None]:
        if self.warp is None:
            return points, None
        codes = self.warp_codes(image_ids)  # (R, code_dim): omega_i
        if points.ndim == 3:
            codes = codes[:, None, :].expand(*points.shape[:2], codes.shape[-1])  # (R, S, code_dim), one per ray
        if not jacobian:
            return self.warp(points, codes, alpha), None
        warped, jac = self.warp.warp_and_jacobian(points.reshape(-1, 3), codes.reshape(-1, codes.shape[-1]), alpha)
        return warped.view(points.shape), jac.view(*points.shape, 3)  # (..., 3), (..., 3, 3)

    def _shade(self, mlp: NeRFMLP, warped: Tensor, rays_d: Tensor, z: Tensor, condition: Tensor | None,
               generator: torch.Generator | None) -> Composite:
        """The canonical NeRF at the warped points ``(R, S, 3)``, composited along the observed rays."""
        r = self.config.render
        viewdirs = (rays_d / rays_d.norm(dim=-1, keepdim=True))[:, None, :].expand_as(warped)  # observed directions
        cond = condition[:, None, :].expand(*warped.shape[:2], condition.shape[-1]) if condition is not None else None
        rgb, raw = mlp(warped, viewdirs if mlp.config.use_viewdirs else None, cond)  # one call for R x S points
        rgb, raw = rgb.float(), raw.float()  # compositing in fp32 also under autocast (as NeRF's _shade)
        sigma = mlp.density(raw, r.noise_std if self.training else 0.0, generator)
        return composite(rgb, sigma, z, rays_d, r.white_background)

    def forward(self, rays_o: Tensor, rays_d: Tensor, image_ids: Tensor, alpha: float | Tensor | None = None,
                step: int | None = None, camera_ids: Tensor | None = None, return_jacobian: bool = False,
                generator: torch.Generator | None = None) -> NerfiesOutput:
        c, r = self.config, self.config.render
        _check_rays(rays_o, rays_d)
        n = rays_o.shape[0]
        _check_ids(image_ids, "image_ids", c.num_images, n)
        if c.num_cameras:
            _check_ids(camera_ids, "camera_ids", c.num_cameras, n)
        elif camera_ids is not None:
            raise ValueError("camera_ids: this model has no camera codes (NerfiesConfig.num_cameras = 0)")
        alpha = self.resolve_alpha(alpha, step)
        condition = self.condition(image_ids, camera_ids)  # (R, condition_dim) or None

        # coarse: stratified depths, x = o + t d, x' = T(x, omega_i), F(x', d, psi_i)
        z = stratified_samples(r.near, r.far, r.num_coarse, n, self.training, generator, rays_o.device, rays_o.dtype)
        points = rays_o[:, None, :] + rays_d[:, None, :] * z[..., None]  # (R, Nc, 3) observed
        warped, jac = self._warp_points(points, image_ids, alpha, jacobian=return_jacobian)  # (R, Nc, 3) canonical
        co = self._shade(self.coarse, warped, rays_d, z, condition, generator)
        if r.num_fine == 0:
            return NerfiesOutput(co.rgb, co.rgb, co.depth, co.acc, co.weights, co.depth, co.acc, co.weights, points,
                                 warped, jac)

        # fine: importance samples from the detached coarse weights, on the sorted union, warped again
        mids = 0.5 * (z[:, 1:] + z[:, :-1])  # (R, Nc - 1)
        z_fine = sample_pdf(mids, co.weights[:, 1:-1].detach(), r.num_fine, deterministic=not self.training,
                            generator=generator)
        z_all, _ = torch.sort(torch.cat([z, z_fine.detach()], dim=-1), dim=-1)  # (R, Nc + Nf)
        points_all = rays_o[:, None, :] + rays_d[:, None, :] * z_all[..., None]  # (R, Nc + Nf, 3)
        warped_all, _ = self._warp_points(points_all, image_ids, alpha)
        fi = self._shade(self.fine, warped_all, rays_d, z_all, condition, generator)
        return NerfiesOutput(co.rgb, fi.rgb, fi.depth, fi.acc, fi.weights, co.depth, co.acc, co.weights, points,
                             warped, jac)

    def background_warp(self, points: Tensor, alpha: float | Tensor | None = None, step: int | None = None,
                        noise_std: float = 0.001, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """The background regulariser's inputs (sec. 3.4): static points ``(K, 3)`` plus N(0, noise_std^2) noise,
        each under a random image's warp code (the official ``compute_background_loss``), at ``alpha`` or ``step`` as
        :meth:`forward`. Returns ``(noisy points, T(noisy points))``, both ``(K, 3)``; without a field the noisy
        points twice."""
        _check_static_points(points)
        x = points + noise_std * torch.randn(points.shape, generator=generator, device=points.device,
                                             dtype=points.dtype)  # (K, 3)
        if self.warp is None:
            return x, x
        ids = torch.randint(0, self.config.num_images, (x.shape[0],), generator=generator, device=x.device)  # (K,)
        return x, self._warp_points(x, ids, self.resolve_alpha(alpha, step))[0]


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: NerfiesConfig) -> None:
    if not isinstance(c.template, NeRFConfig):
        raise ValueError(f"NerfiesConfig.template: expected a NeRFConfig, got {type(c.template).__name__}")
    if not isinstance(c.warp, WarpConfig):
        raise ValueError(f"NerfiesConfig.warp: expected a WarpConfig, got {type(c.warp).__name__}")
    if not isinstance(c.render, RenderConfig):
        raise ValueError(f"NerfiesConfig.render: expected a RenderConfig, got {type(c.render).__name__}")
    if c.deformation not in DEFORMATIONS:
        raise ValueError(f"NerfiesConfig.deformation: expected one of {DEFORMATIONS}, got {c.deformation!r}")
    for name, lo in (("num_images", 1), ("appearance_dim", 0), ("num_cameras", 0), ("camera_dim", 1)):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"NerfiesConfig.{name}: expected an int >= {lo}, got {v!r}")
    if not (isinstance(c.code_init, int | float) and 0.0 <= c.code_init):
        raise ValueError(f"NerfiesConfig.code_init: expected a number >= 0, got {c.code_init!r}")


def _check_rays(rays_o: Tensor, rays_d: Tensor) -> None:
    for name, t in (("rays_o", rays_o), ("rays_d", rays_d)):
        if not isinstance(t, Tensor) or not t.is_floating_point() or t.ndim != 2 or t.shape[-1] != 3:
            raise ValueError(f"{name}: expected a floating-point tensor of shape (rays, 3), got "
                             f"{getattr(t, 'dtype', type(t).__name__)} of shape {tuple(getattr(t, 'shape', ()))}")
    if rays_o.shape != rays_d.shape:
        raise ValueError(f"rays_o and rays_d must have the same shape, got {tuple(rays_o.shape)} and "
                         f"{tuple(rays_d.shape)}")


def _check_ids(ids: Tensor | None, name: str, n: int, rays: int) -> None:
    if not isinstance(ids, Tensor) or ids.dtype != torch.long or tuple(ids.shape) != (rays,):
        raise ValueError(f"{name}: expected an int64 (long) tensor of shape ({rays},) (one id per ray/point), got "
                         f"{getattr(ids, 'dtype', type(ids).__name__)} of shape {tuple(getattr(ids, 'shape', ()))}")
    if rays and not torch.compiler.is_compiling() and (int(ids.min()) < 0 or int(ids.max()) >= n):  # eager only
        raise ValueError(f"{name}: ids must lie in [0, {n}), got values in [{int(ids.min())}, {int(ids.max())}]")


def _check_ray_points(points: Tensor) -> None:
    if not isinstance(points, Tensor) or not points.is_floating_point() or points.ndim != 3 or points.shape[-1] != 3:
        raise ValueError(f"points: expected floating-point samples of shape (R, S, 3), got "
                         f"{getattr(points, 'dtype', type(points).__name__)} of shape "
                         f"{tuple(getattr(points, 'shape', ()))}")


def _check_static_points(points: Tensor) -> None:
    if not isinstance(points, Tensor) or not points.is_floating_point() or points.ndim != 2 or points.shape[-1] != 3:
        raise ValueError(f"points: expected floating-point static points of shape (K, 3), got "
                         f"{getattr(points, 'dtype', type(points).__name__)} of shape "
                         f"{tuple(getattr(points, 'shape', ()))}")
