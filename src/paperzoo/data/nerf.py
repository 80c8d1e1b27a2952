"""NeRF scenes: the Blender layout (``transforms_<split>.json`` + RGBA PNGs) and the tiny-NeRF npz.

Focal length in pixels follows from the horizontal field of view: ``focal = 0.5 * W / tan(0.5 * camera_angle_x)``.
Poses are camera-to-world (4, 4) matrices in the Blender/OpenGL convention (camera looks down -z).

Both reference sets are rebuilt from the NeRF authors' ``nerf_synthetic.zip`` (:func:`build_lego`,
:func:`build_tiny_nerf`): ``lego/transforms_train.json`` verbatim, and the 100 train views (800 x 800 RGBA)
box-filtered to 200 px PNGs, or composited on black, box-filtered to 100 px and stored as the tiny-NeRF npz.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from paperzoo.data.store import atomic_writer, require

BLENDER_SETS = ("nerf-synthetic-lego-200",)
NERF_ARCHIVE = "nerf_synthetic.zip"
TINY_NAME = "tiny_nerf_data_lego_100px.npz"


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
        try:
            with Image.open(path) as im:
                images.append(np.asarray(im.convert("RGBA")))
        except (OSError, SyntaxError) as e:  # PIL: truncated or not an image
            raise ValueError(f"{path} is damaged or not a PNG ({e}); run `paperzoo data verify` or re-fetch the "
                             f"set") from e
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
    with np.load(d / TINY_NAME) as z:
        images, poses, focal = z["images"], z["poses"], float(z["focal"])
    if images.ndim != 4 or images.shape[-1] != 3 or poses.shape != (images.shape[0], 4, 4):
        raise ValueError(f"tiny-nerf: expected images (N,H,W,3) and poses (N,4,4), got {images.shape}, {poses.shape}")
    return NerfScene(torch.from_numpy(images.astype(np.float32)), torch.from_numpy(poses.astype(np.float32)), focal)


def _lego_views(archive: str | os.PathLike, scene: str = "lego") -> tuple[bytes, dict, list[tuple[str, Image.Image]]]:
    """``(transforms_train.json bytes, its parsed content, [(relpath without .png, RGBA view)])`` from the zip."""
    prefix = f"nerf_synthetic/{scene}/"
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        if prefix + "transforms_train.json" not in names:
            raise ValueError(f"{archive} has no {prefix}transforms_train.json: not the NeRF synthetic archive")
        raw = z.read(prefix + "transforms_train.json")
        meta = json.loads(raw)
        views = []
        for frame in meta["frames"]:
            rel = frame["file_path"].removeprefix("./")
            with Image.open(io.BytesIO(z.read(prefix + rel + ".png"))) as im:
                views.append((rel, im.convert("RGBA")))
    return raw, meta, views


def _check_side(size: tuple[int, int], side: int) -> int:
    if size[0] != size[1] or side < 1 or size[0] % side:
        raise ValueError(f"views must be square with a side divisible by {side}, got {size[0]}x{size[1]}")
    return size[0] // side


def build_lego(archive: str | os.PathLike, out_dir: str | os.PathLike, side: int = 200) -> list[str]:
    """Write ``transforms_train.json`` (verbatim) and ``train/r_*.png`` (RGBA, ``side`` px, box filter) into
    ``out_dir`` from ``nerf_synthetic.zip``; returns the relative paths written."""
    raw, _, views = _lego_views(archive)
    out = Path(out_dir)
    written = ["transforms_train.json"]
    with atomic_writer(out / "transforms_train.json") as f:
        f.write(raw)
    for rel, im in views:
        _check_side(im.size, side)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        im.resize((side, side), Image.Resampling.BOX).save(buf, "PNG")
        with atomic_writer(out / f"{rel}.png") as f:
            f.write(buf.getvalue())
        written.append(f"{rel}.png")
    return written


def build_tiny_nerf(archive: str | os.PathLike, out_dir: str | os.PathLike, side: int = 100) -> list[str]:
    """Write the tiny-NeRF npz (``images`` float32 (N, side, side, 3) on black in steps of 1/255, ``poses`` float32
    (N, 4, 4), ``focal`` float64 for ``side`` px) into ``out_dir`` from ``nerf_synthetic.zip``."""
    _, meta, views = _lego_views(archive)
    images = []
    for _, im in views:
        f = _check_side(im.size, side)
        rgba = np.asarray(im, dtype=np.float64)
        rgb = rgba[..., :3] * (rgba[..., 3:] / 255.0)  # composited on black
        small = rgb.reshape(side, f, side, f, 3).mean(axis=(1, 3))
        images.append((np.round(small) / 255.0).astype(np.float32))
    poses = np.asarray([fr["transform_matrix"] for fr in meta["frames"]], dtype=np.float32)
    focal = np.float64(focal_from_fov(float(meta["camera_angle_x"]), side))
    buf = io.BytesIO()
    np.savez_compressed(buf, images=np.stack(images), poses=poses, focal=focal)
    with atomic_writer(Path(out_dir) / TINY_NAME) as f:
        f.write(buf.getvalue())
    return [TINY_NAME]


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
