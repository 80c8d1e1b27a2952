"""Checkpoint/resume: SIGTERM mid-run, a crash while writing a checkpoint, corrupt files."""

import functools
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import train_fixtures as tf

from paperzoo.train import TrainConfig, find_checkpoints, load_checkpoint, load_latest

HERE = Path(__file__).parent
N = 6
# 96 samples / batch 16 = 6 steps per epoch: the run crosses epochs; dropout and accumulation are on.
CFG = dict(steps=2 * N, batch_size=16, lr=1e-2, warmup_steps=2, grad_accum=2, ckpt_every=2, keep_last=2,
           eval_every=4, log_every=1, seed=3)


def run_script(args: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HERE / "train_fixtures.py"), json.dumps(args)],
                          capture_output=True, text=True, timeout=120, env=tf.script_env())


def assert_same_params(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs"


@functools.cache
def _straight(items: tuple) -> dict:
    cfg = dict(items)
    model, result = tf.train(TrainConfig(**cfg))
    assert result["step"] == cfg["steps"]
    return tf.params(model)


def straight_params(cfg: dict = CFG) -> dict:
    """Parameters after an uninterrupted run (cached: several tests share it)."""
    return _straight(tuple(sorted(cfg.items())))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resume_bit_exact(tmp_path, precision):
    """2N steps straight == N steps, SIGTERM (in another process), resume N more: torch.equal everywhere, in both
    precisions (bf16 autocast keeps fp32 master weights and optimizer state, so a checkpoint is the same either way)."""
    cfg = dict(CFG, ckpt_every=4, precision=precision)  # N=6 is not a multiple: the checkpoint at N is the signal's
    proc = run_script({"out_dir": str(tmp_path), "cfg": cfg, "kill_at": N})
    assert proc.returncode == 128 + 15, proc.stderr
    assert "SIGTERM" in proc.stderr and f"step {N}/" in proc.stderr
    assert [s for s, _ in find_checkpoints(tmp_path)] == [4, N]
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in lines) == N

    model, result = tf.train(TrainConfig(**cfg), tmp_path, resume=True)
    assert result["resumed_from"] == N and result["step"] == 2 * N
    assert_same_params(tf.params(model), straight_params(cfg))
    steps = [r["step"] for r in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
             if r["event"] == "train"]
    assert steps == list(range(1, 2 * N + 1))


def test_kill_during_checkpoint_write(tmp_path):
    """The process dies halfway through writing the 2nd checkpoint: the 1st still loads and resume is exact."""
    proc = run_script({"out_dir": str(tmp_path), "cfg": CFG, "crash_on_save": 2})
    assert proc.returncode == tf.CRASH_CODE, proc.stderr
    assert [s for s, _ in find_checkpoints(tmp_path)] == [2]
    assert list(tmp_path.glob(".tmp-ckpt-*")), "the half-written temp file should be left by the crash"
    state = load_checkpoint(tmp_path / "ckpt-2.pt")
    assert state["step"] == 2

    model, result = tf.train(TrainConfig(**CFG), tmp_path, resume=True)
    assert result["resumed_from"] == 2 and result["step"] == 2 * N
    assert not list(tmp_path.glob(".tmp-ckpt-*"))
    assert_same_params(tf.params(model), straight_params())


def test_corrupt_newest_checkpoint_falls_back(tmp_path):
    cfg = TrainConfig(**dict(CFG, keep_last=5))
    tf.train(cfg, tmp_path)
    assert [s for s, _ in find_checkpoints(tmp_path)] == [4, 6, 8, 10, 12]
    for step in (12, 10):
        (tmp_path / f"ckpt-{step}.pt").unlink()
    newest = tmp_path / "ckpt-8.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    with pytest.warns(UserWarning, match="ckpt-8.pt"):
        state, path = load_latest(tmp_path)
    assert state["step"] == 6 and path.name == "ckpt-6.pt"
    with pytest.warns(UserWarning):
        model, result = tf.train(cfg, tmp_path, resume=True)
    assert result["resumed_from"] == 6
    assert_same_params(tf.params(model), straight_params())


def test_no_loadable_checkpoint_is_an_error(tmp_path):
    (tmp_path / "ckpt-3.pt").write_bytes(b"garbage")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the error lists every file: no warning per file besides
        with pytest.raises(RuntimeError, match="no loadable checkpoint.*ckpt-3.pt: UnpicklingError"):
            load_latest(tmp_path)
    with pytest.raises(ValueError, match="delete these files"):  # a user's mistake to repair: the CLI's one line
        load_latest(tmp_path)


def test_fresh_fit_refuses_folder_with_checkpoints(tmp_path):
    cfg = TrainConfig(**dict(CFG, steps=2))
    tf.train(cfg, tmp_path)
    with pytest.raises(ValueError, match="resume=True"):
        tf.train(cfg, tmp_path)
    model, result = tf.train(cfg, tmp_path, resume=True)  # already finished: nothing to do
    assert result["resumed_from"] == 2 and result["step"] == 2


def test_resume_without_checkpoint_starts_fresh(tmp_path):
    cfg = TrainConfig(**dict(CFG, steps=3))
    model, result = tf.train(cfg, tmp_path / "new", resume=True)
    assert result["resumed_from"] is None and result["step"] == 3
    assert_same_params(tf.params(model), straight_params(dict(CFG, steps=3)))


def test_resume_with_other_batch_size_is_refused(tmp_path):
    tf.train(TrainConfig(**dict(CFG, steps=2)), tmp_path)
    with pytest.raises(ValueError, match="batch_size"):
        tf.train(TrainConfig(**dict(CFG, steps=4, batch_size=32)), tmp_path, resume=True)


def test_checkpoint_file_is_the_file_or_the_newest_in_a_job_folder(tmp_path):
    from paperzoo.train import checkpoint_file

    tf.train(TrainConfig(**dict(CFG, steps=4, keep_last=5)), tmp_path)
    assert checkpoint_file(tmp_path) == tmp_path / "ckpt-4.pt"
    assert checkpoint_file(tmp_path / "ckpt-2.pt") == tmp_path / "ckpt-2.pt"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no ckpt-<step>.pt: give a checkpoint file or the folder of a NeRF"):
        checkpoint_file(tmp_path / "empty", "a NeRF")
    with pytest.raises(ValueError, match="does not exist"):
        checkpoint_file(tmp_path / "missing")
