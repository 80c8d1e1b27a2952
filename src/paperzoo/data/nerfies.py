"""Nerfies captures (Park et al., 2021): the folder layout of google/nerfies, OpenCV cameras with distortion, rays.

A capture folder holds::

    dataset.json        {"count", "num_exemplars", "ids", "train_ids", "val_ids"}  ("ids" optional)
    metadata.json       {id: {"warp_id", "appearance_id", "camera_id", "time"}}    ("time" optional)
    scene.json          {"scale", "center", "near", "far", "bbox"}                  ("bbox" optional, unused)
    camera/<id>.json    one camera at full resolution (keys below)
    rgb/<s>x/<id>.png   the image downscaled s times (1x, 2x, 4x, ...)
    points.npy          (P, 3) background points in world units

Scene normalisation (as the official loader): camera positions and points become ``(p - center) * scale``; the
scene's ``near`` and ``far`` are already in these normalised units. Everything this module returns is normalised.

Camera model (``camera/<id>.json``): ``orientation`` (3, 3) world-to-camera rotation (its rows are the camera axes in
world coordinates), ``position`` (3,) the camera centre, ``focal_length`` (pixels), ``principal_point`` (2,),
``skew``, ``pixel_aspect_ratio``, ``radial_distortion`` [k1, k2, k3], ``tangential`` (or ``tangential_distortion``)
[p1, p2], ``image_size`` [width, height]. OpenCV axes: x right, y down, z forward. A point ``p`` projects to

    (x, y) = (X / Z, Y / Z),  (X, Y, Z) = orientation @ (p - position)
    r2 = x^2 + y^2,  g = 1 + k1 r2 + k2 r2^2 + k3 r2^3
    x_d = g x + 2 p1 x y + p2 (r2 + 2 x^2),  y_d = g y + 2 p2 x y + p1 (r2 + 2 y^2)
    u = f x_d + skew y_d + c_x,  v = f a y_d + c_y            (a = pixel_aspect_ratio)

and a pixel ``(u, v)`` (column, row; pixel centres at ``+0.5``) goes back by inverting the last line, undoing the
distortion with Newton's method (:func:`undistort`, a fixed number of iterations, vectorised over pixels) and
rotating ``(x, y, 1)`` to world axes; ray directions have unit length. Loading ``rgb/<s>x`` divides the focal length,
the principal point and the image size by ``s`` (the official ``Camera.scale``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor

__all__ = ["Cameras", "NerfiesCapture", "camera_from_json", "distort", "load_nerfies", "nerfies_rays", "undistort"]

SPLITS = ("train", "val", "all")
_CAPTURE_HINT = ("a Nerfies capture folder holds dataset.json, metadata.json, scene.json, camera/<id>.json, "
                 "rgb/<s>x/<id>.png and points.npy")
_CAMERA_KEYS = {"orientation": (3, 3), "position": (3,), "focal_length": (), "principal_point": (2,), "skew": (),
                "pixel_aspect_ratio": (), "radial_distortion": (3,), "tangential": (2,), "image_size": (2,)}


# ------------------------------------------------------------------------------------------------ distortion
def distort(x: Tensor, y: Tensor, radial: Tensor, tangential: Tensor) -> tuple[Tensor, Tensor]:
    """OpenCV radial-tangential distortion of normalised image coordinates ``x``, ``y`` (any shape).

    ``radial`` (..., 3) = [k1, k2, k3] and ``tangential`` (..., 2) = [p1, p2] broadcast against ``x[..., None]``.
    """
    k1, k2, k3 = radial.unbind(-1)
    p1, p2 = tangential.unbind(-1)
    r2 = x * x + y * y
    g = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
    xy = x * y
    return g * x + 2.0 * p1 * xy + p2 * (r2 + 2.0 * x * x), g * y + 2.0 * p2 * xy + p1 * (r2 + 2.0 * y * y)


def undistort(xd: Tensor, yd: Tensor, radial: Tensor, tangential: Tensor, iterations: int = 10,
              eps: float = 1e-9) -> tuple[Tensor, Tensor]:
    """The ``(x, y)`` that :func:`distort` maps to ``(xd, yd)``: Newton's method from ``(xd, yd)``.

    Every pixel takes the same ``iterations`` steps (no data-dependent loop); a step is skipped where the 2x2
    Jacobian's determinant is below ``eps`` in magnitude. Shapes as :func:`distort`.
    """
    k1, k2, k3 = radial.unbind(-1)
    p1, p2 = tangential.unbind(-1)
    x, y = xd, yd
    for _ in range(iterations):
        r2 = x * x + y * y
        g = 1.0 + r2 * (k1 + r2 * (k2 + r2 * k3))
        g_r = k1 + r2 * (2.0 * k2 + 3.0 * k3 * r2)  # dg / d(r2)
        fx = g * x + 2.0 * p1 * x * y + p2 * (r2 + 2.0 * x * x) - xd  # residuals
        fy = g * y + 2.0 * p2 * x * y + p1 * (r2 + 2.0 * y * y) - yd
        jxx = g + 2.0 * x * x * g_r + 2.0 * p1 * y + 6.0 * p2 * x  # d fx / dx
        jxy = 2.0 * x * y * g_r + 2.0 * p1 * x + 2.0 * p2 * y  # d fx / dy
        jyx = 2.0 * x * y * g_r + 2.0 * p2 * y + 2.0 * p1 * x  # d fy / dx
        jyy = g + 2.0 * y * y * g_r + 2.0 * p2 * x + 6.0 * p1 * y  # d fy / dy
        det = jxx * jyy - jxy * jyx
        ok = det.abs() > eps
        safe = torch.where(ok, det, torch.ones_like(det))
        x = x - torch.where(ok, (jyy * fx - jxy * fy) / safe, torch.zeros_like(det))
        y = y - torch.where(ok, (jxx * fy - jyx * fx) / safe, torch.zeros_like(det))
    return x, y


# ------------------------------------------------------------------------------------------------ cameras
@dataclass(frozen=True)
class Cameras:
    """``N`` OpenCV cameras with radial-tangential distortion (see the module docstring for the model).

    orientation (N, 3, 3) world-to-camera rotations; position (N, 3) centres; focal_length, skew and
    pixel_aspect_ratio (N,); principal_point (N, 2); radial_distortion (N, 3); tangential_distortion (N, 2);
    image_size (N, 2) int64 as (width, height). All float fields share one dtype.
    """

    orientation: Tensor
    position: Tensor
    focal_length: Tensor
    principal_point: Tensor
    skew: Tensor
    pixel_aspect_ratio: Tensor
    radial_distortion: Tensor
    tangential_distortion: Tensor
    image_size: Tensor

    def __post_init__(self) -> None:
        n = self.orientation.shape[0] if self.orientation.ndim == 3 else -1
        expect = {"orientation": (n, 3, 3), "position": (n, 3), "focal_length": (n,), "principal_point": (n, 2),
                  "skew": (n,), "pixel_aspect_ratio": (n,), "radial_distortion": (n, 3),
                  "tangential_distortion": (n, 2), "image_size": (n, 2)}
        for name, shape in expect.items():
            value = getattr(self, name)
            if not isinstance(value, Tensor) or tuple(value.shape) != shape:
                raise ValueError(f"Cameras.{name}: expected a tensor of shape {shape} (N = {n} cameras), got "
                                 f"{tuple(getattr(value, 'shape', ())) if isinstance(value, Tensor) else value!r}")

    def __len__(self) -> int:
        return self.orientation.shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.orientation.dtype

    def __getitem__(self, index) -> Cameras:
        """The cameras at ``index`` (an int keeps a leading axis of one)."""
        if isinstance(index, int):
            index = slice(index, index + 1 if index != -1 else None)
        return Cameras(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def to(self, dtype: torch.dtype) -> Cameras:
        """The same cameras with float fields in ``dtype`` (image_size stays int64)."""
        return Cameras(**{f.name: getattr(self, f.name) if f.name == "image_size" else getattr(self, f.name).to(dtype)
                          for f in fields(self)})

    @staticmethod
    def cat(cameras: list[Cameras]) -> Cameras:
        return Cameras(**{f.name: torch.cat([getattr(c, f.name) for c in cameras]) for f in fields(Cameras)})

    def scaled(self, factor: float) -> Cameras:
        """Cameras for images resized by ``factor`` (0.5 for ``rgb/2x``): focal, principal point and size scale."""
        if not factor > 0:
            raise ValueError(f"scale factor must be > 0, got {factor}")
        size = torch.round(self.image_size.double() * factor).long()
        return replace(self, focal_length=self.focal_length * factor, principal_point=self.principal_point * factor,
                       image_size=size)

    def pixel_centers(self) -> Tensor:
        """``(H, W, 2)`` pixel centres ``(column + 0.5, row + 0.5)``; all cameras must share one image size."""
        if len(self) == 0 or not bool((self.image_size == self.image_size[0]).all()):
            raise ValueError(f"pixel_centers: expected one or more cameras of one image size, got sizes "
                             f"{sorted({tuple(s) for s in self.image_size.tolist()})}")
        w, h = (int(v) for v in self.image_size[0])
        rows, cols = torch.meshgrid(torch.arange(h, dtype=self.dtype), torch.arange(w, dtype=self.dtype),
                                    indexing="ij")
        return torch.stack([cols + 0.5, rows + 0.5], dim=-1)

    def pixels_to_rays(self, pixels: Tensor, iterations: int = 10) -> tuple[Tensor, Tensor]:
        """Rays through ``pixels`` (N, ..., 2) as (column, row), one block per camera: ``(origins, directions)``
        each ``(N, ..., 3)``; directions have unit length (undistorted, in world axes)."""
        n = len(self)
        if not isinstance(pixels, Tensor) or pixels.ndim < 2 or pixels.shape[0] != n or pixels.shape[-1] != 2:
            raise ValueError(f"pixels: expected a tensor (N={n}, ..., 2) of (column, row) coordinates, got "
                             f"{tuple(getattr(pixels, 'shape', ()))}")
        shape = pixels.shape[1:-1]
        p = pixels.reshape(n, -1, 2).to(self.dtype)
        f, a = self.focal_length[:, None], self.pixel_aspect_ratio[:, None]
        yd = (p[..., 1] - self.principal_point[:, None, 1]) / (f * a)
        xd = (p[..., 0] - self.principal_point[:, None, 0] - self.skew[:, None] * yd) / f
        x, y = undistort(xd, yd, self.radial_distortion[:, None, :], self.tangential_distortion[:, None, :],
                         iterations)
        local = torch.stack([x, y, torch.ones_like(x)], dim=-1)  # (N, P, 3) in camera axes
        dirs = torch.einsum("nji,npj->npi", self.orientation, local)  # orientation^T @ local: world axes
        dirs = dirs / dirs.norm(dim=-1, keepdim=True)
        origins = self.position[:, None, :].expand_as(dirs)
        return origins.reshape(n, *shape, 3), dirs.reshape(n, *shape, 3)

    def rays(self, iterations: int = 10) -> tuple[Tensor, Tensor]:
        """Rays through every pixel centre: ``(origins, directions)`` each ``(N, H, W, 3)``."""
        centers = self.pixel_centers()
        return self.pixels_to_rays(centers.expand(len(self), *centers.shape), iterations)

    def project(self, points: Tensor) -> tuple[Tensor, Tensor]:
        """Pixels ``(N, ..., 2)`` (column, row) of world ``points`` (N, ..., 3) in each camera, and their depth
        along the optical axis ``(N, ...)`` (negative behind the camera)."""
        n = len(self)
        if not isinstance(points, Tensor) or points.ndim < 2 or points.shape[0] != n or points.shape[-1] != 3:
            raise ValueError(f"points: expected a tensor (N={n}, ..., 3), got {tuple(getattr(points, 'shape', ()))}")
        shape = points.shape[1:-1]
        p = points.reshape(n, -1, 3).to(self.dtype) - self.position[:, None, :]
        local = torch.einsum("nij,npj->npi", self.orientation, p)
        z = local[..., 2]
        xd, yd = distort(local[..., 0] / z, local[..., 1] / z, self.radial_distortion[:, None, :],
                         self.tangential_distortion[:, None, :])
        f, a = self.focal_length[:, None], self.pixel_aspect_ratio[:, None]
        u = f * xd + self.skew[:, None] * yd + self.principal_point[:, None, 0]
        v = f * a * yd + self.principal_point[:, None, 1]
        return torch.stack([u, v], dim=-1).reshape(n, *shape, 2), z.reshape(n, *shape)

    def to_json(self, index: int, scene_center=(0.0, 0.0, 0.0), scene_scale: float = 1.0) -> dict:
        """Camera ``index`` as a ``camera/<id>.json`` dict, its position taken back to world units
        (``position / scene_scale + scene_center``)."""
        pos = self.position[index].double() / scene_scale + torch.as_tensor(scene_center, dtype=torch.float64)
        return {"orientation": self.orientation[index].double().tolist(), "position": pos.tolist(),
                "focal_length": float(self.focal_length[index]),
                "principal_point": self.principal_point[index].double().tolist(),
                "skew": float(self.skew[index]), "pixel_aspect_ratio": float(self.pixel_aspect_ratio[index]),
                "radial_distortion": self.radial_distortion[index].double().tolist(),
                "tangential": self.tangential_distortion[index].double().tolist(),
                "image_size": [int(v) for v in self.image_size[index]]}


def camera_from_json(camera: dict, source: str | os.PathLike = "camera", scene_center=(0.0, 0.0, 0.0),
                     scene_scale: float = 1.0, dtype: torch.dtype = torch.float32) -> Cameras:
    """One camera (a :class:`Cameras` of length 1) from a ``camera/<id>.json`` dict; its position becomes
    ``(position - scene_center) * scene_scale``. ``source`` names the file in error messages."""
    if not isinstance(camera, dict):
        raise ValueError(f"{source}: expected a JSON object with keys {sorted(_CAMERA_KEYS)}, got "
                         f"{type(camera).__name__}; re-export the camera")
    camera = dict(camera)
    if "tangential" not in camera and "tangential_distortion" in camera:
        camera["tangential"] = camera["tangential_distortion"]
    values = {}
    for key, shape in _CAMERA_KEYS.items():
        if key not in camera:
            raise ValueError(f"{source}: missing key {key!r}; a Nerfies camera has {sorted(_CAMERA_KEYS)} "
                             f"('tangential_distortion' is accepted for 'tangential'); re-export the camera")
        try:
            arr = np.asarray(camera[key], dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{source}: {key!r} must be numbers of shape {shape}, got {camera[key]!r} ({e})") from e
        if arr.shape != shape or not np.isfinite(arr).all():
            raise ValueError(f"{source}: {key!r} must be finite numbers of shape {shape}, got {camera[key]!r}")
        values[key] = arr
    rot = values["orientation"]
    if np.abs(rot @ rot.T - np.eye(3)).max() > 1e-4 or np.linalg.det(rot) < 0:
        raise ValueError(f"{source}: 'orientation' must be a rotation (orthonormal, det +1), got {rot.tolist()}")
    size = values["image_size"]
    if (size < 1).any() or (size != np.round(size)).any():
        raise ValueError(f"{source}: 'image_size' must be two positive ints [width, height], got {size.tolist()}")
    if not values["focal_length"] > 0 or not values["pixel_aspect_ratio"] > 0:
        raise ValueError(f"{source}: 'focal_length' and 'pixel_aspect_ratio' must be > 0, got "
                         f"{float(values['focal_length'])}, {float(values['pixel_aspect_ratio'])}")
    pos = (values["position"] - np.asarray(scene_center, dtype=np.float64)) * float(scene_scale)

    def t(a):
        return torch.as_tensor(np.asarray(a, dtype=np.float64)[None], dtype=torch.float64).to(dtype)

    return Cameras(orientation=t(rot), position=t(pos), focal_length=t(values["focal_length"]),
                   principal_point=t(values["principal_point"]), skew=t(values["skew"]),
                   pixel_aspect_ratio=t(values["pixel_aspect_ratio"]), radial_distortion=t(values["radial_distortion"]),
                   tangential_distortion=t(values["tangential"]), image_size=torch.as_tensor(size[None]).long())


# ------------------------------------------------------------------------------------------------ capture
@dataclass
class NerfiesCapture:
    """A loaded capture, normalised scene coordinates throughout.

    images (N, H, W, 3) float32 in [0, 1], in the order of ``ids``; cameras (:class:`Cameras`, N, for this image
    scale); warp_ids, appearance_ids, camera_ids (N,) int64; times (N,) float32 (``metadata.json`` ``time``, else the
    warp id); train_idx, val_idx: indices into ``ids``; points (P, 3) float32 background points (empty if loaded
    with ``points=False``); near, far: the scene's bounds; scene_center (3,) float64 and scene_scale: the
    normalisation applied; image_scale: the ``rgb/<s>x`` folder read.
    """

    root: Path
    image_scale: int
    ids: tuple[str, ...]
    images: Tensor
    cameras: Cameras
    warp_ids: Tensor
    appearance_ids: Tensor
    camera_ids: Tensor
    times: Tensor
    train_idx: Tensor
    val_idx: Tensor
    points: Tensor
    near: float
    far: float
    scene_center: Tensor
    scene_scale: float

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def height(self) -> int:
        return self.images.shape[1]

    @property
    def width(self) -> int:
        return self.images.shape[2]

    def split(self, split: str) -> Tensor:
        """Indices into ``ids`` of ``split``: 'train', 'val' or 'all'."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid: {SPLITS}")
        return {"train": self.train_idx, "val": self.val_idx, "all": torch.arange(len(self))}[split]


def _read_json(path: Path, what: str):
    if not path.is_file():
        raise ValueError(f"{path} is missing; {_CAPTURE_HINT} ({path.name}: {what}); re-export the capture or "
                         f"point to the right folder")
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON ({e}); expected {what}; fix the file or re-export the "
                         f"capture") from e


def _ids_list(value, path: Path, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise ValueError(f"{path}: {key!r} must be a list of image ids (strings), got {type(value).__name__}")
    ids = [str(v) for v in value]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"{path}: {key!r} lists ids more than once: {dup[:5]}; each image id must appear once")
    return ids


def _metadata_int(entry, key: str, item: str, path: Path) -> int:
    if not isinstance(entry, dict) or key not in entry:
        raise ValueError(f"{path}: the entry of id {item!r} lacks {key!r}; expected "
                         f'{{"warp_id": int, "appearance_id": int, "camera_id": int, "time": float}} per id')
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or value < 0:
        raise ValueError(f"{path}: {key!r} of id {item!r} must be a non-negative int, got {value!r}")
    return int(value)


def load_nerfies(root: str | os.PathLike, image_scale: int = 1, points: bool = True,
                 dtype: torch.dtype = torch.float32) -> NerfiesCapture:
    """Read the capture in folder ``root`` at ``rgb/<image_scale>x`` (see the module docstring for the layout).

    Loads the ids of ``train_ids`` and ``val_ids`` in the order of ``dataset.json``'s ``ids`` (their concatenation
    when it has none). ``points=False`` reads a capture without ``points.npy`` (``points`` is then empty). Raises
    ``ValueError`` naming the file and the problem: a missing or damaged file, ids that disagree between
    ``dataset.json``, ``metadata.json``, ``camera/`` and ``rgb/``, an image whose size disagrees with its camera, or
    images of more than one size.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a folder; {_CAPTURE_HINT}")
    if not isinstance(image_scale, int) or image_scale < 1:
        raise ValueError(f"image_scale must be a positive int (the N of rgb/Nx), got {image_scale!r}")
    rgb_dir = root / "rgb" / f"{image_scale}x"
    if not rgb_dir.is_dir():
        have = sorted(p.name for p in (root / "rgb").glob("*x") if p.is_dir()) if (root / "rgb").is_dir() else []
        raise ValueError(f"{rgb_dir} is missing; image scales present: {have or 'none'}; pass one of them as "
                         f"image_scale or export rgb/{image_scale}x")

    ds_path = root / "dataset.json"
    ds = _read_json(ds_path, '{"ids": [...], "train_ids": [...], "val_ids": [...]}')
    if not isinstance(ds, dict) or "train_ids" not in ds or "val_ids" not in ds:
        raise ValueError(f"{ds_path}: expected a JSON object with 'train_ids' and 'val_ids' (and optionally 'ids'), "
                         f"got {sorted(ds) if isinstance(ds, dict) else type(ds).__name__}; fix the file")
    train_ids = _ids_list(ds["train_ids"], ds_path, "train_ids")
    val_ids = _ids_list(ds["val_ids"], ds_path, "val_ids")
    if not train_ids and not val_ids:
        raise ValueError(f"{ds_path}: 'train_ids' and 'val_ids' are both empty; list the capture's image ids")
    wanted = set(train_ids) | set(val_ids)
    if "ids" in ds:
        all_ids = _ids_list(ds["ids"], ds_path, "ids")
        missing = [i for i in train_ids + val_ids if i not in set(all_ids)]
        if missing:
            raise ValueError(f"{ds_path}: train_ids/val_ids name ids that 'ids' lacks: {missing[:5]}; make 'ids' "
                             f"the union of both lists or drop 'ids'")
        ids = [i for i in all_ids if i in wanted]
    else:
        ids = list(dict.fromkeys(train_ids + val_ids))
    pos = {item: k for k, item in enumerate(ids)}

    md_path = root / "metadata.json"
    meta = _read_json(md_path, '{id: {"warp_id", "appearance_id", "camera_id", "time"}}')
    if not isinstance(meta, dict):
        raise ValueError(f"{md_path}: expected a JSON object keyed by image id, got {type(meta).__name__}")
    absent = [i for i in ids if i not in meta]
    if absent:
        raise ValueError(f"{md_path} has no entry for ids {absent[:5]} ({len(absent)} in all) that {ds_path.name} "
                         f"lists; add their warp_id/appearance_id/camera_id or remove them from {ds_path.name}")

    sc_path = root / "scene.json"
    scene = _read_json(sc_path, '{"scale": float, "center": [x, y, z], "near": float, "far": float}')
    try:
        scale, center = float(scene["scale"]), np.asarray(scene["center"], dtype=np.float64)
        near, far = float(scene["near"]), float(scene["far"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{sc_path}: expected {{'scale': float, 'center': [x, y, z], 'near': float, 'far': float}}, "
                         f"failed on {e!r}; fix the file") from e
    if center.shape != (3,) or not scale > 0 or not 0 <= near < far or not all(map(math.isfinite, (scale, far))):
        raise ValueError(f"{sc_path}: expected scale > 0, a 3-vector center and 0 <= near < far, got scale={scale}, "
                         f"center={center.tolist()}, near={near}, far={far}")

    cams, images = [], []
    first = None
    for item in ids:
        cam_path = root / "camera" / f"{item}.json"
        if not cam_path.is_file():
            raise ValueError(f"{cam_path} is missing: {ds_path.name} lists id {item!r}; add its camera or remove the "
                             f"id from {ds_path.name}")
        cam = camera_from_json(_read_json(cam_path, "a camera"), cam_path, center, scale, torch.float64)
        full = cam.image_size[0].tolist()
        png = rgb_dir / f"{item}.png"
        if not png.is_file():
            raise ValueError(f"{png} is missing: {ds_path.name} lists id {item!r}; export its image at "
                             f"{image_scale}x or remove the id")
        try:
            with Image.open(png) as im:
                arr = np.asarray(im.convert("RGB"))
        except OSError as e:
            raise ValueError(f"{png} is not a readable image ({e}); re-export it") from e
        h, w = arr.shape[:2]
        if abs(w - full[0] / image_scale) >= 1 or abs(h - full[1] / image_scale) >= 1:
            raise ValueError(f"{png} is {w}x{h} but {cam_path.name} gives image_size {full[0]}x{full[1]}, i.e. "
                             f"{full[0] / image_scale:g}x{full[1] / image_scale:g} at {image_scale}x; re-export the "
                             f"image at that size or fix image_size")
        if first is None:
            first = (png, w, h)
        elif (w, h) != first[1:]:
            raise ValueError(f"images of one capture must share one size: {png} is {w}x{h}, {first[0]} is "
                             f"{first[1]}x{first[2]}; export every image of rgb/{image_scale}x at one size")
        cam = cam.scaled(1.0 / image_scale)
        cams.append(replace(cam, image_size=torch.tensor([[w, h]])))
        images.append(arr)

    ints = {key: torch.tensor([_metadata_int(meta[i], key, i, md_path) for i in ids])
            for key in ("warp_id", "appearance_id", "camera_id")}
    times = []
    for k, i in enumerate(ids):
        t = meta[i].get("time", ints["warp_id"][k].item())
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise ValueError(f"{md_path}: 'time' of id {i!r} must be a finite number, got {t!r}")
        times.append(float(t))

    pts = np.zeros((0, 3))
    pts_path = root / "points.npy"
    if points:
        if not pts_path.is_file():
            raise ValueError(f"{pts_path} is missing; it holds the background points (P, 3) of the background loss; "
                             f"re-export the capture or pass points=False")
        try:
            pts = np.load(pts_path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ValueError(f"{pts_path} is not a readable .npy array ({e}); re-export it") from e
        if pts.ndim != 2 or pts.shape[1] != 3 or not np.issubdtype(pts.dtype, np.number):
            raise ValueError(f"{pts_path}: expected a numeric array (P, 3), got {pts.dtype} {pts.shape}")
    pts = (pts.astype(np.float64) - center) * scale

    return NerfiesCapture(
        root=root, image_scale=image_scale, ids=tuple(ids),
        images=torch.from_numpy(np.stack(images)).float().div_(255.0),
        cameras=Cameras.cat(cams).to(dtype),
        warp_ids=ints["warp_id"], appearance_ids=ints["appearance_id"], camera_ids=ints["camera_id"],
        times=torch.tensor(times, dtype=torch.float32),
        train_idx=torch.tensor([pos[i] for i in train_ids], dtype=torch.long),
        val_idx=torch.tensor([pos[i] for i in val_ids], dtype=torch.long),
        points=torch.from_numpy(pts).to(dtype), near=near, far=far,
        scene_center=torch.from_numpy(center), scene_scale=scale)


def nerfies_rays(capture: NerfiesCapture, split: str = "train") -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Every pixel of ``split`` ('train', 'val' or 'all') as flat tensors: ``(origins (R, 3), directions (R, 3),
    rgb (R, 3), image_ids (R,))``, image by image in row-major pixel order; ``image_ids`` index ``capture.ids``
    (so ``capture.warp_ids[image_ids]`` gives each ray's warp id)."""
    idx = capture.split(split)
    if idx.numel() == 0:
        raise ValueError(f"split {split!r} of {capture.root} has no images")
    origins, dirs = capture.cameras[idx].rays()  # (n, H, W, 3)
    n, h, w = origins.shape[:3]
    image_ids = idx[:, None].expand(n, h * w).reshape(-1)
    return origins.reshape(-1, 3), dirs.reshape(-1, 3), capture.images[idx].reshape(-1, 3), image_ids
