"""The lock a run holds on its folder, ``--out`` that is a file, and run folders recorded outside the runs root."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paperzoo.report import run as run_mod
from paperzoo.report.run import (
    LOCK_FILE,
    RunFolderBusyError,
    external_runs,
    holds_lock,
    lock_run_dir,
    new_run_dir,
    release_run_dir,
)

SRC = Path(__file__).resolve().parents[2] / "src"
TRY_LOCK = ("import sys\nfrom paperzoo.report.run import lock_run_dir\n"
            "try:\n    lock_run_dir(sys.argv[1])\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
            "else:\n    print('locked')\n")


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("PAPERZOO_RUNS", str(root))
    return root


def _try_lock(folder: Path, env: dict) -> str:
    env = {**env, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-c", TRY_LOCK, str(folder)], env=env, capture_output=True, text=True,
                          timeout=120).stdout.strip()


def test_lock_is_reentrant_names_the_holder_and_spares_its_children(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    lock_run_dir(d)
    try:
        lock_run_dir(d)  # again in the same process: a no-op
        assert holds_lock(d)
        holder = json.loads((d / LOCK_FILE).read_text())
        assert holder["pid"] == os.getpid() and holder["since"]
        # a child of the holder (a worker of its pool) inherits the record and is not blocked...
        assert _try_lock(d, dict(os.environ)) == "locked"
        # ...an unrelated process is, with the holder named
        env = {k: v for k, v in os.environ.items() if k != run_mod.LOCKS_ENV}
        msg = _try_lock(d, env)
        assert msg.startswith("RunFolderBusyError") and f"in use by another run: pid {os.getpid()}" in msg, msg
        assert "running since" in msg
    finally:
        release_run_dir(d)
    assert not holds_lock(d) and str(d.resolve()) not in os.environ.get(run_mod.LOCKS_ENV, "")
    env = {k: v for k, v in os.environ.items() if k != run_mod.LOCKS_ENV}
    assert _try_lock(d, env) == "locked"  # released: free for the next run (the process's exit frees it too)


def test_pid_file_fallback_takes_over_a_dead_holder_only(tmp_path, monkeypatch):
    monkeypatch.setattr(run_mod, "fcntl", None)  # as on Windows
    d = tmp_path / "run"
    d.mkdir()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (d / LOCK_FILE).write_text(json.dumps({"pid": alive.pid, "command": "paperzoo reproduce x", "since": "then"}))
        with pytest.raises(RunFolderBusyError, match=rf"pid {alive.pid} .*paperzoo reproduce x.*since then"):
            lock_run_dir(d)
    finally:
        alive.kill()
        alive.wait()
    lock_run_dir(d)  # its process is gone: stale, taken over
    try:
        assert json.loads((d / LOCK_FILE).read_text())["pid"] == os.getpid()
    finally:
        release_run_dir(d)
    assert not (d / LOCK_FILE).exists()


def test_out_that_is_a_file_is_one_clear_error(runs, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(ValueError, match="is an existing file, not a folder"):
        new_run_dir("fashion-cnn", f)
    with pytest.raises(ValueError, match="cannot create the run folder"):
        new_run_dir("fashion-cnn", f / "run")


def test_out_elsewhere_is_recorded_once_for_the_index(runs, tmp_path):
    inside = new_run_dir("demo", runs / "demo" / "mine")  # where the index looks anyway: not recorded
    elsewhere = new_run_dir("demo", tmp_path / "elsewhere" / "r1")
    assert new_run_dir("demo", tmp_path / "elsewhere" / "r1") == elsewhere  # reused: recorded once
    other = new_run_dir("other", runs / "x")  # under the root but not <root>/<paper>/<name>
    assert external_runs(runs) == [("demo", elsewhere), ("other", other)]
    assert inside.is_dir()
    (runs / run_mod.EXTERNAL_RUNS).open("a").write('{"paper": "torn"\n')  # a damaged line is skipped
    elsewhere.rmdir()  # a deleted folder is left out
    assert external_runs(runs) == [("other", other)]
