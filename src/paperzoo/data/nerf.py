"""NeRF scenes: the Blender layout (``transforms_<split>.json`` + RGBA PNGs) and the tiny-NeRF npz.

Focal length in pixels follows from the horizontal field of view: ``focal = 0.5 * W / tan(0.5 * camera_angle_x)``.
Poses are camera-to-world (4, 4) matrices in the Blender/OpenGL convention (camera looks down -z).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from paperzoo.data.store import require

BLENDER_SETS = ("nerf-synthetic-lego-200",)


@dataclass
class NerfScene:
    """Images float32 (N, H, W, C) in [0, 1] (C=4 RGBA or 3 RGB), poses float32 (N, 4, 4), focal in pixels."""

    images: torch.Tensor
    poses: torch.Tensor
    focal: float

    @property
    def height(self) -> int:
        return self.images.shape[1]

    @property
    def width(self) -> int:
        return self.images.shape[2]

    def __len__(self) -> int:
        return self.images.shape[0]


def focal_from_fov(camera_angle_x: float, width: int) -> float:
    """Focal length in pixels from the horizontal field of view (radians) and the image width."""
    if not 0 < camera_angle_x < math.pi or width < 1:
        raise ValueError(f"expected 0 < camera_angle_x < pi and width >= 1, got {camera_angle_x}, {width}")
    return 0.5 * width / math.tan(0.5 * camera_angle_x)


def load_blender(name: str | os.PathLike = "nerf-synthetic-lego-200", split: str = "train",
                 root: str | os.PathLike | None = None) -> NerfScene:
    """A Blender-layout scene: images float32 (N, H, W, 4) RGBA, poses (N, 4, 4), focal from camera_angle_x.

    ``name`` is a registered set (``BLENDER_SETS``) or the path of any folder holding ``transforms_<split>.json``
    and the PNGs it names (any resolution; all views of one size). The reference copy has only the 'train' split
    (100 views); hold out train views for evaluation (:func:`holdout`).
    """
    if isinstance(name, str) and name in BLENDER_SETS:
        d = require(name, root=root)
    elif Path(name).is_dir():
        d = Path(name)
    else:
        raise ValueError(f"unknown Blender-layout set {str(name)!r}; valid: {BLENDER_SETS} or a folder with "
                         f"transforms_<split>.json")
    splits = tuple(sorted(p.name[len("transforms_"):-len(".json")] for p in d.glob("transforms_*.json")))
    if split not in splits:
        raise ValueError(f"unknown split {split!r} for {d}; valid: {splits}")
    meta_path = d / f"transforms_{split}.json"
    try:
        meta = json.loads(meta_path.read_text())
        frames, angle = meta["frames"], float(meta["camera_angle_x"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{meta_path} is damaged or not a Blender transforms file ({e!r}); expected "
                         f'{{"camera_angle_x": float, "frames": [{{"file_path", "transform_matrix"}}, ...]}}; '
                         f"re-fetch the set (paperzoo data fetch) or fix the file") from e
    images, poses = [], []
    for frame in frames:
        path = d / (frame["file_path"].removeprefix("./") + ".png")
        if not path.is_file():
            raise ValueError(f"{meta_path.name} names {path}, which does not exist; run `paperzoo data verify` "
                             f"(or re-fetch the set) or remove the frame from the transforms file")
        with Image.open(path) as im:
            images.append(np.asarray(im.convert("RGBA")))
        if images[-1].shape != images[0].shape:
            raise ValueError(f"views of one scene must share one size: {path} is {images[-1].shape[1]}x"
                             f"{images[-1].shape[0]}, the first view {images[0].shape[1]}x{images[0].shape[0]}")
        pose = np.asarray(frame["transform_matrix"], dtype=np.float32)
        if pose.shape != (4, 4):
            raise ValueError(f"{meta_path.name}: transform_matrix of {path.name} must be 4x4, got {pose.shape}")
        poses.append(pose)
    imgs = torch.from_numpy(np.stack(images)).float().div_(255.0)
    return NerfScene(imgs, torch.from_numpy(np.stack(poses)), focal_from_fov(angle, imgs.shape[2]))


def holdout(n: int, every: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train indices, held-out indices)`` of ``n`` views: every ``every``-th view (0, 8, 16, ...) is held out, the
    LLFF convention of the official code, used here because the shared lego copy has no val/test views."""
    if n < 2 or every < 2:
        raise ValueError(f"holdout needs n >= 2 views and every >= 2, got n={n}, every={every}")
    idx = torch.arange(n)
    held = idx % every == 0
    return idx[~held], idx[held]


def load_tiny_nerf(root: str | os.PathLike | None = None) -> NerfScene:
    """The tiny-NeRF npz: images float32 (100, 100, 100, 3) RGB on black, poses (100, 4, 4), focal 138.889."""
    d = require("tiny-nerf", root=root)
    with np.load(d / "tiny_nerf_data_lego_100px.npz") as z:
        images, poses, focal = z["images"], z["poses"], float(z["focal"])
    if images.ndim != 4 or images.shape[-1] != 3 or poses.shape != (images.shape[0], 4, 4):
        raise ValueError(f"tiny-nerf: expected images (N,H,W,3) and poses (N,4,4), got {images.shape}, {poses.shape}")
    return NerfScene(torch.from_numpy(images.astype(np.float32)), torch.from_numpy(poses.astype(np.float32)), focal)


def composite(rgba: torch.Tensor, background: str | float | tuple[float, float, float] = "white") -> torch.Tensor:
    """Alpha-composite float RGBA (..., 4) over a background: returns (..., 3) = rgb * a + bg * (1 - a).

    ``background`` is 'white', 'black', a grey level in [0, 1] or an RGB triple.
    """
    if not isinstance(rgba, torch.Tensor) or rgba.shape[-1:] != (4,) or not rgba.is_floating_point():
        raise ValueError(f"rgba: expected a float tensor (..., 4), got "
                         f"{getattr(rgba, 'dtype', type(rgba))} {tuple(getattr(rgba, 'shape', ()))}")
    named = {"white": 1.0, "black": 0.0}
    if isinstance(background, str):
        if background not in named:
            raise ValueError(f"unknown background {background!r}; valid: {tuple(named)}, a float or an RGB triple")
        background = named[background]
    bg = torch.as_tensor(background, dtype=rgba.dtype, device=rgba.device)
    if bg.numel() not in (1, 3):
        raise ValueError(f"background: expected a scalar or 3 values, got {tuple(bg.shape)}")
    alpha = rgba[..., 3:]
    return rgba[..., :3] * alpha + bg.reshape(-1) * (1.0 - alpha)
