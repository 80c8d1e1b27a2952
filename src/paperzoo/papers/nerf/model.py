"""The NeRF MLP (Mildenhall et al., 2020, sec. 3 and fig. 7): (x, d) -> (colour c, density sigma).

    gamma(x) (63) -> 8 x Linear(256) + ReLU, gamma(x) concatenated to the 5th layer's output (skips=[4])
                  -> sigma = Linear(256 -> 1)                         (density: depends on x only)
                  -> feature = Linear(256 -> 256), no activation      (the "bottleneck")
    [feature, gamma(d)] (256 + 27) -> Linear(128) + ReLU -> Linear(3) -> sigmoid = c   (view-dependent colour)

The encoding is :func:`paperzoo.nn.posenc.frequency_encoding` in the official code's convention (no pi, raw input
first); ``pi=True`` restores the paper's eq. 4. The density activation is applied by :meth:`NeRFMLP.density`, after
the optional training noise is added to the raw output (the official ``raw2outputs``): ReLU (the paper) or softplus.
``condition_dim > 0`` joins a per-point conditioning vector to the colour branch's input, ``[feature, gamma(d),
condition]`` (Nerfies' appearance and camera codes); it never reaches the density. 0 (the default) is NeRF itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperzoo.nn.posenc import frequency_encoding, frequency_encoding_dim

__all__ = ["NeRFConfig", "NeRFMLP", "PRESETS"]

DENSITY_ACTIVATIONS = ("relu", "softplus")


@dataclass(frozen=True)
class NeRFConfig:
    """The MLP. ``num_layers`` x ``dim`` trunk; the input is concatenated after each layer index in ``skips``.

    ``xyz_freqs`` / ``dir_freqs``: the encoding's L for points and directions (10 and 4 in the paper);
    ``positional_encoding=False`` feeds raw coordinates (the paper's "no PE" ablation); ``use_viewdirs=False`` drops
    the direction input (colour from the trunk alone: the "no view dependence" ablation). ``condition_dim``: channels
    of an extra input to the colour branch (0: none; with ``use_viewdirs=False`` the branch is built for it alone).
    """

    num_layers: int = 8
    dim: int = 256
    skips: tuple[int, ...] = (4,)
    color_dim: int = 128
    xyz_freqs: int = 10
    dir_freqs: int = 4
    positional_encoding: bool = True
    pi: bool = False
    use_viewdirs: bool = True
    density_activation: str = "relu"
    condition_dim: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "skips", tuple(self.skips))
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> NeRFConfig:
        """``paper`` (8 x 256), ``small`` (the CPU reproduction: 4 x 128, skip after layer 2), ``tiny`` (tests)."""
        if name not in PRESETS:
            raise ValueError(f"unknown NeRF preset {name!r}; valid: {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})

    @property
    def xyz_channels(self) -> int:
        return frequency_encoding_dim(3, self.xyz_freqs) if self.positional_encoding else 3

    @property
    def dir_channels(self) -> int:
        return frequency_encoding_dim(3, self.dir_freqs) if self.positional_encoding else 3


PRESETS: dict[str, dict] = {  # NeRFConfig arguments of each preset
    "paper": {},
    "small": {"num_layers": 4, "dim": 128, "skips": (2,), "color_dim": 64, "density_activation": "softplus"},
    "tiny": {"num_layers": 2, "dim": 32, "skips": (0,), "color_dim": 16, "xyz_freqs": 4, "dir_freqs": 2,
             "density_activation": "softplus"},
}


class NeRFMLP(nn.Module):
    """``forward(points, directions, condition) -> (rgb in [0, 1], raw density)``, over any leading shape ``(...)``."""

    config_class = NeRFConfig

    def __init__(self, config: NeRFConfig) -> None:
        super().__init__()
        if not isinstance(config, NeRFConfig):
            raise ValueError(f"NeRFMLP expects a NeRFConfig, got {type(config).__name__}")
        self.config = c = config
        widths = [c.xyz_channels] + [c.dim + (c.xyz_channels if i in c.skips else 0) for i in range(c.num_layers - 1)]
        self.trunk = nn.ModuleList(nn.Linear(w, c.dim) for w in widths)
        self.sigma = nn.Linear(c.dim, 1)
        if c.use_viewdirs or c.condition_dim:
            self.feature = nn.Linear(c.dim, c.dim)
            self.view = nn.Linear(c.dim + (c.dir_channels if c.use_viewdirs else 0) + c.condition_dim, c.color_dim)
            self.rgb = nn.Linear(c.color_dim, 3)
        else:
            self.rgb = nn.Linear(c.dim, 3)

    @classmethod
    def example_inputs(cls, config: NeRFConfig, batch: int = 2) -> dict[str, Tensor]:
        g = torch.Generator().manual_seed(0)
        d = torch.randn(batch, 8, 3, generator=g)
        return {"points": torch.rand(batch, 8, 3, generator=g) * 2 - 1, "directions": d / d.norm(dim=-1, keepdim=True)}

    def encode(self, x: Tensor, num_freqs: int) -> Tensor:
        c = self.config
        return frequency_encoding(x, num_freqs, pi=c.pi) if c.positional_encoding else x

    def forward(self, points: Tensor, directions: Tensor | None = None, condition: Tensor | None = None
                ) -> tuple[Tensor, Tensor]:
        """``points`` (..., 3), unit ``directions`` (..., 3) and, if ``condition_dim``, ``condition``
        (..., condition_dim) -> ``rgb`` (..., 3) in [0, 1], raw ``sigma`` (...)."""
        c = self.config
        _check_points(points, "points")
        if c.use_viewdirs:
            if directions is None:
                raise ValueError("directions (..., 3) are required: this model is view dependent (use_viewdirs)")
            _check_points(directions, "directions")
            if directions.shape != points.shape:
                raise ValueError(f"directions must have the points' shape {tuple(points.shape)}, "
                                 f"got {tuple(directions.shape)}")
        _check_condition(condition, points, c.condition_dim)
        x = self.encode(points, c.xyz_freqs)  # gamma(x): (..., 63)
        h = x
        for i, layer in enumerate(self.trunk):
            h = F.relu(layer(h))
            if i in c.skips:
                h = torch.cat([x, h], dim=-1)  # the skip: gamma(x) joins again
        sigma = self.sigma(h).squeeze(-1)  # raw density, from x alone
        if c.use_viewdirs or c.condition_dim:
            parts = [self.feature(h)]  # the bottleneck
            if c.use_viewdirs:
                parts.append(self.encode(directions, c.dir_freqs))  # gamma(d)
            if c.condition_dim:
                parts.append(condition)  # e.g. Nerfies' appearance code psi_i
            h = F.relu(self.view(torch.cat(parts, dim=-1)))  # [bottleneck, gamma(d), condition]
        return torch.sigmoid(self.rgb(h)), sigma

    def density(self, raw: Tensor, noise_std: float = 0.0, generator: torch.Generator | None = None) -> Tensor:
        """``sigma = act(raw + noise)``, noise ~ N(0, noise_std^2) (the paper's regulariser, off by default)."""
        if noise_std > 0:
            raw = raw + noise_std * torch.randn(raw.shape, generator=generator, device=raw.device, dtype=raw.dtype)
        return F.relu(raw) if self.config.density_activation == "relu" else F.softplus(raw)


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: NeRFConfig) -> None:
    for name in ("num_layers", "dim", "color_dim"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"NeRFConfig.{name}: expected an int >= 1, got {v!r}")
    for name in ("xyz_freqs", "dir_freqs", "condition_dim"):
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"NeRFConfig.{name}: expected an int >= 0, got {v!r}")
    if any(not isinstance(s, int) or not 0 <= s < c.num_layers - 1 for s in c.skips):
        raise ValueError(f"NeRFConfig.skips: expected layer indices in [0, {c.num_layers - 1}) (a skip after the "
                         f"last layer feeds nothing), got {c.skips}")
    if c.density_activation not in DENSITY_ACTIVATIONS:
        raise ValueError(f"NeRFConfig.density_activation: expected one of {DENSITY_ACTIVATIONS}, "
                         f"got {c.density_activation!r}")


def _check_points(x: Tensor, name: str) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point() or x.ndim < 2 or x.shape[-1] != 3:
        raise ValueError(f"{name}: expected a floating-point tensor of shape (..., 3) with at least 2 dims, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} of shape {tuple(getattr(x, 'shape', ()))}")


def _check_condition(condition: Tensor | None, points: Tensor, dim: int) -> None:
    if dim == 0:
        if condition is not None:
            raise ValueError("condition: this model has condition_dim=0 and takes no condition")
        return
    want = (*points.shape[:-1], dim)
    if not isinstance(condition, Tensor) or not condition.is_floating_point() or tuple(condition.shape) != want:
        raise ValueError(f"condition: expected a floating-point tensor of shape {want} (the points' leading shape, "
                         f"condition_dim={dim}), got {getattr(condition, 'dtype', type(condition).__name__)} of "
                         f"shape {tuple(getattr(condition, 'shape', ()))}")
