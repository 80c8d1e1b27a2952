import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """These models are tiny: one intra-op thread avoids thread hand-offs that dominate on a shared 2-core box."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
