"""Expert parallelism: 2 and 4 gloo processes give the single-process layer's outputs and gradients.

Each rank routes its own tokens with per-rank capacity (the paper's per-core capacity), so the reference output is
the single-process layer applied to each rank's batch with the same weights. The auxiliary losses and metrics are
the group's: computed from statistics of the concatenated batch (the balancing loss is a product of two means). The
reference objective is the sum of the ranks' objectives; expert-weight gradients then sum over every rank's tokens,
router gradients (replicated weights) over the all-reduce of the ranks' own.
"""

import os
import subprocess
import sys
import tempfile
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig, balance_loss, router_z_loss

D, HID, E, B, S = 8, 16, 8, 2, 12


def _inputs(r: int):
    g = torch.Generator().manual_seed(100 + r)
    x = torch.randn(B, S, D, generator=g)
    mask = torch.rand(B, S, generator=g) > 0.15
    proj = torch.randn(B, S, D, generator=g)
    return x, mask, proj


def _loss(y, aux, proj):
    return (y * proj).sum() + 0.01 * aux["balance_loss"] + 0.001 * aux["z_loss"]


def _group_reference(full, world):
    """The single-process layer on each rank's batch (per-rank capacity) and the group's aux values on the
    concatenated batch; ``total`` is the sum of the ranks' objectives."""
    xs, ys, auxes, logits, valids = [], [], [], [], []
    total = 0.0
    for r in range(world):
        xr, mr, pr = _inputs(r)
        xr.requires_grad_(True)
        yr, auxr = full(xr, mr)
        logits.append(full.route(xr.reshape(-1, D))[0])
        valids.append(mr.reshape(-1))
        xs.append(xr)
        ys.append(yr)
        auxes.append(auxr)
        total = total + (yr * pr).sum()
    logits, valid = torch.cat(logits), torch.cat(valids)
    n = valid.float().sum()
    k = full.config.k
    kept = sum((1 - a["fraction_dropped"]) * m.float().sum() * k for a, m in zip(auxes, valids, strict=True))
    group = {"balance_loss": balance_loss(logits.softmax(-1), logits.argmax(-1), valid),
             "z_loss": router_z_loss(logits, valid),
             "fraction_dropped": 1 - kept / (n * k),
             "expert_load": sum(a["expert_load"] * m.float().sum() for a, m in zip(auxes, valids, strict=True)) / n,
             "expert_count": sum(a["expert_count"] for a in auxes)}
    total = total + world * (0.01 * group["balance_loss"] + 0.001 * group["z_loss"])
    return xs, ys, auxes, group, total


def _worker(rank: int, world: int, init_method: str, k: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    try:
        kw = dict(k=k, min_capacity=1, capacity_factor=1.0, jitter_eps=0.0)
        with pytest.raises(ValueError, match="divisible"):
            SwitchMoE(SwitchMoEConfig(dim=D, ffn_dim=HID, num_experts=world + 1), group="world")
        torch.manual_seed(0)
        cfg = SwitchMoEConfig(dim=D, ffn_dim=HID, num_experts=E, **kw)
        full = SwitchMoE(cfg).train()
        ep = SwitchMoE(cfg, group="world").train()
        n = E // world
        with torch.no_grad():
            ep.router.weight.copy_(full.router.weight)
            ep.w1.copy_(full.w1[rank * n:(rank + 1) * n])
            ep.w2.copy_(full.w2[rank * n:(rank + 1) * n])

        x, mask, proj = _inputs(rank)
        x = x.requires_grad_(True)
        y, aux = ep(x, mask)
        _loss(y, aux, proj).backward()

        xs, ys, auxes, group, total = _group_reference(full, world)
        total.backward()
        xr, yr = xs[rank], ys[rank]
        assert max(float(a["fraction_dropped"]) for a in auxes) > 0, "capacity should bind somewhere"
        own = auxes[rank]["balance_loss"]
        assert (own - group["balance_loss"]).abs() > 1e-4, "the group's balancing loss should differ from a rank's"

        def close(a, b, what):
            err = (a - b).abs().max().item()
            assert err <= 1e-6, f"rank {rank}/{world}: {what} differs by {err}"

        close(y, yr, "output")
        close(x.grad, xr.grad, "input gradient")
        for name in ("balance_loss", "z_loss", "fraction_dropped", "expert_load", "expert_count"):
            close(aux[name], group[name], name)
        for w, wf in ((ep.w1, full.w1), (ep.w2, full.w2)):
            parts = [torch.empty_like(w.grad) for _ in range(world)]
            dist.all_gather(parts, w.grad)
            close(torch.cat(parts), wf.grad, "expert weight gradient")
        g = ep.router.weight.grad.clone()
        dist.all_reduce(g)
        close(g, full.router.weight.grad, "router gradient (all-reduced)")
    finally:
        dist.destroy_process_group()


def _spawn(world: int, k: int = 1, timeout: float = 120.0) -> None:
    """Fork ``world`` gloo workers (fork: no re-import, well under a second); fail rather than hang."""
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "init")
        ctx = mp.start_processes(_worker, args=(world, init, k), nprocs=world, join=False, start_method="fork")
        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                pytest.fail(f"{world} expert-parallel workers did not finish in {timeout} s")


def test_expert_parallel_2_processes():
    _spawn(2)


def test_expert_parallel_4_processes():
    _spawn(4)


def test_expert_parallel_2_processes_top2():
    _spawn(2, k=2)



@pytest.mark.slow
def test_expert_parallel_under_torchrun(tmp_path):
    """The same check launched the way training runs: ``torchrun --nproc_per_node 2`` (env:// rendezvous)."""
    script = tmp_path / "ep.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
        "from test_moe_distributed import _worker\n"
        "_worker(int(os.environ['RANK']), int(os.environ['WORLD_SIZE']), 'env://', 1)\n")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    r = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", "29517", str(script)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
