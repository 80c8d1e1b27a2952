"""Funnel tests use tiny matmuls: one thread is as fast on a quiet machine and far faster on a loaded one."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
