"""Fixtures and hooks shared by the whole suite.

Tests that read a real data set carry ``@pytest.mark.data("name", ...)``: without the set they are skipped with
one summary line (failed under CI); see ``tests/data_plugin.py``.
"""

import sys
from pathlib import Path

import pytest
import torch

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from data_plugin import (  # noqa: E402,F401  (hooks of the data marks, registered by being names of this conftest)
    pytest_configure,
    pytest_runtest_call,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_terminal_summary,
)


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


@pytest.fixture(autouse=True)
def _no_saved_data_root(monkeypatch, tmp_path_factory):
    """The data folder `paperzoo data use` saved in this environment (e.g. by `make`) never reaches a test: tests see
    PAPERZOO_DATA (data_plugin.py) or the documented default, as on a machine where nothing was saved."""
    from paperzoo.data import store

    monkeypatch.setattr(store, "saved_root_file", lambda: tmp_path_factory.getbasetemp() / "no-saved-data-root")
