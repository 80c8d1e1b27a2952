"""Fashion-MNIST with inserted synthetic "lesions": real images whose relevant region is known exactly.

Half of the images (a seeded choice) get one lesion, an ellipse with a soft edge, of one of two kinds:

* ``bright`` (target 0): ``x' = x + c (1 - x) b``, centred anywhere in the central 20 x 20 pixels;
* ``dark`` (target 1): ``x' = x (1 - c b)``, centred on a pixel of the garment (intensity above ``dark_on``),

with the blob ``b = sigmoid((1 - rho) / edge)``, ``rho = sqrt((u / a)^2 + (v / b)^2)`` in coordinates rotated by the
angle ``theta`` about the centre, radii ``a, b`` and contrast ``c`` drawn per lesion. The ground-truth mask is
``rho <= 1`` (where ``b >= 0.5``). Labels are multi-label ``(N, 2)``: ``[bright present, dark present]``.
Everything follows from ``(seed, split)``; the parameters are published in ``LESIONS.md`` beside this file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["KINDS", "LesionParams", "LesionSet", "insert_lesions", "load_lesions"]

KINDS = ("bright", "dark")
SPLIT_STREAM = {"train": 0, "test": 1}
SIDE = 28


@dataclass(frozen=True)
class LesionParams:
    """The generator's parameters (pixels of the 28 x 28 image; contrast as a fraction)."""

    positive_fraction: float = 0.5
    radius: tuple[float, float] = (1.5, 4.0)  # each semi-axis ~ U[lo, hi]
    contrast: tuple[float, float] = (0.5, 0.95)  # c ~ U[lo, hi]
    margin: int = 4  # centres lie in [margin, 27 - margin] on both axes
    edge: float = 0.15  # softness of the blob's edge, in units of rho
    dark_on: float = 0.4  # a dark lesion is centred on a pixel brighter than this (the garment)

    def __post_init__(self) -> None:
        _check_params(self)


@dataclass(frozen=True)
class LesionSet:
    """``images`` (N, 1, 28, 28) float in [0, 1], ``clean`` the same images without lesions, ``labels`` (N, 2) float
    (bright, dark), ``masks`` (N, 28, 28) bool (all False for negatives), ``kinds`` (N,) int (-1 none, 0 bright,
    1 dark), ``centres`` (N, 2) (row, col), ``radii`` (N, 2), ``angles`` (N,), ``contrasts`` (N,) (0 for
    negatives), ``classes`` (N,) the Fashion-MNIST class of each image."""

    images: Tensor
    clean: Tensor
    labels: Tensor
    masks: Tensor
    kinds: Tensor
    centres: Tensor
    radii: Tensor
    angles: Tensor
    contrasts: Tensor
    classes: Tensor

    def __len__(self) -> int:
        return len(self.images)


def insert_lesions(images: Tensor, seed: int, params: LesionParams | None = None, stream: int = 0,
                   classes: Tensor | None = None) -> LesionSet:
    """Insert lesions into ``images`` ((N, 28, 28) uint8); deterministic in ``(seed, stream)``, vectorised over N."""
    _check_images(images)
    p = params or LesionParams()
    n = images.shape[0]
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))
    x = images.numpy().astype(np.float32) / np.float32(255.0)  # (N, 28, 28); float32 throughout
    positive = rng.random(n) < p.positive_fraction
    kind = np.where(positive, (rng.random(n) < 0.5).astype(np.int64), -1)  # 0 bright, 1 dark, -1 none
    radii = rng.uniform(*p.radius, size=(n, 2)).astype(np.float32)
    theta = rng.uniform(0.0, np.pi, size=n).astype(np.float32)
    contrast = rng.uniform(*p.contrast, size=n).astype(np.float32)
    lo, hi = p.margin, SIDE - 1 - p.margin
    uniform_centre = rng.integers(lo, hi + 1, size=(n, 2)).astype(np.float32)
    # dark lesions: a uniformly drawn garment pixel inside the margins (the argmax of random scores on allowed pixels)
    allowed = np.zeros((SIDE, SIDE), bool)
    allowed[lo:hi + 1, lo:hi + 1] = True
    on = (x > p.dark_on) & allowed  # (N, 28, 28)
    scores = np.where(on, rng.random((n, SIDE, SIDE), dtype=np.float32), np.float32(-1.0)).reshape(n, -1)
    flat = scores.argmax(1)
    garment_centre = np.stack([flat // SIDE, flat % SIDE], 1).astype(np.float32)
    has_garment = on.reshape(n, -1).any(1)
    centre = np.where(((kind == 1) & has_garment)[:, None], garment_centre, uniform_centre)
    # rho = sqrt((u / a)^2 + (v / b)^2) with (u, v) the pixel offset rotated by -theta
    rows, cols = np.meshgrid(np.arange(SIDE, dtype=np.float32), np.arange(SIDE, dtype=np.float32), indexing="ij")
    dr = rows[None] - centre[:, 0, None, None]  # (N, 28, 28)
    dc = cols[None] - centre[:, 1, None, None]
    cos, sin = np.cos(theta)[:, None, None], np.sin(theta)[:, None, None]
    u, v = cos * dc + sin * dr, -sin * dc + cos * dr
    rho = np.sqrt((u / radii[:, 0, None, None]) ** 2 + (v / radii[:, 1, None, None]) ** 2)
    blob = 1.0 / (1.0 + np.exp(np.minimum((rho - 1.0) / np.float32(p.edge), 60.0)))  # b = sigmoid((1 - rho) / edge)
    c = contrast[:, None, None]
    bright = x + c * (1.0 - x) * blob  # x' = x + c (1 - x) b
    dark = x * (1.0 - c * blob)  # x' = x (1 - c b)
    k = kind[:, None, None]
    out = np.where(k == 0, bright, np.where(k == 1, dark, x))
    masks = (rho <= 1.0) & positive[:, None, None]
    labels = np.stack([kind == 0, kind == 1], 1).astype(np.float32)
    zero = ~positive
    return LesionSet(
        images=torch.from_numpy(out.astype(np.float32))[:, None],
        clean=torch.from_numpy(x.astype(np.float32))[:, None],
        labels=torch.from_numpy(labels), masks=torch.from_numpy(masks), kinds=torch.from_numpy(kind),
        centres=torch.from_numpy(np.where(zero[:, None], 0.0, centre).astype(np.float32)),
        radii=torch.from_numpy(np.where(zero[:, None], 0.0, radii).astype(np.float32)),
        angles=torch.from_numpy(np.where(zero, 0.0, theta).astype(np.float32)),
        contrasts=torch.from_numpy(np.where(zero, 0.0, contrast).astype(np.float32)),
        classes=classes if classes is not None else torch.full((n,), -1, dtype=torch.long),
    )


def load_lesions(split: str = "train", seed: int = 0, n: int | None = None, params: LesionParams | None = None,
                 root=None) -> LesionSet:
    """The first ``n`` Fashion-MNIST images of ``split`` (None: all) with lesions from ``seed`` (stream = split)."""
    from paperzoo.data.idx import load_fashion_mnist

    if split not in SPLIT_STREAM:
        raise ValueError(f"unknown split {split!r} for the lesion set; valid: {tuple(SPLIT_STREAM)}")
    if n is not None and (type(n) is not int or n < 1):
        raise ValueError(f"n must be a positive int or None, got {n!r}")
    base = load_fashion_mnist(split, root=root)
    return insert_lesions(base.images[:n, 0], seed, params, SPLIT_STREAM[split], classes=base.labels[:n].long())


# ----------------------------------------------------------------------------------------------------- checks
def _check_params(p: LesionParams) -> None:
    if not 0.0 < p.positive_fraction < 1.0:
        raise ValueError(f"LesionParams.positive_fraction must be in (0, 1), got {p.positive_fraction!r}")
    for name, lo_min, hi_max in (("radius", 0.5, 10.0), ("contrast", 0.0, 1.0)):
        lo, hi = getattr(p, name)
        if not lo_min <= lo <= hi <= hi_max:
            raise ValueError(f"LesionParams.{name} must be (lo, hi) with {lo_min} <= lo <= hi <= {hi_max}, "
                             f"got {getattr(p, name)!r}")
    if type(p.margin) is not int or not 0 <= p.margin < SIDE // 2:
        raise ValueError(f"LesionParams.margin must be an int in [0, {SIDE // 2}), got {p.margin!r}")
    if not p.edge > 0:
        raise ValueError(f"LesionParams.edge must be > 0, got {p.edge!r}")
    if not 0.0 <= p.dark_on < 1.0:
        raise ValueError(f"LesionParams.dark_on must be in [0, 1), got {p.dark_on!r}")


def _check_images(images: Tensor) -> None:
    if not isinstance(images, Tensor) or images.dtype != torch.uint8 or images.dim() != 3 or \
            tuple(images.shape[1:]) != (SIDE, SIDE):
        got = f"{images.dtype} {tuple(images.shape)}" if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(f"insert_lesions expects uint8 images (N, 28, 28), got {got}")
