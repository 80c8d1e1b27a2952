"""Atomic checkpoint files ``ckpt-<step>.pt``: write, list, prune, and load the newest loadable one.

A save writes a temp file in the same folder, flushes and fsyncs it, renames it over the final name
(``os.replace`` is atomic on POSIX) and fsyncs the folder. A crash at any point leaves either the old
set of checkpoints or the old set plus the complete new file; stray temp files are removed later.

Expert parallelism: each rank also writes its own experts to ``ckpt-<step>.experts-<rank>-of-<world>.pt`` beside
the replicated ``ckpt-<step>.pt``; the shards are written (atomically) before the main file, so a main file always
has its shards. :func:`consolidate_experts` joins them into the single-process model's state dict.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import torch

_NAME = re.compile(r"^ckpt-(\d+)\.pt$")
_SHARD = re.compile(r"^ckpt-(\d+)\.experts-(\d+)-of-(\d+)\.pt$")
TMP_PREFIX = ".tmp-ckpt-"


class NoLoadableCheckpointError(RuntimeError, ValueError):
    """Checkpoint files exist but none loads (a ValueError too: a damaged folder is the user's to repair)."""


def checkpoint_path(out_dir: str | os.PathLike, step: int) -> Path:
    """``out_dir / f"ckpt-{step}.pt"``."""
    return Path(out_dir) / f"ckpt-{step}.pt"


def expert_shard_path(out_dir: str | os.PathLike, step: int, rank: int, world: int) -> Path:
    """``out_dir / f"ckpt-{step}.experts-{rank}-of-{world}.pt"``: one rank's experts at ``step``."""
    return Path(out_dir) / f"ckpt-{step}.experts-{rank}-of-{world}.pt"


def prune_expert_shards(out_dir: str | os.PathLike, rank: int) -> None:
    """Delete ``rank``'s expert shards whose main checkpoint is gone (pruned, or never written after a crash)."""
    d = Path(out_dir)
    kept = {s for s, _ in find_checkpoints(d)}
    for p in d.iterdir() if d.is_dir() else ():
        if (m := _SHARD.match(p.name)) and int(m.group(2)) == rank and int(m.group(1)) not in kept:
            p.unlink(missing_ok=True)


def consolidate_experts(path: str | os.PathLike) -> dict:
    """The single-process model state dict of an expert-parallel checkpoint ``path`` (``ckpt-<step>.pt``): its
    replicated weights plus the experts of one expert-parallel group's ranks, concatenated along dim 0 in order."""
    state = load_checkpoint(path)
    layout = state.get("experts")
    if layout is None:
        return dict(state["model"])
    path, world = Path(path), layout["world_size"]
    ranks = layout.get("ranks", range(world))  # one expert-parallel group holds every expert once
    shards = [load_checkpoint(expert_shard_path(path.parent, state["step"], r, world)) for r in ranks]
    model = dict(state["model"])
    for name in layout["names"]:
        model[name] = torch.cat([s["model"][name] for s in shards])
    return model


def find_checkpoints(out_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """``[(step, path), ...]`` of the ``ckpt-<step>.pt`` files in ``out_dir``, oldest first."""
    d = Path(out_dir)
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := _NAME.match(p.name)) and p.is_file()]
    return sorted(found)



def checkpoint_file(path: str | os.PathLike, what: str = "a training") -> Path:
    """``path`` itself when it is a checkpoint file, else the newest ``ckpt-<step>.pt`` of the job folder ``path``;
    a ValueError naming ``path`` (and ``what`` job wrote it) when there is none."""
    p = Path(path)
    if p.is_file():
        return p
    found = find_checkpoints(p) if p.is_dir() else []
    if not found:
        where = "holds no ckpt-<step>.pt" if p.is_dir() else "does not exist"
        raise ValueError(f"{p} {where}: give a checkpoint file or the folder of {what} job")
    return found[-1][1]

def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_save(obj, path: str | os.PathLike) -> Path:
    """``torch.save(obj)`` to ``path`` atomically (temp file, flush, fsync, ``os.replace``, fsync of the folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return path


def save_checkpoint(state: dict, out_dir: str | os.PathLike, step: int, keep_last: int) -> Path:
    """Write ``state`` as ``ckpt-<step>.pt`` atomically, then delete all but the newest ``keep_last`` checkpoints."""
    path = atomic_save(state, checkpoint_path(out_dir, step))
    ckpts = find_checkpoints(out_dir)
    for _, old in ckpts[: max(0, len(ckpts) - keep_last)]:
        old.unlink(missing_ok=True)
    return path


def remove_stale_temp_files(out_dir: str | os.PathLike) -> None:
    """Delete temp files left by a save that crashed."""
    d = Path(out_dir)
    if d.is_dir():
        for p in d.glob(f"{TMP_PREFIX}*"):
            p.unlink(missing_ok=True)


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Load one checkpoint to CPU (``weights_only=True``: plain types and tensors only)."""
    state = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or "step" not in state or "model" not in state:
        raise ValueError(f"{path}: not a paperzoo training checkpoint (expected a dict with 'step' and 'model')")
    return state


def load_latest(out_dir: str | os.PathLike) -> tuple[dict, Path] | None:
    """The newest checkpoint in ``out_dir`` that loads, with its path; ``None`` when there is none.

    Unreadable (truncated, corrupt) files are skipped with a warning each; if files exist but none loads,
    a :class:`NoLoadableCheckpointError` lists them rather than silently starting over.
    """
    ckpts = find_checkpoints(out_dir)
    errors = []
    for _, path in reversed(ckpts):
        try:
            state = load_checkpoint(path)
        except Exception as e:  # corrupt / truncated file: fall back to the previous one
            errors.append((path, _brief(e)))
            continue
        for bad, why in errors:  # said only when a fallback loads: otherwise the error below lists them
            warnings.warn(f"skipping unreadable checkpoint {bad} ({why})", stacklevel=2)
        return state, path
    if ckpts:
        raise NoLoadableCheckpointError(
            f"no loadable checkpoint in {out_dir}: " + "; ".join(f"{p.name}: {why}" for p, why in errors)
            + "; restore a good copy, or delete these files to train this job again from step 0")
    return None


def _brief(e: BaseException, limit: int = 120) -> str:
    """``Type: first line`` of an exception, cut to ``limit`` characters (torch.load's own texts run to paragraphs)."""
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {first if len(first) <= limit else first[:limit - 3] + '...'}"
