"""NeRF scenes: the Blender layout (``transforms_<split>.json`` + RGBA PNGs) and the tiny-NeRF npz.

Focal length in pixels follows from the horizontal field of view: ``focal = 0.5 * W / tan(0.5 * camera_angle_x)``.
Poses are camera-to-world (4, 4) matrices in the Blender/OpenGL convention (camera looks down -z).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

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


def load_blender(name: str = "nerf-synthetic-lego-200", split: str = "train",
                 root: str | os.PathLike | None = None) -> NerfScene:
    """A Blender-layout scene: images float32 (N, H, W, 4) RGBA, poses (N, 4, 4), focal from camera_angle_x.

    The reference copy has only the 'train' split (100 views); hold out train views for evaluation.
    """
    if name not in BLENDER_SETS:
        raise ValueError(f"unknown Blender-layout set {name!r}; valid: {BLENDER_SETS}")
    d = require(name, root=root)
    splits = tuple(sorted(p.name[len("transforms_"):-len(".json")] for p in d.glob("transforms_*.json")))
    if split not in splits:
        raise ValueError(f"unknown split {split!r} for {name}; valid: {splits}")
    meta = json.loads((d / f"transforms_{split}.json").read_text())
    images, poses = [], []
    for frame in meta["frames"]:
        path = d / (frame["file_path"].removeprefix("./") + ".png")
        with Image.open(path) as im:
            images.append(np.asarray(im.convert("RGBA")))
        poses.append(np.asarray(frame["transform_matrix"], dtype=np.float32))
    imgs = torch.from_numpy(np.stack(images)).float().div_(255.0)
    return NerfScene(imgs, torch.from_numpy(np.stack(poses)), focal_from_fov(meta["camera_angle_x"], imgs.shape[2]))


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
