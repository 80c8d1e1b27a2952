"""Trainer: the one training loop every recipe uses.

A step draws ``cfg.batch_size`` samples (the global batch), splits them into ``grad_accum`` micro-batches
and, under DDP, across ranks; each slice's loss (a mean over the slice) is scaled by its share of the
global batch, so the gradient is that of the mean loss over the global batch whatever the split.
Then: a finiteness check (a NaN/inf loss or gradient norm raises :class:`TrainingDivergedError` before
any state changes), clipping, AdamW, the LR schedule, and the periodic log / eval / checkpoint.

Reproducibility: call ``seed_everything`` before building the model (fixes init); ``cfg.seed`` fixes
data order; checkpoints carry model, optimizer, scheduler, data position and every RNG state, so
``fit(resume=True)`` continues bit-exactly on CPU. SIGINT/SIGTERM during ``fit`` finish the current step,
save a checkpoint and exit with ``SystemExit(128 + signum)``; in a worker of ``paperzoo.train.parallel`` the
pool's parent owns the signals and its stop request does the same.

Data parallel: launch the same script with ``torchrun --nproc_per_node K script.py``; each rank then builds
the same model (same seed) and Trainer, which joins the process group and wraps the model in DDP.
Under DDP, ``loss_fn`` receives the DDP wrapper (call ``model(...)``, not submodules, so gradients are
synchronised; ``unwrap(model)`` gives the bare module); ``eval_fn`` receives the bare module and runs on
rank 0 only. The logged loss and ``loss_fn`` metrics are means over the global batch (all-reduced; every rank
must return the same metric names). Only rank 0 writes checkpoints, ``metrics.jsonl`` and progress.

Expert parallelism (e.g. ``SwitchLM(cfg, group="world")``, built on every rank after
:func:`~paperzoo.train.distributed.setup` has started the process group):
parameters marked expert-sharded (:func:`~paperzoo.train.distributed.mark_expert_parallel`; each rank holds its
own experts) are kept out of DDP's broadcast and all-reduce. Their gradients already sum the expert-parallel
group's tokens (the all-to-all's backward); with several groups (hybrid expert + data parallelism) they are summed
over the ranks holding the same experts, whose values are made equal at the start; then they are divided by the
world size to match DDP's mean over ranks. The clipping norm counts replicated gradients once and each expert
slice once; ``eval_fn`` runs on every rank
(the experts' forward is collective) and rank 0 logs it; each rank checkpoints its experts and their optimizer
state in ``ckpt-<step>.experts-<rank>-of-<world>.pt`` beside rank 0's ``ckpt-<step>.pt`` (which holds everything
replicated), and resuming needs the same world size and expert layout.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import signal
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from paperzoo.context import hint

from . import distributed, parallel
from .allocator import reuse_freed_memory
from .batches import BatchOrder, fetch, to_device
from .checkpoint import (
    atomic_save,
    expert_shard_path,
    find_checkpoints,
    load_checkpoint,
    load_latest,
    prune_expert_shards,
    remove_stale_temp_files,
    save_checkpoint,
)
from .compiled import compile_model
from .config import TrainConfig
from .metrics import MetricsLog, ProgressDisplay
from .metrics import say as metrics_say
from .optim import build_optimizer, build_scheduler
from .precision import resolve_precision
from .rng import get_rng_state, set_rng_state

CHECKPOINT_VERSION = 1


class TrainingDivergedError(RuntimeError):
    """The loss or gradient norm became NaN/inf; ``step`` is the (1-based) step that produced it."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


def unwrap(model: nn.Module) -> nn.Module:
    """The bare module inside a DDP wrapper (or the module itself)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def _metric_value(name: str, v, where: str) -> float:
    if isinstance(v, torch.Tensor) and v.numel() == 1:
        return float(v.detach().item())
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    raise ValueError(f"{where}: metric {name!r} must be a number or a one-element tensor, got {type(v).__name__}")


def _takes_step(fn: Callable) -> bool:
    """Whether ``fn`` has a parameter named ``step`` (a schedule inside the loss: crops, annealed windows)."""
    try:
        return "step" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


def _unpack_loss(out, step: int) -> tuple[torch.Tensor, dict[str, float]]:
    """``loss_fn`` output -> (scalar loss, metrics); raises ValueError naming what was expected."""
    metrics: Mapping = {}
    if isinstance(out, tuple | list) and len(out) == 2 and isinstance(out[1], Mapping):
        out, metrics = out
    want = "loss_fn(model, batch) must return a scalar floating-point tensor with grad, or (loss, dict)"
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{want}; got {type(out).__name__} at step {step}")
    if out.ndim != 0:
        raise ValueError(f"{want}; got a tensor of shape {tuple(out.shape)} at step {step} (reduce it, e.g. .mean())")
    if not out.is_floating_point():
        raise ValueError(f"{want}; got dtype {out.dtype} at step {step}")
    if not out.requires_grad:
        raise ValueError(f"{want}; got a loss that does not require grad at step {step}")
    return out, {str(k): _metric_value(str(k), v, "loss_fn") for k, v in metrics.items()}


def _check_same_keys(keys: list[str], device: torch.device) -> None:
    """Every rank's ``loss_fn`` must return the same metric names (their values are all-reduced in that order)."""
    sig = torch.tensor([len(keys), zlib.crc32("\0".join(keys).encode())], dtype=torch.float64, device=device)
    both = torch.cat([sig, -sig])
    dist.all_reduce(both, op=dist.ReduceOp.MAX)  # max and -min of each number
    if not torch.equal(both[:2], -both[2:]):
        raise ValueError(f"loss_fn returned different metric names on different ranks (here: {keys}); return the "
                         "same names on every rank")


def _expert_group(experts: dict, cfg: TrainConfig, world: int, n: int) -> tuple[int, ...]:
    """The global ranks of this rank's expert-parallel group (empty without expert-sharded parameters); checks that
    one group serves every layer, that its size divides the world and that every rank gets the same token count."""
    groups = {distributed.expert_ranks(p) for p in experts.values()}
    if len(groups) > 1:
        raise ValueError(f"Trainer: the expert-sharded parameters use different expert-parallel groups "
                         f"{sorted(groups)}; use one group for every layer")
    ranks = groups.pop() if groups else ()
    if ranks and (world % len(ranks) or max(ranks) >= world):
        name = next(iter(experts))
        raise ValueError(f"Trainer: {name} is sharded over ranks {list(ranks)} but training runs on {world} "
                         f"rank(s); the expert-parallel group size must divide the world size")
    last = n % cfg.batch_size
    if ranks and not cfg.drop_last and last % (world * cfg.grad_accum):
        raise ValueError(
            f"Trainer: expert parallelism needs the same number of samples on every rank, but with drop_last=False "
            f"the last batch of each epoch ({last} samples) does not split into world_size * grad_accum = "
            f"{world * cfg.grad_accum} equal parts; set drop_last=True")
    return ranks


def _check_sizes(cfg: TrainConfig, world: int, n: int) -> None:
    if cfg.batch_size % (world * cfg.grad_accum):
        raise ValueError(
            f"TrainConfig.batch_size (the global batch): expected a multiple of world_size * grad_accum = "
            f"{world} * {cfg.grad_accum}, got {cfg.batch_size}"
        )
    need = cfg.batch_size if cfg.drop_last else world * cfg.grad_accum
    if n < need:
        what = f"batch_size={cfg.batch_size}" if cfg.drop_last else f"world_size * grad_accum = {need}"
        raise ValueError(
            f"Trainer: expected a train_set of at least {what} samples (drop_last={cfg.drop_last}), got {n}"
        )


class Trainer:
    """Trains ``model`` on ``train_set`` with ``loss_fn(model, batch) -> loss | (loss, metrics)``.

    A ``loss_fn`` with a ``step`` parameter is called as ``loss_fn(model, batch, step=step)`` (1-based step being
    computed), for schedules inside the objective; the step is restored on resume, so they resume exactly.

    ``eval_fn(model) -> dict[str, float]`` runs every ``cfg.eval_every`` steps and at the end, under
    ``torch.no_grad()`` and ``model.eval()``, with the RNG states restored afterwards (evaluation never
    changes training). ``optimizer`` replaces the default AdamW; ``param_groups`` replaces the default
    decay/no-decay groups (e.g. layer-wise LR decay; groups without ``lr`` get ``cfg.lr``).
    ``out_dir=None`` writes nothing (no checkpoints, no metrics).
    """

    def __init__(
        self,
        model: nn.Module,
        cfg: TrainConfig,
        train_set,
        loss_fn: Callable,
        eval_fn: Callable | None = None,
        collate_fn: Callable | None = None,
        out_dir: str | os.PathLike | None = None,
        progress: bool = True,
        optimizer: torch.optim.Optimizer | None = None,
        param_groups: list[dict] | None = None,
    ):
        if not isinstance(model, nn.Module):
            raise ValueError(f"Trainer: expected model to be an nn.Module, got {type(model).__name__}")
        reuse_freed_memory()  # every step frees and reallocates its large blocks: keep them (see .allocator)
        if not isinstance(cfg, TrainConfig):
            raise ValueError(f"Trainer: expected cfg to be a TrainConfig, got {type(cfg).__name__}")
        if not (hasattr(train_set, "__len__") and hasattr(train_set, "__getitem__")):
            raise ValueError("Trainer: expected train_set to be a map-style dataset (with __len__ and __getitem__)")
        for name, fn in (("loss_fn", loss_fn), ("eval_fn", eval_fn), ("collate_fn", collate_fn)):
            if fn is not None and not callable(fn):
                raise ValueError(f"Trainer: expected {name} to be callable, got {type(fn).__name__}")
        if loss_fn is None:
            raise ValueError("Trainer: expected a loss_fn(model, batch) -> loss")
        if optimizer is not None and param_groups is not None:
            raise ValueError("Trainer: pass either optimizer or param_groups, not both")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"Trainer: expected optimizer to be a torch.optim.Optimizer, got {type(optimizer)}")

        self.cfg = cfg
        self.train_set, self.loss_fn, self.eval_fn, self.collate_fn = train_set, loss_fn, eval_fn, collate_fn
        self._loss_takes_step = _takes_step(loss_fn)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.progress = progress
        n = len(train_set)
        self.dist, self.device = distributed.setup(cfg.device)
        self.precision = resolve_precision(cfg.precision, self.device)
        try:
            _check_sizes(cfg, self.dist.world_size, n)
        except ValueError:
            distributed.teardown(self.dist)
            raise

        self.raw_model = model.to(self.device)
        self.experts = distributed.expert_parameters(self.raw_model)  # {name: parameter}, this rank's own experts
        self.expert_parallel = bool(self.experts)
        try:
            self.expert_group = _expert_group(self.experts, cfg, self.dist.world_size, n)
            self._replicas = self._replica_group() if self.expert_parallel else None
        except ValueError:
            distributed.teardown(self.dist)
            raise
        if optimizer is None:
            optimizer = build_optimizer(param_groups if param_groups is not None else self.raw_model, cfg)
        self.optimizer = optimizer
        self.scheduler = build_scheduler(self.optimizer, cfg)
        if self.dist.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            if self.expert_parallel:  # neither broadcast at the wrap nor all-reduced: each rank's experts are its own
                DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(self.raw_model, list(self.experts))
            self.model: nn.Module = DistributedDataParallel(self.raw_model, device_ids=ids)
        else:
            self.model = self.raw_model
        if cfg.compile:  # what loss_fn calls; the optimizer, clipping and checkpoints keep using raw_model
            self.model = compile_model(self.model)
        self.step = 0
        self._signal: int | None = None
        self._stop = False

    # ----------------------------------------------------------------- state
    def _state(self, order: BatchOrder, elapsed: float, last_loss: float, last_eval: dict) -> dict | None:
        """The checkpoint dict on rank 0 (None elsewhere); every rank must call it (RNG states are gathered)."""
        rng = get_rng_state()
        if self.dist.enabled:
            states: list = [None] * self.dist.world_size
            dist.all_gather_object(states, rng)
        else:
            states = [rng]
        if not self.dist.is_main:
            return None
        model, optimizer = self.raw_model.state_dict(), self.optimizer.state_dict()
        experts = None
        if self.expert_parallel:  # the replicated state only; each rank's experts go to its shard
            model = {k: v for k, v in model.items() if k not in self.experts}
            skip = self._expert_slots()
            optimizer = {**optimizer, "state": {i: v for i, v in optimizer["state"].items() if i not in skip}}
            experts = {"world_size": self.dist.world_size, "group_size": len(self.expert_group),
                       "ranks": list(self.expert_group), "names": sorted(self.experts)}
        return {
            "version": CHECKPOINT_VERSION,
            "step": self.step,
            "model": model,
            "optimizer": optimizer,
            "experts": experts,
            "scheduler": self.scheduler.state_dict(),
            "data": order.state_dict(),
            "rng": states,
            "world_size": self.dist.world_size,
            "elapsed": elapsed,
            "last_loss": last_loss,
            "last_eval": dict(last_eval),
            "config": self.cfg.to_dict(),
        }

    def _replica_group(self) -> dist.ProcessGroup | None:
        """The ranks that hold the same experts as this one (its peers in the other expert-parallel groups), as a
        process group, or None when one group spans the world. Collective: every rank builds every such group.
        Their experts are made equal here (broadcast from the first of them)."""
        world = self.dist.world_size
        every: list = [None] * world
        dist.all_gather_object(every, self.expert_group)
        groups = sorted(set(every))
        if sorted(r for g in groups for r in g) != list(range(world)) or len({len(g) for g in groups}) != 1:
            raise ValueError(f"Trainer: the expert-parallel groups {groups} must split the {world} ranks into "
                             "disjoint groups of one size")
        if len(groups) == 1:
            return None
        mine = None
        for j in range(len(groups[0])):  # the j-th rank of every group holds the same experts
            members = [g[j] for g in groups]
            pg = dist.new_group(members)
            if self.dist.rank in members:
                mine, src = pg, members[0]
        for p in self.experts.values():
            dist.broadcast(p.data, src=src, group=mine)
        return mine

    def _expert_slots(self) -> dict[int, str]:
        """``{index in the optimizer's state dict: name}`` of the expert-sharded parameters."""
        ids = {id(p): n for n, p in self.experts.items()}
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        return {i: ids[id(p)] for i, p in enumerate(params) if id(p) in ids}

    def _expert_shard(self) -> dict:
        """This rank's experts and their optimizer state, with the layout that resuming must match."""
        opt = self.optimizer.state_dict()["state"]
        return {"step": self.step, "rank": self.dist.rank, "world_size": self.dist.world_size,
                "layout": {n: list(p.shape) for n, p in sorted(self.experts.items())},
                "model": {n: p.detach() for n, p in self.experts.items()},
                "optimizer_state": {i: opt[i] for i in self._expert_slots() if i in opt}}

    def _load_expert_shard(self, state: dict, path: Path) -> dict:
        """Check the checkpoint's expert layout against this run's and load this rank's shard; every rank learns
        whether every rank could (so a bad shard raises everywhere instead of leaving the others waiting)."""
        saved, world = state.get("experts"), self.dist.world_size
        error = None
        if saved is None and self.expert_parallel:
            error = (f"resume: {path} was written without expert parallelism, but this model's experts are sharded "
                     f"over {world} ranks; resume it with the same (single-process or data-parallel) model")
        elif saved is not None and not self.expert_parallel:
            error = (f"resume: {path} holds experts sharded over {saved['world_size']} expert-parallel ranks, but "
                     f"this run has none; resume it with torchrun --nproc_per_node {saved['world_size']} and the "
                     "same expert-parallel model (checkpoint.consolidate_experts gives the single-process weights)")
        elif saved is not None and saved["world_size"] != world:
            error = (f"resume: {path} holds experts sharded over {saved['world_size']} ranks, but this run has "
                     f"{world}; resume it with torchrun --nproc_per_node {saved['world_size']}")
        elif saved is not None and saved.get("group_size", world) != len(self.expert_group):
            error = (f"resume: {path} holds experts sharded over expert-parallel groups of {saved['group_size']} "
                     f"ranks, but this model's group has {len(self.expert_group)}; resume with the same groups")
        if error is not None:  # the same on every rank: they all read the same main file
            raise ValueError(error)
        if saved is None:
            return {}
        shard_path = expert_shard_path(path.parent, int(state["step"]), self.dist.rank, world)
        shard = {}
        want = {n: list(p.shape) for n, p in sorted(self.experts.items())}
        try:
            shard = load_checkpoint(shard_path)
            if shard.get("layout") != want or shard.get("rank") != self.dist.rank:
                error = (f"resume: {shard_path} holds experts {shard.get('layout')} of rank {shard.get('rank')}, "
                         f"but rank {self.dist.rank} of this model has {want}; resume with the same model")
        except FileNotFoundError:
            error = f"resume: expert shard {shard_path} is missing (its main checkpoint {path} exists)"
        except Exception as e:  # noqa: BLE001 (a damaged file: said with its name)
            error = f"resume: expert shard {shard_path} does not load ({type(e).__name__}: {e})"
        failed = torch.tensor([float(error is not None)], device=self.device)
        dist.all_reduce(failed)
        if error is not None:
            raise ValueError(error)
        if failed.item() > 0:
            raise ValueError(f"resume: another rank could not load its expert shard of {path} (see its error)")
        return shard

    def _load(self, state: dict, order: BatchOrder, path: Path) -> None:
        saved = state.get("config", {})
        for key in ("batch_size", "seed", "drop_last"):
            if key in saved and saved[key] != getattr(self.cfg, key):
                raise ValueError(
                    f"resume: checkpoint has {key}={saved[key]!r} but cfg.{key}={getattr(self.cfg, key)!r}; "
                    "the data position would not carry over"
                )
        shard = self._load_expert_shard(state, path)
        if shard:
            opt = state["optimizer"]
            state = {**state, "model": {**state["model"], **shard["model"]},
                     "optimizer": {**opt, "state": {**opt["state"], **shard["optimizer_state"]}}}
        self.raw_model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        order.load_state_dict(state["data"])
        rngs = state["rng"]
        set_rng_state(rngs[self.dist.rank] if len(rngs) == self.dist.world_size else rngs[0])
        self.step = int(state["step"])

    def _save(self, order: BatchOrder, elapsed: float, last_loss: float, last_eval: dict) -> Path | None:
        state = self._state(order, elapsed, last_loss, last_eval)
        if self.out_dir is None:
            return None
        if self.expert_parallel:  # every shard is on disk before the main file names the step
            atomic_save(self._expert_shard(), expert_shard_path(self.out_dir, self.step, self.dist.rank,
                                                                self.dist.world_size))
            dist.barrier()
        path = save_checkpoint(state, self.out_dir, self.step, self.cfg.keep_last) if state is not None else None
        if self.expert_parallel:
            dist.barrier()
            prune_expert_shards(self.out_dir, self.dist.rank)
        return path

    # ------------------------------------------------------------------ eval
    def evaluate(self) -> dict[str, float]:
        """``eval_fn(bare model)`` under no_grad/eval mode; RNG states and train mode are restored after."""
        if self.eval_fn is None:
            return {}
        rng = get_rng_state()
        was_training = self.raw_model.training
        self.raw_model.eval()
        try:
            with torch.no_grad(), self.precision.autocast(self.device):
                out = self.eval_fn(self.raw_model)
        finally:
            self.raw_model.train(was_training)
            set_rng_state(rng)
        if not isinstance(out, Mapping):
            raise ValueError(f"eval_fn(model) must return a dict[str, float], got {type(out).__name__}")
        return {str(k): _metric_value(str(k), v, "eval_fn") for k, v in out.items()}

    # ---------------------------------------------------------------- signals
    def _install_handlers(self) -> dict:
        if threading.current_thread() is not threading.main_thread() or parallel.in_pool_worker():
            return {}  # a pool worker: the pool's parent owns the signals (see _train_step)

        def handler(signum, frame):
            if self._signal is not None:  # a second signal: stop now
                raise KeyboardInterrupt
            self._signal = signum

        old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, handler)
        return old

    # ------------------------------------------------------------------- fit
    def fit(self, resume: bool = False) -> dict:
        """Train to ``cfg.steps`` optimizer steps; returns a summary dict.

        ``resume=True`` continues from the newest loadable ``ckpt-<step>.pt`` in ``out_dir`` (or starts
        fresh when there is none). The summary: ``step``, ``loss`` (last step's train loss), ``eval``
        (last eval metrics), ``wall_time_s`` and ``steps_per_s`` / ``samples_per_s`` of this session,
        ``resumed_from`` (step or None), ``precision`` (used, requested, reason). Call it once per Trainer.
        """
        cfg, info = self.cfg, self.dist
        main = info.is_main
        if resume and self.out_dir is None:
            raise ValueError("fit(resume=True): expected the Trainer to have an out_dir holding checkpoints")
        min_batch = info.world_size * cfg.grad_accum
        order = BatchOrder(len(self.train_set), cfg.batch_size, cfg.seed, cfg.drop_last, min_batch)
        log = MetricsLog(self.out_dir / "metrics.jsonl" if (main and self.out_dir is not None) else None)
        elapsed_before, resumed_from, last_loss, last_eval = 0.0, None, float("nan"), {}
        say = metrics_say if main else (lambda msg: None)
        if self.out_dir is not None and main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temp_files(self.out_dir)
        if resume:
            loaded = load_latest(self.out_dir)
            if loaded is not None:
                state, path = loaded
                self._load(state, order, path)
                elapsed_before, resumed_from = float(state.get("elapsed", 0.0)), self.step
                last_loss, last_eval = float(state.get("last_loss", float("nan"))), dict(state.get("last_eval", {}))
                log.truncate_after(self.step)
                say(f"resumed from {path} (step {self.step}/{cfg.steps})")
            else:
                say(f"no checkpoint in {self.out_dir}; starting from step 0")
        elif self.out_dir is not None and find_checkpoints(self.out_dir):
            raise ValueError(
                f"{self.out_dir} already holds checkpoints; " + hint(
                    "pass --resume to continue, or give a new --out",
                    "pass fit(resume=True) to continue or use a new out_dir")
            )
        elif main:
            log.truncate_after(-1)

        display = ProgressDisplay(self.progress and main, cfg.steps, self.step)
        say = display.say if main else say
        if cfg.precision != "fp32":
            say(f"precision {self.precision.used} ({cfg.precision}: {self.precision.reason})")
        self._signal, self._stop = None, False
        old_handlers = self._install_handlers()
        self.model.train()
        t_start = time.perf_counter()
        start_step = self.step
        win_t, win_steps, win_loss, win_metrics = t_start, 0, 0.0, {}
        evaluated_at = saved_at = self.step if resumed_from is not None else -1
        evaluates = main or self.expert_parallel  # an expert-parallel forward needs every rank
        finished = False
        try:
            while self.step < cfg.steps:
                loss_val, lr, metrics, grad_norm = self._train_step(order)
                self.step += 1
                last_loss = loss_val
                now = time.perf_counter()
                elapsed = elapsed_before + now - t_start
                win_steps += 1
                win_loss += loss_val
                for k, v in metrics.items():
                    win_metrics[k] = win_metrics.get(k, 0.0) + v
                sps = cfg.batch_size * win_steps / max(now - win_t, 1e-9)
                display.step(self.step, loss_val, sps)
                if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                    rec = {"event": "train", "step": self.step, "epoch": order.epoch, "loss": win_loss / win_steps,
                           "lr": lr, "samples_per_s": sps, "time": elapsed}
                    if grad_norm is not None:
                        rec["grad_norm"] = grad_norm
                    rec.update({k: v / win_steps for k, v in win_metrics.items()})
                    log.write(rec)
                    display.log(rec)
                    win_t, win_steps, win_loss, win_metrics = now, 0, 0.0, {}
                if evaluates and self.eval_fn is not None and (
                    (cfg.eval_every and self.step % cfg.eval_every == 0) or self.step == cfg.steps
                ):
                    last_eval = self.evaluate()
                    evaluated_at = self.step
                    rec = {"event": "eval", "step": self.step, "time": elapsed, **last_eval}
                    log.write(rec)
                    if main:
                        display.log(rec)
                if self.out_dir is not None and (
                    (cfg.ckpt_every and self.step % cfg.ckpt_every == 0)
                    or self.step == cfg.steps
                    or self._stop
                ):
                    self._save(order, elapsed, last_loss, last_eval)
                    saved_at = self.step
                if self._stop:
                    self._exit_on_signal(say)
            if evaluates and self.eval_fn is not None and evaluated_at != self.step:
                last_eval = self.evaluate()
                log.write({"event": "eval", "step": self.step, "time": elapsed_before + time.perf_counter() - t_start,
                           **last_eval})
            if self.out_dir is not None and saved_at != self.step:
                self._save(order, elapsed_before + time.perf_counter() - t_start, last_loss, last_eval)
        except TrainingDivergedError as e:
            log.write({"event": "diverged", "step": e.step, "time": elapsed_before + time.perf_counter() - t_start})
            raise
        else:
            finished = True
        finally:
            display.close()
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
            distributed.teardown(info, wait=finished)
        wall = time.perf_counter() - t_start
        done = self.step - start_step
        return {
            "step": self.step,
            "loss": last_loss,
            "eval": last_eval,
            "wall_time_s": wall,
            "steps_per_s": done / wall if wall > 0 else 0.0,
            "samples_per_s": done * cfg.batch_size / wall if wall > 0 else 0.0,
            "resumed_from": resumed_from,
            "precision": self.precision.to_dict(),
        }

    def _exit_on_signal(self, say: Callable[[str], None]) -> None:
        signum = self._signal or signal.SIGTERM  # on a rank that was not signalled itself
        name = signal.Signals(signum).name
        where = ""
        if self.out_dir is not None:
            where = (f"; checkpoint {self.out_dir}/ckpt-{self.step}.pt, continue with "
                     f"{hint('--resume and the same --out', 'fit(resume=True)')}")
        say(f"received {name}: stopped after step {self.step}/{self.cfg.steps}{where}")
        raise SystemExit(128 + signum)

    def _train_step(self, order: BatchOrder) -> tuple[float, float, dict[str, float], float | None]:
        """One optimizer step; returns (global mean loss, lr of group 0, metrics (means over the global batch),
        grad norm or None)."""
        cfg, info = self.cfg, self.dist
        step = self.step + 1
        idx = order.next_batch()
        total = len(idx)
        parts = torch.tensor_split(idx, info.world_size * cfg.grad_accum)
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        metric_sums: dict[str, float] = {}
        local_n = 0
        for m in range(cfg.grad_accum):
            part = parts[m * info.world_size + info.rank]
            batch = to_device(fetch(self.train_set, part, self.collate_fn), self.device)
            sync = m == cfg.grad_accum - 1 or not info.enabled
            with contextlib.nullcontext() if sync else self.model.no_sync():
                with self.precision.autocast(self.device):
                    out = self.loss_fn(self.model, batch, step=step) if self._loss_takes_step else \
                        self.loss_fn(self.model, batch)
                    loss, metrics = _unpack_loss(out, step)
                weight = len(part) * info.world_size / total  # DDP averages over ranks: this makes a global mean
                (loss * weight if weight != 1.0 else loss).backward()
            loss_sum += loss.detach().double() * len(part)
            local_n += len(part)
            for k, v in metrics.items():
                metric_sums[k] = metric_sums.get(k, 0.0) + v * len(part)
        if self.expert_parallel:  # the all-to-all's backward summed the group's tokens; the same experts on other
            grads = [p.grad for p in self.experts.values() if p.grad is not None]  # groups saw the other tokens
            for g in grads:
                if self._replicas is not None:
                    dist.all_reduce(g, group=self._replicas)
                g.div_(info.world_size)  # DDP's mean over ranks
        if self._signal is None:
            self._signal = parallel.stop_requested()  # None outside a pool worker
        keys = sorted(metric_sums)
        stats = torch.tensor([loss_sum.item(), float(self._signal is not None), *(metric_sums[k] for k in keys)],
                             dtype=torch.float64, device=self.device)
        if info.enabled:  # the metrics too: sample-weighted means over every rank's part of the batch
            _check_same_keys(keys, self.device)
            dist.all_reduce(stats)
            metric_sums, local_n = dict(zip(keys, stats[2:].tolist(), strict=True)), total
        loss_val = stats[0].item() / total
        self._stop = stats[1].item() > 0  # all ranks agree: stop after this step if any rank was signalled
        if not math.isfinite(loss_val):
            raise TrainingDivergedError(self._diverged_msg(f"loss is {loss_val}", step), step)
        grad_norm = None
        if cfg.grad_clip is not None:
            params = [p for g in self.optimizer.param_groups for p in g["params"]]
            grad_norm = float(self._clip(params, cfg.grad_clip))
            if not math.isfinite(grad_norm):
                raise TrainingDivergedError(self._diverged_msg(f"gradient norm is {grad_norm}", step), step)
        lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        self.scheduler.step()
        return loss_val, lr, {k: v / local_n for k, v in metric_sums.items()}, grad_norm

    def _clip(self, params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
        """Clip to the global gradient norm; under expert parallelism ``||g||^2 = ||g_replicated||^2 + sum over the
        ranks of one expert-parallel group ||g_experts||^2`` (replicated gradients, and the experts' on the ranks
        that hold the same experts, are equal after their all-reduces)."""
        if not self.expert_parallel:
            return torch.nn.utils.clip_grad_norm_(params, max_norm)
        ids = {id(p) for p in self.experts.values()}
        shared = [p.grad for p in params if p.grad is not None and id(p) not in ids]
        own = [p.grad for p in params if p.grad is not None and id(p) in ids]
        norms = [torch.nn.utils.get_total_norm(g).square() if g else torch.zeros((), device=self.device)
                 for g in (shared, own)]
        dist.all_reduce(norms[1])  # every expert slice counted once per expert-parallel group: once in all
        total = (norms[0] + norms[1] * (len(self.expert_group) / self.dist.world_size)).sqrt()
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
        return total

    def _diverged_msg(self, what: str, step: int) -> str:
        last = find_checkpoints(self.out_dir) if self.out_dir is not None else []
        keep = f"the last good checkpoint is {last[-1][1]}" if last else "no checkpoint was saved"
        return f"training diverged at step {step}: {what}; stopped without saving this step ({keep})"
