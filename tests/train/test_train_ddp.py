"""DDP: two gloo processes (launched like torchrun: env:// rendezvous) equal one process on the same global batch."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import train_fixtures as tf

from paperzoo.train import TrainConfig, find_checkpoints, load_checkpoint

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_two_gloo_processes_match_single(tmp_path):
    cfg = dict(steps=8, batch_size=32, lr=1e-2, warmup_steps=2, grad_accum=2, log_every=1, seed=5, device="cpu")
    args = {"out_dir": str(tmp_path / "ddp"), "cfg": cfg, "dropout": 0.0, "params_out": str(tmp_path / "ddp.pt")}
    port = free_port()
    procs = []
    for rank in range(2):
        env = tf.script_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, str(HERE / "train_fixtures.py"), json.dumps(args)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=120))
        finally:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    ddp = torch.load(tmp_path / "ddp.pt")

    model, result = tf.train(TrainConfig(**dict(cfg, grad_accum=1)), dropout=0.0)
    single = tf.params(model)
    torch.manual_seed(cfg["seed"])
    init = tf.params(tf.MLP(0.0))
    for k, ref in single.items():
        rel = ((ddp[k] - ref).abs().max() / ref.abs().max()).item()
        print(f"{k}: relative difference {rel:.2e}")
        assert rel <= 1e-6, f"{k}: relative difference {rel:.2e}"
        assert (ref - init[k]).abs().max() > 1e-3, f"{k} did not train"
    # rank 0 alone wrote the metrics; the logged loss is the mean over the global batch
    lines = [json.loads(x) for x in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r["event"] == "train"] == list(range(1, 9))
    assert abs(lines[-1]["loss"] - result["loss"]) <= 1e-5 * abs(result["loss"])


def launch(args: dict, nproc: int = 2, timeout: int = 300) -> subprocess.CompletedProcess:
    """The real launcher: ``torchrun --nproc_per_node nproc --master_port <free> train_fixtures.py args``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_addr",
           "127.0.0.1", "--master_port", str(free_port()), str(HERE / "train_fixtures.py"), json.dumps(args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=tf.script_env(OMP_NUM_THREADS="1"))


@pytest.mark.slow
def test_torchrun_kill_and_resume_matches_single(tmp_path):
    """torchrun, 2 ranks: SIGTERM at step 4 (on every rank), resume to 8 under torchrun; equals one process."""
    cfg = dict(steps=8, batch_size=32, lr=1e-2, warmup_steps=2, ckpt_every=3, log_every=1, seed=5, device="cpu")
    args = {"out_dir": str(tmp_path / "run"), "cfg": cfg, "dropout": 0.0, "params_out": str(tmp_path / "ddp.pt")}
    first = launch(dict(args, kill_at=4))
    assert first.returncode != 0 and "received SIGTERM: stopped after step 4/8" in first.stderr, first.stderr[-3000:]
    assert [s for s, _ in find_checkpoints(tmp_path / "run")] == [3, 4]
    assert len(load_checkpoint(tmp_path / "run" / "ckpt-4.pt")["rng"]) == 2  # one RNG state per rank
    second = launch(dict(args, resume=True))
    assert second.returncode == 0, second.stderr[-3000:]
    ddp = torch.load(tmp_path / "ddp.pt")
    model, _ = tf.train(TrainConfig(**cfg), dropout=0.0)
    for k, ref in tf.params(model).items():
        rel = ((ddp[k] - ref).abs().max() / ref.abs().max()).item()
        assert rel <= 1e-6, f"{k}: relative difference {rel:.2e}"


@pytest.mark.parametrize("wait", [True, False])
def test_teardown_meets_the_other_ranks_before_destroying_only_on_a_clean_finish(monkeypatch, tmp_path, wait):
    """A clean finish waits at a barrier, then destroys the group (no rank exits while another still works on it);
    an error path destroys without waiting (a rank that failed alone must not hang)."""
    import torch.distributed as dist

    from paperzoo.train import distributed

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    calls = []
    real_barrier, real_destroy = dist.barrier, dist.destroy_process_group
    monkeypatch.setattr(dist, "barrier", lambda *a, **k: (calls.append("barrier"), real_barrier(*a, **k)))
    monkeypatch.setattr(dist, "destroy_process_group",
                        lambda *a, **k: (calls.append("destroy"), real_destroy(*a, **k)))
    try:
        distributed.teardown(distributed.DistInfo(created=True), wait=wait)
    finally:
        if dist.is_initialized():
            real_destroy()
    assert calls == (["barrier", "destroy"] if wait else ["destroy"])
    assert not dist.is_initialized()
