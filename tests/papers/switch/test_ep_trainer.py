"""Expert-parallel training through the Trainer: 2 gloo processes equal one process holding every expert.

The reference is the same SwitchLM trained by one process on the same global batches. To make the two runs the
same computation: ``route_per_sequence=True`` (each sequence is its own routing group with its own capacity in
both settings; the default batch-wide group would give each rank its own capacity), no router jitter and no
dropout (their random draws differ between one process and two), and ``grad_accum=2`` in both (the balancing
loss is computed per forward, so micro-batch m of the reference is the concatenation of the ranks' micro-batches
m, which is how the Trainer splits a global batch). Capacity binds, and clipping binds at every step.
"""

import dataclasses
import faulthandler
import gc
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import TensorDataset

from paperzoo.papers.switch import SwitchLM, SwitchLMConfig
from paperzoo.report import read_metrics
from paperzoo.train import TrainConfig, Trainer, seed_everything
from paperzoo.train.checkpoint import consolidate_experts, expert_shard_path, find_checkpoints
from paperzoo.train.distributed import expert_parameters

WORLD = 2
CFG = SwitchLMConfig.preset("tiny", vocab_size=64, dim=32, num_heads=2, ffn_dim=64, max_len=16, num_experts=4,
                            capacity_factor=1.0, jitter_eps=0.0, dropout=0.0, route_per_sequence=True,
                            z_loss_coef=1e-3)
TRAIN = TrainConfig(steps=4, batch_size=8, grad_accum=2, lr=3e-3, warmup_steps=1, grad_clip=0.05, log_every=1,
                    eval_every=2, ckpt_every=2, seed=3, device="cpu")


def _data() -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    return TensorDataset(torch.randint(0, CFG.vocab_size, (24, CFG.max_len), generator=g))


EVAL_IDS = torch.randint(0, CFG.vocab_size, (4, CFG.max_len), generator=torch.Generator().manual_seed(8))


def _loss_fn(model, batch):
    (ids,) = batch
    out = model(ids, labels=ids)
    return out.loss, {"lm_loss": out.lm_loss.detach(),
                      "fraction_dropped": sum(float(a["fraction_dropped"]) for a in out.router) / len(out.router),
                      "load_max": max(float(a["expert_load"].max()) for a in out.router)}


def _eval_fn(model):
    out = model(EVAL_IDS, labels=EVAL_IDS)
    return {"nll": out.lm_loss, "eval_dropped": out.router[0]["fraction_dropped"]}


def _fit(model, out_dir, resume=False, kill_at=None):
    calls = {"n": 0}

    def loss_fn(m, batch):  # kill_at=N: SIGTERM to this process during step N (the Trainer then stops every rank)
        calls["n"] += 1
        if kill_at is not None and calls["n"] == (kill_at - 1) * TRAIN.grad_accum + 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return _loss_fn(m, batch)

    return Trainer(model, TRAIN, _data(), loss_fn, eval_fn=_eval_fn, out_dir=out_dir, progress=False).fit(resume)


def _train_records(out_dir):
    return [r for r in read_metrics(Path(out_dir) / "metrics.jsonl") if r["event"] in ("train", "eval")]


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _close(a, b, what, tol=2e-5):
    err = ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()
    assert err <= tol, f"{what}: relative difference {err:.2e}"


def _expert_slice(name, full, rank):
    n = full.shape[0] // WORLD
    return full[rank * n:(rank + 1) * n]


def _train_worker(rank, init, tmp, init_ref, final_ref, records_ref):
    _in_group(init, rank, _train_checks, tmp, init_ref, final_ref, records_ref)


def _train_checks(rank, tmp, init_ref, final_ref, records_ref):
    seed_everything(0)
    model = SwitchLM(CFG, group="world")
    experts = set(expert_parameters(model))
    assert len(experts) == 2 * (CFG.num_layers // CFG.moe_every), experts  # w1, w2 per Switch layer
    for k, v in model.state_dict().items():  # the same seed gives each rank its slice of the same model
        ref = _expert_slice(k, init_ref[k], rank) if k in experts else init_ref[k]
        assert torch.equal(v, ref), f"init of {k} differs from the single-process model's"

    out = os.path.join(tmp, "ep")
    fit = _fit(model, out)
    final = _state(model)
    for k, v in final.items():
        ref = _expert_slice(k, final_ref[k], rank) if k in experts else final_ref[k]
        _close(v, ref, f"rank {rank}: final {k}")
    if rank == 0:
        recs = _train_records(out)
        assert [(r["event"], r["step"]) for r in recs] == [(r["event"], r["step"]) for r in records_ref]
        for r, ref in zip(recs, records_ref, strict=True):
            for key in ("loss", "lm_loss", "grad_norm", "fraction_dropped", "load_max", "nll", "eval_dropped"):
                if key in ref:
                    _close(torch.tensor(r[key]), torch.tensor(ref[key]), f"step {r['step']} {key}", 1e-5)
        whole = consolidate_experts(Path(out) / "ckpt-4.pt")  # the shards join into the single-process model
        assert set(whole) == set(final_ref)
        for k, v in whole.items():
            _close(v, final_ref[k], f"consolidated {k}")
    assert sorted(p.name for p in Path(out).iterdir() if p.name.startswith("ckpt-")) == [
        "ckpt-2.experts-0-of-2.pt", "ckpt-2.experts-1-of-2.pt", "ckpt-2.pt",
        "ckpt-4.experts-0-of-2.pt", "ckpt-4.experts-1-of-2.pt", "ckpt-4.pt"]

    # exact resume: SIGTERM on rank 0 during step 3 stops both ranks after it; resuming gives the same bits
    out2 = os.path.join(tmp, "ep-resumed")
    seed_everything(0)
    with pytest.raises(SystemExit):
        _fit(SwitchLM(CFG, group="world"), out2, kill_at=3 if rank == 0 else None)
    assert [s for s, _ in find_checkpoints(out2)] == [2, 3]
    seed_everything(1)  # resuming restores every RNG: the seed here must not matter
    model2 = SwitchLM(CFG, group="world")
    fit2 = _fit(model2, out2, resume=True)
    assert fit2["resumed_from"] == 3 and fit2["loss"] == fit["loss"]
    for k, v in _state(model2).items():
        assert torch.equal(v, final[k]), f"rank {rank}: resumed {k} is not bit-exact"

    # another expert layout (8 experts, 4 per rank) cannot resume these shards
    with pytest.raises(ValueError, match=f"rank {rank} of this model has"):
        _fit(SwitchLM(dataclasses.replace(CFG, num_experts=8), group="world"), out2, resume=True)

    # a missing shard: both ranks raise (none is left waiting in a collective)
    dist.barrier()
    if rank == 1:
        expert_shard_path(out2, 4, 1, WORLD).unlink()
    dist.barrier()
    want = "is missing" if rank == 1 else "another rank could not load"
    with pytest.raises(ValueError, match=want):
        _fit(SwitchLM(CFG, group="world"), out2, resume=True)


def _ddp_worker(rank, init, tmp):
    _in_group(init, rank, _ddp_checks)


def _ddp_checks(rank):
    """A plain DDP wrap raises at the forward; the Trainer's wrap passes; mismatched metric names raise."""
    seed_everything(0)
    ids = EVAL_IDS[2 * rank:2 * rank + 2]
    plain = DistributedDataParallel(SwitchLM(CFG, group="world"))
    with pytest.raises(ValueError, match="expert-parallel.*paperzoo.train.Trainer"):
        plain(ids, labels=ids)
    plain.eval()
    with pytest.raises(ValueError, match="expert-parallel"):  # any forward under that wrap
        plain(ids)
    # the Trainer's wrap keeps the experts out: its forward passes the check
    seed_everything(0)
    model = SwitchLM(CFG, group="world")
    trainer = Trainer(model, TrainConfig(steps=1, batch_size=4, device="cpu"), _data(), _loss_fn, progress=False)
    out = trainer.model(ids, labels=ids)
    out.loss.backward()

    # every rank must return the same metric names (they are all-reduced by position)
    def odd_metrics(m, batch):
        loss, metrics = _loss_fn(m, batch)
        return loss, {**metrics, f"only_on_rank_{rank}": 1.0}

    seed_everything(0)
    odd = Trainer(SwitchLM(CFG, group="world"), TrainConfig(steps=1, batch_size=4, device="cpu"), _data(),
                  odd_metrics, progress=False)
    with pytest.raises(ValueError, match="different metric names on different ranks"):
        odd.fit()


def _in_group(init, rank, body, *args, world=WORLD):
    """``body(rank, *args)`` inside a gloo group; the group is destroyed only after everything ``body`` made (DDP
    wrappers hold the group) is gone. A worker stuck for a minute prints its stacks and exits."""
    faulthandler.dump_traceback_later(60, exit=True)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        body(rank, *args)
    finally:
        gc.collect()
        dist.destroy_process_group()
        faulthandler.cancel_dump_traceback_later()


def _spawn(fn, tmp, *args, timeout=120.0, world=WORLD):
    init = "file://" + os.path.join(tmp, "init")
    ctx = mp.start_processes(fn, args=(init, tmp, *args), nprocs=world, join=False, start_method="fork")
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=0.5):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{world} expert-parallel workers did not finish in {timeout} s")


def test_expert_parallel_trainer_matches_single_process(tmp_path):
    seed_everything(0)
    model = SwitchLM(CFG)
    init = _state(model)
    _fit(model, tmp_path / "single")
    records = _train_records(tmp_path / "single")
    train = [r for r in records if r["event"] == "train"]
    assert all(r["grad_norm"] > TRAIN.grad_clip for r in train), "clipping should bind"
    assert all(r["fraction_dropped"] > 0 for r in train), "capacity should bind"
    tmp = tempfile.mkdtemp(dir=tmp_path)
    try:
        _spawn(_train_worker, tmp, init, _state(model), records)
        # a single process cannot resume the expert-parallel run
        with pytest.raises(ValueError, match="sharded over 2 expert-parallel ranks.*--nproc_per_node 2"):
            seed_everything(0)
            _fit(SwitchLM(CFG), os.path.join(tmp, "ep"), resume=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _hybrid_worker(rank, init, tmp, final_ref, records_ref):
    _in_group(init, rank, _hybrid_checks, tmp, final_ref, records_ref, world=4)


def _hybrid_checks(rank, tmp, final_ref, records_ref):
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]  # 2 expert-parallel groups, each with every expert
    seed_everything(0)
    model = SwitchLM(CFG, group=groups[rank // 2])
    out = os.path.join(tmp, "hybrid")
    Trainer(model, dataclasses.replace(TRAIN, grad_accum=1), _data(), _loss_fn, eval_fn=_eval_fn, out_dir=out,
            progress=False).fit()
    for k, v in _state(model).items():
        ref = _expert_slice(k, final_ref[k], rank % 2) if k in expert_parameters(model) else final_ref[k]
        _close(v, ref, f"rank {rank}: final {k}")
    if rank == 0:
        for r, ref in zip(_train_records(out), records_ref, strict=True):
            for key in ("loss", "grad_norm", "lm_loss", "fraction_dropped", "nll"):
                if key in ref:
                    _close(torch.tensor(r[key]), torch.tensor(ref[key]), f"step {r['step']} {key}", 1e-5)
        for k, v in consolidate_experts(Path(out) / "ckpt-4.pt").items():
            _close(v, final_ref[k], f"consolidated {k}")


def test_hybrid_expert_and_data_parallel_matches_single_process(tmp_path):
    """4 ranks as 2 data-parallel replicas of a 2-rank expert-parallel group: each expert's gradient is summed over
    the replicas (the ranks holding the same experts). The reference is one process with grad_accum=2: micro-batch m
    of it is expert-parallel group m's share of the global batch, and each group computes its balancing loss on its
    own tokens."""
    seed_everything(0)
    model = SwitchLM(CFG)
    _fit(model, tmp_path / "single")
    _spawn(_hybrid_worker, str(tmp_path), _state(model), _train_records(tmp_path / "single"), world=4)


def test_plain_ddp_around_expert_parallel_layer_raises(tmp_path):
    _spawn(_ddp_worker, str(tmp_path))


def test_expert_parallel_run_cannot_resume_a_single_process_checkpoint(tmp_path):
    """The other direction: shards expected, none written."""
    seed_everything(0)
    _fit(SwitchLM(CFG), tmp_path / "single")
    _spawn(_resume_single_worker, str(tmp_path))


def _resume_single_worker(rank, init, tmp):
    _in_group(init, rank, _resume_single_checks, tmp)


def _resume_single_checks(rank, tmp):
    with pytest.raises(ValueError, match="written without expert parallelism"):
        _fit(SwitchLM(CFG, group="world"), os.path.join(tmp, "single"), resume=True)


EP_SCRIPT = """
import sys, torch
sys.path.insert(0, {here!r})
from paperzoo.train import distributed, seed_everything
from paperzoo.train.checkpoint import consolidate_experts
import test_ep_trainer as t
torch.set_num_threads(1)
info, _ = distributed.setup("cpu")  # the process group first: the model's layers ask it for their rank
seed_everything(0)
t._fit(t.SwitchLM(t.CFG, group="world"), {out!r})
if info.rank == 0:
    torch.save(consolidate_experts({out!r} + "/ckpt-4.pt"), {out!r} + "/final.pt")
distributed.teardown(info, wait=True)
"""


@pytest.mark.slow
def test_expert_parallel_trainer_under_torchrun(tmp_path):
    """The documented launch: ``torchrun --nproc_per_node 2 script.py`` (env:// rendezvous), then the consolidated
    checkpoint equals the single-process run's weights."""
    import socket
    import subprocess
    import sys

    out = str(tmp_path / "ep")
    script = tmp_path / "ep.py"
    script.write_text(EP_SCRIPT.format(here=os.path.dirname(__file__), out=out))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[3] / "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr",
                        "127.0.0.1", "--master_port", str(port), str(script)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    seed_everything(0)
    model = SwitchLM(CFG)
    _fit(model, tmp_path / "single")
    ep = torch.load(Path(out) / "final.pt")
    for k, v in _state(model).items():
        _close(ep[k], v, f"torchrun final {k}")
