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


@pytest.fixture(scope="session")
def _suite_runs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("suite") / "runs"


@pytest.fixture(autouse=True)
def _runs_root_outside_the_checkout(_suite_runs_root, monkeypatch):
    """Runs, their index and the record of ``--out`` folders go to a temp folder unless a test picks its own: a test
    that runs a recipe into ``tmp_path`` must not touch ``./runs`` or ``./reports`` of the checkout."""
    monkeypatch.setenv("PAPERZOO_RUNS", str(_suite_runs_root))
