"""CIFAR-10 (JPEG, quality 75) from one tar.gz of ``{train,test}/<class>/NNNN.jpg``.

Decoding 60000 JPEGs takes a while, so the decoded arrays are cached as ``.npy`` under
``cache_root()/cifar10-jpeg/<sha256 of the tar>/`` (written atomically), and reused when the source
tar has the same sha256. Items are ordered by (class index, file number); the original CIFAR batch
order is not recoverable from this copy.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from paperzoo.data.store import cache_root, require, sha256_file
from paperzoo.data.tensors import ImageDataset

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
SPLITS = ("train", "test")
TAR_NAME = "cifar10_jpeg_q75.tar.gz"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for cifar10-jpeg; valid: {SPLITS}")


def iter_cifar_tar(path: str | os.PathLike, split: str) -> Iterator[tuple[int, int, np.ndarray]]:
    """Stream ``(label, number, image uint8 (32,32,3))`` for the members of ``split``, in tar order."""
    _check_split(split)
    with tarfile.open(path, "r:gz") as tar:
        for m in tar:
            parts = m.name.lstrip("./").split("/")
            if not m.isfile() or len(parts) != 3 or parts[0] != split or not parts[2].endswith(".jpg"):
                continue
            if parts[1] not in CLASSES:
                raise ValueError(f"{m.name}: unknown class {parts[1]!r}; expected one of {CLASSES}")
            with Image.open(io.BytesIO(tar.extractfile(m).read())) as im:
                arr = np.asarray(im.convert("RGB"))
            if arr.shape != (32, 32, 3):
                raise ValueError(f"{m.name}: expected a 32x32 RGB image, got shape {arr.shape}")
            yield CLASSES.index(parts[1]), int(parts[2][:-4]), arr


def decode_cifar_tar(path: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Decode all of ``split``: images uint8 (N,3,32,32), labels int64 (N,), sorted by (label, number)."""
    items = sorted(iter_cifar_tar(path, split), key=lambda t: (t[0], t[1]))
    if not items:
        raise ValueError(f"{path}: no {split}/<class>/*.jpg members")
    images = np.stack([a for _, _, a in items]).transpose(0, 3, 1, 2).copy()
    labels = np.array([c for c, _, _ in items], dtype=np.int64)
    return images, labels


def _save_atomic(path: Path, arr: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, arr)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_cifar10(split: str = "train", root: str | os.PathLike | None = None,
                 cache: str | os.PathLike | None = None) -> ImageDataset:
    """CIFAR-10 (JPEG) ``split`` ('train' 50000, 'test' 10000): images uint8 (N,3,32,32), labels int64 (N,)."""
    _check_split(split)
    tar = require("cifar10-jpeg", root=root) / TAR_NAME
    folder = Path(cache).expanduser() if cache is not None else cache_root()
    folder = folder / "cifar10-jpeg" / sha256_file(tar)
    img_path, lab_path = folder / f"{split}_images.npy", folder / f"{split}_labels.npy"
    if img_path.is_file() and lab_path.is_file():
        images, labels = np.load(img_path), np.load(lab_path)
    else:
        images, labels = decode_cifar_tar(tar, split)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _save_atomic(lab_path, labels)
            _save_atomic(img_path, images)
        except OSError as e:  # a read-only cache only costs speed
            warnings.warn(f"could not cache decoded CIFAR-10 under {folder}: {e}; set PAPERZOO_CACHE", stacklevel=2)
    return ImageDataset(torch.from_numpy(images), torch.from_numpy(labels), CLASSES)
