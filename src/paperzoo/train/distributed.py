"""Data parallelism under ``torchrun``: read the launcher's environment, start the process group, pick the device.

``torchrun --nproc_per_node K script.py`` sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``; with ``WORLD_SIZE > 1`` the Trainer joins (or creates) the default process group: gloo
on CPU, nccl on GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: ``rank`` in ``[0, world_size)``; ``created`` when we started the group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    created: bool = False

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ValueError(f"environment variable {name}: expected an integer, got {raw!r}") from None


def resolve_device(spec: str, local_rank: int = 0) -> torch.device:
    """``"auto"`` -> ``cuda:<local_rank>`` when CUDA is available else cpu; ``"cuda"`` -> ``cuda:<local_rank>``."""
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"TrainConfig.device={spec!r}: CUDA is not available here; use 'cpu' or 'auto'")
    if spec == "cuda":
        spec = f"cuda:{local_rank}"
    return torch.device(spec)


def setup(device_spec: str) -> tuple[DistInfo, torch.device]:
    """Join the process group when one is running or ``WORLD_SIZE > 1``; returns the rank info and the device."""
    if dist.is_available() and dist.is_initialized():
        info = DistInfo(dist.get_rank(), dist.get_world_size(), _env_int("LOCAL_RANK", 0), created=False)
        return info, resolve_device(device_spec, info.local_rank)
    world = _env_int("WORLD_SIZE", 1)
    if world <= 1:
        return DistInfo(), resolve_device(device_spec, 0)
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    local_rank = _env_int("LOCAL_RANK", 0)
    device = resolve_device(device_spec, local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, created=True), device


def teardown(info: DistInfo, wait: bool = False) -> None:
    """Destroy the process group if :func:`setup` created it. ``wait=True`` (a clean finish) first meets the other
    ranks at a barrier, so that no rank destroys its group, and exits, while another still has work in flight on it
    (rank 0 writing the last checkpoint, say): gloo can abort the early rank at exit otherwise. An error path passes
    False: a rank that failed alone must not wait for ranks that will never arrive."""
    if info.created and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()


# ------------------------------------------------------------------------------------- expert-parallel exchange
class _AllToAll(torch.autograd.Function):
    """Equal-split ``all_to_all_single``; its adjoint is the same exchange, so backward is one more call."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        return _AllToAll.apply(grad.contiguous(), ctx.group), None


def all_to_all(x: torch.Tensor, group=None) -> torch.Tensor:
    """Differentiable equal-split all-to-all along dim 0 (chunk j goes to rank j)."""
    return _AllToAll.apply(x, group)


class _AllReduce(torch.autograd.Function):
    """Sum over the ranks, handed to every rank; the adjoint of "every rank gets the sum" is again the sum of the
    ranks' gradients, so backward is one more all-reduce."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:  # type: ignore[override]
        ctx.group = group
        out = x.clone(memory_format=torch.contiguous_format)
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        return _AllReduce.apply(grad, ctx.group), None


def all_reduce(x: torch.Tensor, group=None) -> torch.Tensor:
    """Differentiable sum of ``x`` over the ranks of ``group`` (every rank gets the sum)."""
    return _AllReduce.apply(x, group)


# --------------------------------------------------------------------------- expert-sharded parameters under DDP
_RANKS = "_paperzoo_expert_ranks"  # on a parameter: the global ranks its experts are split over (along dim 0)


def mark_expert_parallel(params, ranks) -> None:
    """Mark ``params`` as expert-sharded over the global ``ranks`` of their expert-parallel group: the group's i-th
    rank holds its own slice of the experts along dim 0.

    The :class:`~paperzoo.train.Trainer` keeps marked parameters out of DDP's broadcast and all-reduce, sums their
    gradients over the ranks that hold the same slice (other expert-parallel groups, if any) and divides them by
    the world size (DDP's mean over ranks), counts them once per slice in the clipping norm and checkpoints them
    per rank (see ``trainer.py``).
    """
    for p in params:
        setattr(p, _RANKS, tuple(int(r) for r in ranks))


def expert_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """``{name: parameter}`` of the expert-sharded parameters of ``model`` (see :func:`mark_expert_parallel`)."""
    return {n: p for n, p in model.named_parameters() if len(expert_ranks(p)) > 1}


def expert_ranks(p: torch.Tensor) -> tuple[int, ...]:
    """The global ranks ``p``'s experts are split over (empty: not expert-sharded)."""
    return getattr(p, _RANKS, ())


def check_not_replicated_by_ddp(params, where: str) -> None:
    """Raise if a ``DistributedDataParallel`` forward is running that synchronises any of the expert-sharded
    ``params``: a plain DDP wrap broadcasts rank 0's experts over the others' and averages different experts'
    gradients. Called by expert-parallel layers at every forward (cheap: a set of a few dozen ids)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = getattr(DDP, "_active_ddp_module", None)
    if ddp is None:
        return
    managed = getattr(ddp, "_module_parameters", None)
    if managed is None:  # a torch without that list: DDP's own marker of ignored parameters
        synced = any(not getattr(p, "_ddp_ignored", False) for p in params)
    else:
        ids = {id(p) for p in managed}
        synced = any(id(p) in ids for p in params)
    if synced:
        raise ValueError(
            f"{where} is expert-parallel (each rank holds different experts) but runs inside a "
            "DistributedDataParallel that broadcasts and all-reduces its expert parameters, which mixes different "
            "experts together. Train it with paperzoo.train.Trainer (launched with torchrun), which keeps the "
            "experts out of DDP, scales their gradients by 1/world and checkpoints them per rank; see "
            "src/paperzoo/papers/switch/README.md, 'Expert parallelism'")


# ------------------------------------------------------------------------------------- gathering with gradients
class _AllGather(torch.autograd.Function):
    """``all_gather`` along dim 0 whose backward sums every rank's gradient of the gathered tensor and returns this
    rank's slice (``dist.all_gather`` itself carries no gradient): the adjoint of the gather."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:  # type: ignore[override]
        ctx.group, ctx.rank, ctx.n = group, dist.get_rank(group), x.shape[0]
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        grad = grad.contiguous()
        dist.all_reduce(grad, group=_group_or_world(ctx.group))
        return grad[ctx.rank * ctx.n:(ctx.rank + 1) * ctx.n], None


def _group_or_world(group):
    return group if group is not None else dist.group.WORLD


def all_gather_with_grad(x: torch.Tensor, group=None) -> torch.Tensor:
    """Every rank's ``x`` (equal shapes) concatenated along dim 0, differentiable: gradients reach each rank's own
    ``x`` from every rank's use of it. Without an initialised process group (one process) returns ``x``."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return x
    return _AllGather.apply(x, group)
