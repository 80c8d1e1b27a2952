"""Normalisation layers over the last dimension: LayerNorm, RMSNorm, ScaleNorm, and ReZero (which replaces them)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["LayerNorm", "RMSNorm", "ScaleNorm", "ReZero", "NORMS", "make_norm"]


def _check_input(x: Tensor, dim: int) -> None:
    if x.ndim < 1 or x.shape[-1] != dim:
        raise ValueError(f"expected input (..., dim={dim}), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"expected a floating-point input, got {x.dtype}")


class LayerNorm(nn.LayerNorm):
    """Layer normalisation (Ba et al., 2016): ``y = (x - mean) / sqrt(var + eps) * weight + bias`` over the last
    dim; ``(..., dim) -> (..., dim)``. ``torch.nn.LayerNorm`` with ``(dim, eps)`` positional arguments."""

    def __init__(self, dim: int, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
        super().__init__(dim, eps=eps, elementwise_affine=elementwise_affine, bias=bias)


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich, 2019): ``y = x / sqrt(mean(x^2) + eps) * weight``; no mean
    subtraction, no bias. ``(..., dim) -> (..., dim)``; half-precision inputs are normalised in
    float32 and returned in their own dtype."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.ones(dim)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        _check_input(x, self.dim)
        if x.dtype in (torch.float16, torch.bfloat16):  # normalise and scale in fp32, round once to the input dtype
            weight = self.weight.float() if self.weight is not None else None
            return F.rms_norm(x.float(), (self.dim,), weight, self.eps).to(x.dtype)
        return F.rms_norm(x, (self.dim,), self.weight, self.eps)


class ScaleNorm(nn.Module):
    """ScaleNorm (Nguyen & Salazar, 2019, sec. 2): ``y = g * x / max(||x||_2, eps)`` with one learned scalar ``g``
    initialised to ``sqrt(dim)`` (so ``y`` starts with unit RMS). ``(..., dim) -> (..., dim)``."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.g = nn.Parameter(torch.tensor(math.sqrt(dim)))

    def forward(self, x: Tensor) -> Tensor:
        _check_input(x, self.dim)
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp(min=self.eps)


class ReZero(nn.Module):
    """ReZero (Bachlechner et al., 2020): ``x_{l+1} = x_l + alpha * F(x_l)``, ``alpha`` a learned scalar
    initialised to 0, so every residual block starts as the identity.

    It **replaces** the normalisation rather than being one: apply it to the sublayer's *output*
    (``x + rezero(F(x))``) and use no norm on the input. ``(...) -> (...)`` elementwise.
    """

    def __init__(self, init: float = 0.0):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(init)))

    def forward(self, x: Tensor) -> Tensor:
        return self.alpha * x


NORMS = ("layernorm", "rmsnorm", "scalenorm", "rezero", "none")


def make_norm(kind: str, dim: int, eps: float | None = None) -> nn.Module:
    """A norm by name: ``layernorm``, ``rmsnorm``, ``scalenorm``, ``rezero`` (a :class:`ReZero`, meant for the
    sublayer output; see its docstring) or ``none`` (``nn.Identity``). ``eps=None`` keeps each class's default."""
    if not isinstance(kind, str) or kind.lower() not in NORMS:
        raise ValueError(f"norm kind must be one of {list(NORMS)}, got {kind!r}")
    kind = kind.lower()
    if type(dim) is not int or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    kw = {} if eps is None else {"eps": eps}
    if kind == "layernorm":
        return LayerNorm(dim, **kw)
    if kind == "rmsnorm":
        return RMSNorm(dim, **kw)
    if kind == "scalenorm":
        return ScaleNorm(dim, **kw)
    return ReZero() if kind == "rezero" else nn.Identity()
