"""VATT's losses: MIL-NCE against a brute-force loop, NCE's limits, masking, and 2 gloo ranks = one process."""

import math
import os
import tempfile
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from paperzoo.papers.vatt import VATT, VATTConfig, VATTLoss, linear_probe, mil_nce_loss, nce_loss, retrieval_metrics


def _brute_milnce(x, y, tau, symmetric=False):
    """The official AsymmetricNCE (or symmetric InfoNCE) written as plain loops over samples and candidates."""
    x, y = F.normalize(x, dim=-1), F.normalize(y, dim=-1)
    b, k = y.shape[:2]
    total = 0.0
    for i in range(b):
        pos = math.log(sum(math.exp(float(x[i] @ y[i, n]) / tau) for n in range(k)))
        xy = [float(x[i] @ y[j, n]) / tau for j in range(b) for n in range(k)]  # x_i against every candidate
        yx = [float(x[j] @ y[i, n]) / tau for j in range(b) for n in range(k)]  # every x against y_i's candidates
        lse = lambda v: math.log(sum(math.exp(s) for s in v))  # noqa: E731
        if symmetric:
            total += 0.5 * (lse(xy) + lse(yx)) - pos
        else:
            total += lse(xy + yx) - pos
    return total / b


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_milnce_equals_a_brute_force_loop(symmetric, k):
    g = torch.Generator().manual_seed(k)
    x, y = torch.randn(5, 8, generator=g, dtype=torch.float64), torch.randn(5, k, 8, generator=g, dtype=torch.float64)
    got = mil_nce_loss(x.float(), y.float(), 0.07, symmetric=symmetric)
    assert abs(float(got) - _brute_milnce(x, y, 0.07, symmetric)) < 1e-4 * max(1.0, abs(float(got)))


def test_nce_with_a_batch_of_one():
    """One sample: no negatives; the shared softmax holds the positive twice (log 2), the symmetric one once (0)."""
    x, y = torch.randn(1, 6), torch.randn(1, 6)
    assert abs(float(nce_loss(x, y)) - math.log(2)) < 1e-6
    assert abs(float(nce_loss(x, y, symmetric=True))) < 1e-6


def test_the_positive_pair_lowers_the_loss_and_temperature_scales_it():
    x = torch.randn(6, 16)
    aligned, shuffled = x + 0.01 * torch.randn(6, 16), torch.randn(6, 16)
    assert nce_loss(x, aligned) < nce_loss(x, shuffled)
    assert nce_loss(x, aligned, temperature=0.07) < nce_loss(x, aligned, temperature=1.0)


def test_invalid_samples_are_neither_queries_nor_negatives():
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(5, 8, generator=g), torch.randn(5, 2, 8, generator=g)
    valid = torch.tensor([True, True, False, True, False])
    masked = mil_nce_loss(x, y, valid=valid)
    keep = valid.nonzero().flatten()
    assert torch.allclose(masked, mil_nce_loss(x[keep], y[keep]), atol=1e-5)
    xg = x.clone().requires_grad_(True)
    mil_nce_loss(xg, y, valid=valid).backward()
    assert torch.isfinite(xg.grad).all() and xg.grad[~valid].abs().max() == 0


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="candidates"):
        mil_nce_loss(torch.randn(4, 8), torch.randn(3, 2, 8))
    with pytest.raises(ValueError, match="batch, dim"):
        nce_loss(torch.randn(4, 8), torch.randn(4, 2, 8))
    with pytest.raises(ValueError, match="temperature"):
        nce_loss(torch.randn(4, 8), torch.randn(4, 8), temperature=0.0)


def test_vatt_loss_backpropagates_into_every_tower(one_thread):
    model = VATT(VATTConfig.preset("tiny")).train()
    loss, parts = VATTLoss()(model(**VATT.example_inputs(model.cfg, 4)))
    loss.backward()
    assert set(parts) == {"nce_va", "milnce_vt"}
    for name in ("video_in.tokenizer.proj.weight", "audio_in.tokenizer.proj.weight", "text_in.weight",
                 "heads.va_to_vt.1.weight"):
        assert dict(model.named_parameters())[name].grad.abs().sum() > 0, name


# ----------------------------------------------------------------------------------------------------- evaluation
def test_retrieval_metrics_on_a_known_ranking():
    q = torch.eye(4)
    keys = torch.eye(4)[[0, 2, 1, 3]]  # keys 1 and 2 swapped: queries 1 and 2 find their key second
    r = retrieval_metrics(q, keys)
    assert r["R@1"] == 0.5  # queries 0 and 3
    keys = torch.stack([torch.eye(4), torch.eye(4)[[1, 0, 3, 2]]], 1)  # K = 2 candidates: the first always right
    assert retrieval_metrics(q, keys)["R@1"] == 1.0 and retrieval_metrics(q, keys)["median_rank"] == 1.0
    far = retrieval_metrics(q, -torch.eye(4))  # the right key is the least similar
    assert far["R@1"] == 0.0 and far["median_rank"] == 4.0
    assert retrieval_metrics(torch.randn(10, 3), torch.randn(10, 3), pool=5)["R@5"] == 1.0
    with pytest.raises(ValueError, match="same N"):
        retrieval_metrics(torch.randn(4, 3), torch.randn(5, 3))


def test_linear_probe_separates_separable_features_and_not_noise():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (300,), generator=g)
    centres = torch.randn(3, 5, generator=g) * 4
    x = centres[y] + torch.randn(300, 5, generator=g)
    assert linear_probe(x[:200], y[:200], x[200:], y[200:])["test_acc"] > 0.95
    noise = torch.randn(300, 5, generator=g)
    assert linear_probe(noise[:200], y[:200], noise[200:], y[200:])["test_acc"] < 0.55
    with pytest.raises(ValueError, match="int64"):
        linear_probe(x, y.float(), x, y)


# ----------------------------------------------------------------------------------------------------- distributed
B, K, D = 3, 2, 6


def _inputs(rank: int):
    g = torch.Generator().manual_seed(10 + rank)
    return torch.randn(B, D, generator=g, dtype=torch.float64), torch.randn(B, K, D, generator=g,
                                                                             dtype=torch.float64)


def _worker(rank: int, world: int, init_method: str, symmetric: bool) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    try:
        w = torch.nn.Linear(D, D, dtype=torch.float64)  # a shared layer: its gradient must come out right too
        torch.manual_seed(0)
        torch.nn.init.normal_(w.weight)
        x, y = _inputs(rank)
        x, y = x.requires_grad_(True), y.requires_grad_(True)
        loss = mil_nce_loss(w(x), y, 0.1, symmetric=symmetric)
        loss.backward()
        g_w = w.weight.grad.clone()
        dist.all_reduce(g_w)
        g_w /= world  # DDP's average

        parts = [_inputs(r) for r in range(world)]  # the single process: every rank's samples in one batch
        xs = torch.cat([p[0] for p in parts]).requires_grad_(True)
        ys = torch.cat([p[1] for p in parts]).requires_grad_(True)
        w.weight.grad = None
        full = mil_nce_loss(w(xs), ys, 0.1, symmetric=symmetric, gather=False)
        full.backward()

        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        sl = slice(rank * B, (rank + 1) * B)
        checks = {"loss (mean over ranks)": (mean, full.detach()),
                  "x gradient": (x.grad / world, xs.grad[sl]), "y gradient": (y.grad / world, ys.grad[sl]),
                  "shared weight gradient": (g_w, w.weight.grad)}
        for what, (a, b) in checks.items():
            err = float((a - b).abs().max())
            assert err < 1e-10, f"rank {rank}: {what} differs by {err}"
        assert float((loss.detach() - full.detach()).abs()) > 1e-6  # the ranks' losses differ: the test means it
    finally:
        dist.destroy_process_group()


def _spawn(world: int, symmetric: bool, timeout: float = 120.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "init")
        ctx = mp.start_processes(_worker, args=(world, init, symmetric), nprocs=world, join=False,
                                 start_method="fork")
        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=1.0):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                pytest.fail(f"{world} workers did not finish in {timeout} s")


@pytest.mark.parametrize("symmetric", [False, True])
def test_two_gloo_ranks_give_the_single_process_loss_and_gradients(symmetric):
    _spawn(2, symmetric)
