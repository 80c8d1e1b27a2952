"""The model of the expert: p(u_j = 1 | fingerprint_j), an ensemble of bootstrap MLPs (paper Sec. 4).

Each of ``members`` MLPs (150 -> 10 -> 10 -> 1, sigmoid) is trained with BCE on a bootstrap resample of the answered
LFs, each answer weighted by its confidence (the five-level scale). Its spread across members is the uncertainty the
acquisition functions use: mu_j = mean over members, sigma_j = their (population) standard deviation.

Families: with K > 2 classes each class's LFs are their own one-vs-rest problem with their own ``members`` MLPs,
trained only on that family's answers; all families' members are still one batched computation (a bootstrap count
of 0 for rows outside a member's family).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .mlp import BatchedMLP, MLPConfig


@dataclass(frozen=True)
class EnsembleConfig:
    """``members`` bootstrap MLPs with ``mlp`` hyper-parameters (the official 150-10-10-1, Adam 1e-3, wd 1e-4, 200)."""

    members: int = 50
    mlp: MLPConfig = field(default_factory=MLPConfig)
    bootstrap: bool = True


class ExpertModel:
    """``families`` groups of ``config.members`` MLPs on ``dim``-dimensional fingerprints."""

    def __init__(self, dim: int, families: int, config: EnsembleConfig, seed: int = 0):
        self.config, self.dim, self.families = config, dim, families
        self.generator = torch.Generator().manual_seed(seed)
        self.net = BatchedMLP(families * config.members, dim, 1, config.mlp, self.generator)
        self.epochs: torch.Tensor | None = None

    def bootstrap_counts(self, family: torch.Tensor) -> torch.Tensor:
        """(families * members, n) how often each answered row is drawn by each member's bootstrap resample.

        Member m of family g draws n_g rows with replacement among the n_g rows of family g (sklearn's ``resample``).
        """
        e, g = self.config.members, self.families
        n = family.shape[0]
        if not self.config.bootstrap:
            return (family[None, :] == torch.arange(g).repeat_interleave(e)[:, None]).to(torch.float32)
        order = torch.argsort(family, stable=True)  # rows grouped by family
        sizes = torch.bincount(family, minlength=g)  # (g,)
        start = torch.cumsum(sizes, 0) - sizes
        member_family = torch.arange(g).repeat_interleave(e)  # (M,)
        n_m, s_m = sizes[member_family], start[member_family]  # (M,)
        draws = torch.rand(g * e, n, generator=self.generator)  # n >= every n_g: one uniform per draw
        pick = s_m[:, None] + (draws * n_m[:, None]).long().clamp_max((n_m - 1).clamp_min(0)[:, None])
        valid = torch.arange(n)[None, :] < n_m[:, None]  # member m makes n_m draws
        rows = order[pick.clamp_max(max(n - 1, 0))]
        counts = torch.zeros(g * e, n)
        counts.scatter_add_(1, rows, valid.to(torch.float32))
        return counts

    def fit(self, x: np.ndarray, label: np.ndarray, weight: np.ndarray, family: np.ndarray,
            seed: int | None = None) -> None:
        """Train on answered LFs: fingerprints ``x`` (n, dim), labels in [0, 1] (n,), answer weights (n,), and the
        family of each (n,). Re-initialises every member first (the official ``weight_reset``); ``seed`` reseeds
        the initialisation and bootstrap draws (a session seeds each fit by its state, so a fit can be repeated)."""
        _check_answers(x, label, weight, family, self.dim, self.families)
        if seed is not None:
            self.generator.manual_seed(seed)
        self.net = BatchedMLP(self.net.members, self.dim, 1, self.config.mlp, self.generator)
        fam = torch.as_tensor(family, dtype=torch.int64)
        counts = self.bootstrap_counts(fam)  # (M, n)
        w = counts * torch.as_tensor(weight, dtype=torch.float32)[None, :]
        # loss_m = sum_i c_mi w_i BCE_i / sum_i c_mi: the official mean of (BCE * w) over the n_g resampled rows
        self.epochs = self.net.fit(torch.as_tensor(x, dtype=torch.float32),
                                   torch.as_tensor(label, dtype=torch.float32), w, norm=counts.sum(1))

    def fit_family(self, g: int, x: np.ndarray, label: np.ndarray, weight: np.ndarray, seed: int) -> None:
        """Refit only family ``g``'s members on its own answered LFs (as :meth:`fit` would, from its own seeded
        initialisation and bootstrap draws); the other families keep their weights."""
        if not 0 <= g < self.families:
            raise ValueError(f"family must lie in [0, {self.families}), got {g}")
        one = ExpertModel(self.dim, 1, self.config, seed)
        one.fit(x, label, weight, np.zeros(len(label), dtype=np.int64), seed=seed)
        e = self.config.members
        flat = self.net.flat.clone()
        flat[g * e:(g + 1) * e] = one.net.flat
        self.net.flat = flat

    @torch.no_grad()
    def predict(self, x: np.ndarray, family: np.ndarray) -> np.ndarray:
        """(n, members): each member's p(useful) for LFs ``x`` (n, dim), from the members of each LF's family."""
        x = torch.as_tensor(x, dtype=torch.float32)
        fam = np.asarray(family)
        e = self.config.members
        out = np.empty((len(x), e), dtype=np.float32)
        for g in np.unique(fam):  # one batched pass per class family (K of them), not per LF or member
            rows = np.flatnonzero(fam == g)
            p = self.net.predict(x[rows], slice(g * e, (g + 1) * e))  # (members, rows)
            out[rows] = p.T.numpy()
        return out

    def state(self) -> dict[str, torch.Tensor]:
        return self.net.state()

    def load(self, state: dict[str, torch.Tensor]) -> None:
        self.net.load(state)


def _check_answers(x: np.ndarray, label: np.ndarray, weight: np.ndarray, family: np.ndarray, dim: int,
                   families: int) -> None:
    n = len(label)
    if np.shape(x) != (n, dim):
        raise ValueError(f"fingerprints of the answered LFs must have shape ({n}, {dim}), got {np.shape(x)}")
    if np.shape(weight) != (n,) or np.shape(family) != (n,):
        raise ValueError(f"weight and family must have shape ({n},), got {np.shape(weight)} and {np.shape(family)}")
    if n and (np.min(label) < 0 or np.max(label) > 1):
        raise ValueError(f"labels of answers must lie in [0, 1], got range {np.min(label)}..{np.max(label)}")
    if n and (np.min(family) < 0 or np.max(family) >= families):
        raise ValueError(f"family indices must lie in [0, {families}), got {np.min(family)}..{np.max(family)}")
