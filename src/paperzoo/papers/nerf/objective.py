"""NeRF's objective (sec. 5.3): ``L = sum_r ||C_c(r) - C(r)||^2 + ||C_f(r) - C(r)||^2`` (means over the batch here,
as the official code), and PSNR, reported on the fine network only (the paper's protocol)."""

from __future__ import annotations

import torch
from torch import Tensor

from .render import RenderOutput

__all__ = ["nerf_loss", "psnr"]


def nerf_loss(out: RenderOutput, target: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """``(coarse MSE + fine MSE, {"mse_coarse", "mse", "psnr"})`` for target colours ``(R, 3)``."""
    if target.shape != out.rgb.shape:
        raise ValueError(f"target: expected the rendered shape {tuple(out.rgb.shape)} (rays, 3), got "
                         f"{tuple(target.shape)}")
    mse_c = torch.mean((out.rgb_coarse - target) ** 2)
    mse_f = torch.mean((out.rgb - target) ** 2)
    return mse_c + mse_f, {"mse_coarse": mse_c.detach(), "mse": mse_f.detach(), "psnr": psnr(mse_f.detach())}


def psnr(mse: Tensor | float) -> Tensor:
    """``-10 log10(MSE)`` for colours in [0, 1]."""
    return -10.0 * torch.log10(torch.as_tensor(mse))
