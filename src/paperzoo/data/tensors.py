"""Small torch datasets the readers return: :class:`ArrayDataset` and :class:`ImageDataset`."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


class ArrayDataset(Dataset):
    """Tensors sharing their first dimension ``N``; item ``i`` is ``tuple(t[i] for t in tensors)``."""

    def __init__(self, *tensors: torch.Tensor) -> None:
        if not tensors:
            raise ValueError("ArrayDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor) or t.dim() < 1:
                raise ValueError(f"tensor {i}: expected a torch.Tensor with at least 1 dim (N, ...), got {t!r:.80}")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise ValueError(f"all tensors must share dim 0 (N); got {[tuple(t.shape) for t in tensors]}")
        self.tensors = tuple(tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, i):
        return tuple(t[i] for t in self.tensors)


class ImageDataset(ArrayDataset):
    """Images uint8 ``(N, C, H, W)`` and labels int64 ``(N,)``; ``classes[k]`` names label ``k``."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, classes: tuple[str, ...]) -> None:
        if not isinstance(images, torch.Tensor) or images.dim() != 4 or images.dtype != torch.uint8:
            raise ValueError(f"images: expected uint8 tensor (N, C, H, W), got "
                             f"{getattr(images, 'dtype', type(images))} {tuple(getattr(images, 'shape', ()))}")
        if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.dtype != torch.int64:
            raise ValueError(f"labels: expected int64 tensor (N,), got "
                             f"{getattr(labels, 'dtype', type(labels))} {tuple(getattr(labels, 'shape', ()))}")
        super().__init__(images, labels)
        if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= len(classes)):
            raise ValueError(f"labels must lie in [0, {len(classes)}) for classes {classes}")
        self.images, self.labels, self.classes = images, labels, tuple(classes)
