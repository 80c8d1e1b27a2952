"""CIFAR-10 (JPEG, quality 75) from one tar.gz of ``{train,test}/<class>/NNNN.jpg``.

Decoding 60000 JPEGs takes a while, so the decoded arrays are cached as ``.npy`` under
``cache_root()/cifar10-jpeg/<sha256 of the tar>/`` (written atomically), and reused when the source
tar has the same sha256. Items are ordered by (class index, file number); the original CIFAR batch
order is not recoverable from this copy.

:func:`build_cifar10_jpeg` rebuilds that tar from the canonical python archive (``cifar-10-python.tar.gz``):
images are numbered per class in batch order (``data_batch_1..5``, then ``test_batch``), encoded by Pillow as
JPEG quality 75 (4:2:0, the reference's settings) and packed like the reference tar (GNU format, directories
before their files, fixed mtime and owner). The batches are pickles: they are read by an unpickler that only
builds numpy arrays, never arbitrary objects.
"""

from __future__ import annotations

import codecs
import io
import os
import pickle
import tarfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from paperzoo.data.store import atomic_writer, cache_root, require, sha256_file
from paperzoo.data.tensors import ImageDataset

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
SPLITS = ("train", "test")
TAR_NAME = "cifar10_jpeg_q75.tar.gz"
ARCHIVE = "cifar-10-python.tar.gz"
JPEG_QUALITY = 75
TAR_MTIME = 1553990400  # every member of the reference tar carries this mtime (2019-03-31)
_BATCHES = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}


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
    with atomic_writer(path) as f:
        np.save(f, arr)


def load_cifar10(split: str = "train", root: str | os.PathLike | None = None,
                 cache: str | os.PathLike | None = None) -> ImageDataset:
    """CIFAR-10 (JPEG) ``split`` ('train' 50000, 'test' 10000): images uint8 (N,3,32,32), labels int64 (N,)."""
    _check_split(split)
    tar = require("cifar10-jpeg", root=root, files=(TAR_NAME,)) / TAR_NAME
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


# ---------------------------------------------------------------------------------------- rebuild from the original
class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles the CIFAR batches (dicts of bytes, ints, lists and numpy arrays) and nothing else: any other global
    (the way a pickle runs code) is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) in (("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")):
            try:
                from numpy._core.multiarray import _reconstruct
            except ImportError:  # numpy < 2
                from numpy.core.multiarray import _reconstruct
            return _reconstruct
        if (module, name) == ("numpy", "ndarray"):
            return np.ndarray
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) == ("_codecs", "encode"):  # how protocol-2 pickles written by Python 3 store bytes
            return codecs.encode
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name} from a CIFAR batch")


def read_cifar_python(archive: str | os.PathLike) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{split: (images uint8 (N, 32, 32, 3), labels int64 (N,))}`` from ``cifar-10-python.tar.gz``, batch order."""
    wanted = {n for names in _BATCHES.values() for n in names}
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with tarfile.open(archive, "r:*") as tar:
        for m in tar:
            base = m.name.rsplit("/", 1)[-1]
            if not m.isfile() or base not in wanted:
                continue
            batch = _ArrayUnpickler(io.BytesIO(tar.extractfile(m).read()), encoding="bytes").load()
            data, labels = np.asarray(batch[b"data"]), np.asarray(batch[b"labels"], dtype=np.int64)
            if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or labels.shape != data.shape[:1]:
                raise ValueError(f"{archive}: {m.name}: expected data uint8 (N, 3072) and N labels, got {data.dtype} "
                                 f"{data.shape} and {labels.shape}")
            if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < len(CLASSES):
                raise ValueError(f"{archive}: {m.name}: labels outside 0..9")
            found[base] = (data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels)
    out = {}
    for split, names in _BATCHES.items():
        missing = [n for n in names if n not in found]
        if missing:
            raise ValueError(f"{archive} is not the CIFAR-10 python archive: no {', '.join(missing)} in "
                             f"cifar-10-batches-py/")
        out[split] = (np.concatenate([found[n][0] for n in names]), np.concatenate([found[n][1] for n in names]))
    return out


def encode_jpeg(image: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes of a uint8 (H, W, 3) image as the reference copy was encoded (Pillow, 4:2:0)."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "JPEG", quality=quality, subsampling="4:2:0")
    return buf.getvalue()


def build_cifar10_jpeg(archive: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Write ``out_dir/cifar10_jpeg_q75.tar.gz`` from the python archive; returns the relative paths written."""
    splits = read_cifar_python(archive)
    members: list[tuple[str, bytes | None, bool]] = []
    for split in SPLITS:
        images, labels = splits[split]
        members.append((split, None, True))
        for c, cls in enumerate(CLASSES):
            members.append((f"{split}/{cls}", None, True))
            members += [(f"{split}/{cls}/{n:04d}.jpg", encode_jpeg(images[i]), False)
                        for n, i in enumerate(np.flatnonzero(labels == c))]
    from paperzoo.data.upstream import pack_tar_gz

    with atomic_writer(Path(out_dir) / TAR_NAME) as f:
        f.write(pack_tar_gz(members, TAR_MTIME, level=6))
    return [TAR_NAME]
