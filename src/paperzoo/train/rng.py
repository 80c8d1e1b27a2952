"""Seeding and capture/restore of the process RNG states (python, numpy, torch CPU, CUDA).

Call :func:`seed_everything` in the recipe BEFORE building the model: that fixes initialisation. The
Trainer itself fixes data order (its own generator seeded from ``cfg.seed``) and saves these RNG states
in every checkpoint, so dropout continues identically after a resume.
"""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int, deterministic: bool = False) -> int:
    """Seed python ``random``, numpy and torch (CPU and every CUDA device); returns ``seed``.

    ``deterministic=True`` also asks torch for deterministic kernels (``use_deterministic_algorithms``),
    which matters on GPU only.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed_everything: expected an int >= 0, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
    return seed


def get_rng_state() -> dict:
    """The RNG states as plain types and CPU tensors (loadable with ``torch.load(weights_only=True)``)."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(gauss)),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore states captured by :func:`get_rng_state`."""
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        cuda = state["cuda"]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
