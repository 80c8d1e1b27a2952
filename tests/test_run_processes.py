"""``paperzoo reproduce`` in real processes: Ctrl-C / SIGTERM with ``--workers`` stops the pool at once, and a second
run into a busy ``--out`` is refused while the first one's workers are not.

The recipe is ``tests/fake_recipe.py`` (a linear model through the real Trainer, a sleep per step), run by its own
CLI entry point in a fresh session so that a signal to its process group reaches none of pytest's processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups")


def _start(out: Path, *args: str, **env: str) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]), "OMP_NUM_THREADS": "1",
            "PAPERZOO_RUNS": str(out.parent / "runs"), **env}
    return subprocess.Popen([sys.executable, str(HERE / "fake_recipe.py"), "reproduce", "fake", "--out", str(out),
                             *args], env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _wait_training(out: Path, n: int, proc: subprocess.Popen, timeout: float = 90.0) -> list[Path]:
    """The job folders of ``n`` jobs that have logged a few steps and not finished."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        busy = [m.parent for m in out.glob("*/seed-*/metrics.jsonl")
                if len(m.read_text().splitlines()) >= 2 and not (m.parent / "job.json").exists()]
        if len(busy) >= n:
            return sorted(busy)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"{n} jobs never trained at once; output:\n{proc.communicate()[0][-3000:]}")


@pytest.mark.parametrize("how", ["SIGINT to the process group", "SIGTERM to the parent"])
def test_interrupted_workers_checkpoint_and_start_no_queued_job(tmp_path, how):
    out = tmp_path / "run"
    proc = _start(out, "--workers", "2", FAKE_STEPS="300", FAKE_STEP_S="0.05")  # 4 jobs of 15 s, 2 at a time
    running = _wait_training(out, 2, proc)
    if how.startswith("SIGINT"):
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        want = 130
    else:
        os.kill(proc.pid, signal.SIGTERM)  # `kill PID`: the workers get nothing from outside
        want = 143
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == want, output[-3000:]
    started = sorted(p.parent for p in out.glob("*/seed-*/metrics.jsonl"))
    assert started == running, f"a queued job started after the signal: {started}\n{output[-3000:]}"
    assert not list(out.glob("*/seed-*/job.json"))  # the running ones stopped rather than finishing
    for d in running:
        ckpts = sorted(d.glob("ckpt-*.pt"))
        assert ckpts, d
        steps = [json.loads(line)["step"] for line in (d / "metrics.jsonl").read_text().splitlines()]
        assert 0 < max(steps) < 300 and f"ckpt-{max(steps)}.pt" in {c.name for c in ckpts}
    assert f"--out {out} --resume" in output and "fit(resume=True)" not in output, output[-3000:]


def test_second_run_into_a_busy_folder_is_refused_and_workers_of_the_run_are_not(tmp_path):
    out = tmp_path / "run"
    # the first run's jobs take the folder's lock themselves in their worker processes: they must not be blocked
    first = _start(out, "--workers", "2", "--seeds", "1", FAKE_STEPS="300", FAKE_STEP_S="0.05",
                   FAKE_LOCK_IN_JOB="1")
    _wait_training(out, 2, first)
    second = _start(out, "--resume", "--seeds", "1", FAKE_STEPS="300", FAKE_STEP_S="0.05")
    try:
        output = second.communicate(timeout=60)[0]
    finally:
        os.kill(first.pid, signal.SIGTERM)
        first_output = first.communicate(timeout=60)[0]
    assert second.returncode == 2, output[-3000:]
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    assert f"in use by another run: pid {first.pid}" in lines[0] and "reproduce fake" in lines[0], lines[0]
    assert "running since" in lines[0] and "give another --out" in lines[0]
    assert first.returncode == 143, first_output[-3000:]
    for m in out.glob("*/seed-*/metrics.jsonl"):  # one writer: every step logged once
        steps = [json.loads(line)["step"] for line in m.read_text().splitlines()]
        assert steps == sorted(set(steps)), m
