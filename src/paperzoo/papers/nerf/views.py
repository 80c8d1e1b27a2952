"""What a person looks at: image metrics, an orbit of camera poses, videos (GIF, MP4) and comparison panels.

PSNR is computed here; SSIM and MS-SSIM come from ``pytorch-msssim`` (the ``[nerf]`` extra), whose MS-SSIM needs
image sides above 160 px (5 scales of an 11 px window), so it is reported only for such images. LPIPS is not
reported: its pretrained backbone weights are downloaded at run time by every package that offers it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .objective import psnr

__all__ = ["image_metrics", "orbit_poses", "save_panel", "write_video"]

MS_SSIM_MIN_SIDE = 161

# Blender's world axes from the orbit's (the official code's render_poses): x -> -x, y <-> z
_BLENDER = torch.tensor([[-1.0, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])


def image_metrics(pred: Tensor, target: Tensor) -> dict[str, float]:
    """PSNR, SSIM and (sides > 160 px) MS-SSIM of images ``(H, W, 3)`` or ``(N, H, W, 3)`` in [0, 1], averaged."""
    from pytorch_msssim import ms_ssim, ssim

    _check_images(pred, target)
    p, t = (x.reshape(-1, *x.shape[-3:]).permute(0, 3, 1, 2).float().clamp(0, 1) for x in (pred, target))
    with torch.autocast(p.device.type, enabled=False):  # SSIM's Gaussian convolutions overflow in bf16
        mse = ((p - t) ** 2).flatten(1).mean(1)  # per image
        out = {"psnr": float(psnr(mse).mean()),
               "ssim": float(ssim(p, t, data_range=1.0, size_average=True))}
        if min(p.shape[-2:]) >= MS_SSIM_MIN_SIDE:
            out["ms_ssim"] = float(ms_ssim(p, t, data_range=1.0, size_average=True))
    return out


def orbit_poses(num: int = 40, elevation: float = -30.0, radius: float = 4.0) -> Tensor:
    """``num`` camera-to-world poses ``(num, 4, 4)`` circling the origin at ``radius``, ``elevation`` degrees, all
    looking at the origin: the official code's ``render_poses`` (azimuths -180..180, last one dropped)."""
    if num < 1 or not radius > 0:
        raise ValueError(f"orbit_poses: expected num >= 1 and radius > 0, got num={num}, radius={radius}")
    theta = torch.linspace(-math.pi, math.pi, num + 1)[:-1]  # azimuths
    phi = torch.tensor(math.radians(elevation))
    n = len(theta)
    trans = torch.eye(4).repeat(n, 1, 1)
    trans[:, 2, 3] = radius  # move back along z
    rot_phi = torch.eye(4).repeat(n, 1, 1)
    rot_phi[:, 1, 1], rot_phi[:, 1, 2], rot_phi[:, 2, 1], rot_phi[:, 2, 2] = phi.cos(), -phi.sin(), phi.sin(), phi.cos()
    c, s = theta.cos(), theta.sin()
    rot_theta = torch.eye(4).repeat(n, 1, 1)
    rot_theta[:, 0, 0], rot_theta[:, 0, 2], rot_theta[:, 2, 0], rot_theta[:, 2, 2] = c, -s, s, c
    return _BLENDER @ rot_theta @ rot_phi @ trans


def _uint8(frames: Tensor | Sequence[Tensor]) -> np.ndarray:
    x = torch.stack(list(frames)) if not isinstance(frames, Tensor) else frames
    return (x.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()


def write_video(frames: Tensor | Sequence[Tensor], path: str | Path, fps: int = 20) -> Path:
    """Write frames ``(N, H, W, 3)`` in [0, 1] as a GIF or an MP4 (by ``path``'s suffix), with imageio."""
    import imageio.v2 as imageio

    path = Path(path)
    if path.suffix not in (".gif", ".mp4"):
        raise ValueError(f"write_video: path must end in .gif or .mp4, got {path.name!r}")
    data = _uint8(frames)
    if data.ndim != 4 or data.shape[-1] != 3:
        raise ValueError(f"write_video: expected frames (N, H, W, 3), got {data.shape}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gif":
        imageio.mimsave(path, list(data), duration=1000 / fps, loop=0)
    else:  # macro_block_size=1: any frame size (ffmpeg otherwise resizes to multiples of 16)
        imageio.mimsave(path, list(data), fps=fps, macro_block_size=1)
    return path


def save_panel(rows: Sequence[tuple[Tensor, Tensor]], path: str | Path, depth: Sequence[Tensor] | None = None) -> Path:
    """A PNG with one row per held-out view: ground truth | prediction | error (|difference|, x4 for visibility),
    and | depth (``(H, W)`` in [0, 1], near = black) when ``depth`` gives one map per row."""
    from PIL import Image

    if depth is not None and len(depth) != len(rows):
        raise ValueError(f"save_panel: expected one depth map per row ({len(rows)}), got {len(depth)}")
    tiles = []
    for i, (gt, pred) in enumerate(rows):
        _check_images(pred, gt)
        err = ((pred - gt).abs() * 4).clamp(0, 1)
        cols = [gt, pred.float(), err]
        if depth is not None:
            if depth[i].shape != gt.shape[:-1]:
                raise ValueError(f"save_panel: depth map {i} must be (H, W) = {tuple(gt.shape[:-1])}, got "
                                 f"{tuple(depth[i].shape)}")
            cols.append(depth[i].float()[..., None].expand_as(gt))
        tiles.append(torch.cat(cols, dim=1))  # (H, 3W or 4W, 3)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(_uint8(torch.cat(tiles, dim=0)[None])[0]).save(path)
    return Path(path)


# ----------------------------------------------------------------------------------------------------- checks
def _check_images(pred: Tensor, target: Tensor) -> None:
    if pred.shape != target.shape or pred.ndim not in (3, 4) or pred.shape[-1] != 3:
        raise ValueError(f"expected prediction and target of one shape (H, W, 3) or (N, H, W, 3), got "
                         f"{tuple(pred.shape)} and {tuple(target.shape)}")
