"""The allocator setting the Trainer and the benches apply: set where glibc is, refused for bad limits, and what
every Trainer does on construction."""

import ctypes
import sys

import pytest
import torch

from paperzoo.train import TrainConfig, Trainer, allocator


def test_reuse_freed_memory_sets_glibc_thresholds_or_says_it_cannot():
    got = allocator.reuse_freed_memory()
    if sys.platform.startswith("linux") and allocator._glibc() is not None:
        assert got is True
        libc = ctypes.CDLL("libc.so.6")
        assert libc.mallopt(allocator.M_MMAP_THRESHOLD, allocator.DEFAULT_LIMIT) == 1  # glibc accepts the value
    else:
        assert got is False


@pytest.mark.parametrize("bad", [0, -1, 2**31, 1.5, True, "1G"])
def test_reuse_freed_memory_refuses_a_bad_limit(bad):
    with pytest.raises(ValueError, match="limit"):
        allocator.reuse_freed_memory(bad)


def test_every_trainer_applies_it(monkeypatch):
    calls = []
    monkeypatch.setattr("paperzoo.train.trainer.reuse_freed_memory", lambda: calls.append(1) or True)
    data = torch.utils.data.TensorDataset(torch.randn(8, 3))
    Trainer(torch.nn.Linear(3, 1), TrainConfig(steps=1, batch_size=4), data, lambda m, b: m(b[0]).sum(),
            progress=False)
    assert calls == [1]
