"""Fixtures shared by the whole suite."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """One intra-op thread for tests of tiny models: as fast on a quiet 2-core machine and far faster on a loaded one
    (two OpenMP threads wait on each other at every small op). Restores the setting after the test."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
