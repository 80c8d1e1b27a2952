import pytest


@pytest.fixture(autouse=True)
def _tiny_models(one_thread):
    """Every test here uses tiny models: run them on one thread (see tests/conftest.py)."""
