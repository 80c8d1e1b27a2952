"""IDX files (MNIST, Fashion-MNIST): a validating parser and the two readers.

IDX layout: 2 zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
0x0E float64), a byte with the number of dims, one big-endian uint32 per dim, then the data, big-endian.
"""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import numpy as np
import torch

from paperzoo.data.store import require
from paperzoo.data.tensors import ImageDataset

_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
SPLITS = ("train", "test")
MNIST_CLASSES = tuple(str(d) for d in range(10))
FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot")


def parse_idx(data: bytes, ndim: int | None = None) -> np.ndarray:
    """Parse IDX bytes into an array of the stored shape; ValueError on a bad magic number or size."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _TYPES:
        raise ValueError(f"not an IDX file: magic bytes {data[:4].hex()!r}, expected 0000<type><ndim> "
                         f"with type in {sorted(hex(t) for t in _TYPES)}")
    dims = data[3]
    if ndim is not None and dims != ndim:
        raise ValueError(f"IDX file has {dims} dims, expected {ndim}")
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    dtype = np.dtype(_TYPES[data[2]])
    expected = 4 + 4 * dims + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"IDX size mismatch: {len(data)} bytes for shape {shape} {dtype}, expected {expected}")
    arr = np.frombuffer(data, dtype=dtype, offset=4 + 4 * dims).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | os.PathLike, ndim: int | None = None) -> np.ndarray:
    """Read an IDX file, gzip-compressed if its name ends in ``.gz``."""
    path = Path(path)
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return parse_idx(data, ndim)


def _load(name: str, split: str, classes: tuple[str, ...], root) -> ImageDataset:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for {name}; valid: {SPLITS}")
    prefix = "train" if split == "train" else "t10k"
    d = require(name, root=root, files=(f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"))
    images = read_idx(d / f"{prefix}-images-idx3-ubyte.gz", ndim=3)
    labels = read_idx(d / f"{prefix}-labels-idx1-ubyte.gz", ndim=1)
    if images.dtype != np.uint8 or images.shape[1:] != (28, 28) or labels.shape != images.shape[:1]:
        raise ValueError(f"{name}/{split}: expected uint8 images (N,28,28) and labels (N,), got "
                         f"{images.dtype} {images.shape} and {labels.shape}")
    return ImageDataset(torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels.astype(np.int64)), classes)


def load_mnist(split: str = "train", root: str | os.PathLike | None = None) -> ImageDataset:
    """MNIST ``split`` ('train' 60000, 'test' 10000): images uint8 (N,1,28,28), labels int64 (N,)."""
    return _load("mnist", split, MNIST_CLASSES, root)


def load_fashion_mnist(split: str = "train", root: str | os.PathLike | None = None) -> ImageDataset:
    """Fashion-MNIST ``split`` ('train' 60000, 'test' 10000): images uint8 (N,1,28,28), labels int64 (N,)."""
    return _load("fashion-mnist", split, FASHION_CLASSES, root)
