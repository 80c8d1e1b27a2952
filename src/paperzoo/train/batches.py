"""Data order with a resumable position, batch assembly, and moving batches to a device.

Order: a ``torch.Generator`` seeded from ``cfg.seed`` draws one permutation per epoch. The position is
``(epoch, cursor)`` (samples of the epoch already consumed) plus the generator state at the start of the
epoch, from which the permutation is drawn again on resume.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch.utils.data import TensorDataset, default_collate


class BatchOrder:
    """Yields the global index batches ``(batch_size,)`` (int64) of successive optimizer steps.

    With ``drop_last=True`` an epoch ends when fewer than ``batch_size`` samples remain. With
    ``drop_last=False`` the shorter last batch is kept when it holds at least ``min_batch`` samples.
    """

    def __init__(self, n: int, batch_size: int, seed: int, drop_last: bool, min_batch: int = 1):
        self.n, self.batch_size, self.drop_last, self.min_batch = n, batch_size, drop_last, min_batch
        self.gen = torch.Generator()
        self.gen.manual_seed(seed)
        self.epoch = -1
        self.cursor = 0
        self.epoch_start_state = self.gen.get_state()
        self.perm = torch.empty(0, dtype=torch.long)

    def _new_epoch(self) -> None:
        self.epoch += 1
        self.cursor = 0
        self.epoch_start_state = self.gen.get_state()
        self.perm = torch.randperm(self.n, generator=self.gen)

    def next_batch(self) -> torch.Tensor:
        """Indices of the next batch; starts a new epoch when the current one is used up."""
        need = self.batch_size if self.drop_last else self.min_batch
        if self.epoch < 0 or self.n - self.cursor < need:
            self._new_epoch()
        idx = self.perm[self.cursor : self.cursor + self.batch_size]
        self.cursor += len(idx)
        return idx

    def state_dict(self) -> dict:
        return {
            "n": self.n,
            "epoch": self.epoch,
            "cursor": self.cursor,
            "epoch_start_state": self.epoch_start_state.clone(),
            "generator": self.gen.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        if state["n"] != self.n:
            raise ValueError(f"checkpoint was made with a dataset of {state['n']} samples, this one has {self.n}")
        self.epoch, self.cursor = state["epoch"], state["cursor"]
        self.epoch_start_state = state["epoch_start_state"].clone()
        if self.epoch >= 0:
            self.gen.set_state(self.epoch_start_state)
            self.perm = torch.randperm(self.n, generator=self.gen)
        self.gen.set_state(state["generator"])


def fetch(dataset, idx: torch.Tensor, collate_fn: Callable | None):
    """Collate the samples ``dataset[i]`` for ``i in idx``; a TensorDataset is sliced directly (same result)."""
    if collate_fn is None and isinstance(dataset, TensorDataset):
        return tuple(t[idx] for t in dataset.tensors)
    items = idx.tolist()
    getitems = getattr(dataset, "__getitems__", None)
    samples = getitems(items) if callable(getitems) else [dataset[i] for i in items]
    return (collate_fn or default_collate)(samples)


def to_device(batch, device: torch.device):
    """Move tensors inside (nested) tuples, lists, namedtuples and dicts to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=device.type == "cuda")
    if isinstance(batch, Mapping):
        moved = {k: to_device(v, device) for k, v in batch.items()}
        return moved if type(batch) is dict else type(batch)(moved)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
