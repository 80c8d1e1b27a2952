"""VATT's evaluations on frozen features: a linear probe (classification) and zero-shot retrieval (R@K, median rank)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["linear_probe", "retrieval_metrics"]


def linear_probe(train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, num_classes: int | None = None,
                 weight_decay: float = 1e-3, max_iter: int = 300) -> dict[str, float]:
    """Multinomial logistic regression on frozen features (standardised by the train statistics), fitted by
    full-batch L-BFGS with an L2 penalty ``weight_decay * |W|^2``: ``{"train_acc", "test_acc"}``.

    Deterministic: the weights start at zero and L-BFGS draws nothing.
    """
    _check_features(train_x, train_y, "train")
    _check_features(test_x, test_y, "test")
    if train_x.shape[1] != test_x.shape[1]:
        raise ValueError(f"train and test features must share their width, got {train_x.shape[1]} and "
                         f"{test_x.shape[1]}")
    c = num_classes or int(max(train_y.max(), test_y.max())) + 1
    mean, std = train_x.mean(0), train_x.std(0).clamp_min(1e-6)
    xtr, xte = (train_x.double() - mean) / std, (test_x.double() - mean) / std
    w = torch.zeros(xtr.shape[1], c, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(c, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe", tolerance_grad=1e-9)

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(xtr @ w + b, train_y) + weight_decay * w.pow(2).sum()  # CE + lambda |W|^2
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        acc = [float(((x @ w + b).argmax(1) == y).double().mean()) for x, y in ((xtr, train_y), (xte, test_y))]
    return {"train_acc": acc[0], "test_acc": acc[1]}


def retrieval_metrics(queries: Tensor, keys: Tensor, pool: int | None = None) -> dict[str, float]:
    """Zero-shot retrieval: query ``i`` (N, D) should find key ``i`` (N, D) or any of key ``i``'s candidates
    (N, K, D) by cosine similarity. ``pool``: rank within consecutive pools of that many items (the last partial
    one dropped), else within all N. Returns ``R@1``, ``R@5``, ``R@10`` (fractions) and ``median_rank`` (1 = first).
    """
    if queries.ndim != 2 or keys.ndim not in (2, 3) or keys.shape[0] != queries.shape[0] or \
            keys.shape[-1] != queries.shape[1]:
        raise ValueError(f"queries must be (N, D) and keys (N, D) or (N, K, D) with the same N and D, got "
                         f"{tuple(queries.shape)} and {tuple(keys.shape)}")
    n = queries.shape[0]
    pool = pool or n
    if not 1 <= pool <= n:
        raise ValueError(f"pool must be in [1, {n}], got {pool}")
    m = n // pool
    q = F.normalize(queries.float(), dim=-1)[:m * pool].reshape(m, pool, -1)
    k = F.normalize(keys.float(), dim=-1)[:m * pool]
    k = (k if k.ndim == 3 else k[:, None]).reshape(m, pool, -1, k.shape[-1])
    sim = torch.einsum("gqd,gknd->gqkn", q, k).amax(-1)  # best candidate of each key: (pools, pool, pool)
    own = sim.diagonal(dim1=1, dim2=2)[..., None]  # (pools, pool, 1)
    rank = (sim > own).sum(-1).flatten() + 1  # 1 + keys scored above the right one
    return {"R@1": float((rank <= 1).double().mean()), "R@5": float((rank <= 5).double().mean()),
            "R@10": float((rank <= 10).double().mean()), "median_rank": float(rank.double().median())}


def _check_features(x: Tensor, y: Tensor, what: str) -> None:
    if not isinstance(x, Tensor) or x.ndim != 2 or not x.is_floating_point():
        raise ValueError(f"{what} features must be a float tensor (N, D), got {getattr(x, 'dtype', type(x))} "
                         f"{tuple(getattr(x, 'shape', ()))}")
    if not isinstance(y, Tensor) or y.shape != (x.shape[0],) or y.dtype != torch.int64:
        raise ValueError(f"{what} labels must be int64 (N={x.shape[0]},), got {getattr(y, 'dtype', type(y))} "
                         f"{tuple(getattr(y, 'shape', ()))}")
