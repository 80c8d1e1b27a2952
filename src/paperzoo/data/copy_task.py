"""The copy task: random token windows in which some tokens are replaced by a copy of their left neighbour.

A test of whether a replaced-token detector reads context: every id is equally likely everywhere and a copy has the
same id distribution as an original, so no context-free scorer beats AUC 0.5; a detector that compares each token
with the previous one reaches 1. Deterministic from ``seed``.
"""

from __future__ import annotations

import torch

__all__ = ["copy_task"]


def copy_task(n: int, seq_len: int, vocab_size: int, rate: float = 0.15, seed: int = 0, first_id: int = 5,
              cls_id: int = 2, sep_id: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` windows ``[CLS] x_1 .. x_{seq_len-2} [SEP]``; returns ``(input_ids, attention_mask, labels)``, each
    ``(n, seq_len)`` (int64, int64 of ones, bool).

    The originals are uniform over ``[first_id, vocab_size)`` with no two equal neighbours (each is the previous
    plus a uniform offset in ``1 .. V'-1`` modulo ``V' = vocab_size - first_id``, so every id is uniform). Each
    ``x_t``, ``t >= 2``, becomes a copy of ``x_{t-1}`` with probability ``rate`` (after earlier copies, so a run of
    copies repeats one token); ``labels`` = 1 where ``x_t == x_{t-1}``: at the copies, and at the rare original
    that equals a copy before it (probability ``1 / (V' - 1)``), which no detector could tell apart.
    """
    _check(n, seq_len, vocab_size, rate, first_id)
    g = torch.Generator().manual_seed(seed)
    body, v = seq_len - 2, vocab_size - first_id
    offsets = torch.randint(1, v, (n, body), generator=g)  # x_t - x_{t-1} mod V', never 0
    x = first_id + (torch.randint(0, v, (n, 1), generator=g) + offsets.cumsum(1)) % v  # (n, body)
    copy = torch.rand(n, body, generator=g) < rate
    copy[:, 0] = False
    # x_t <- the last original at or before t: its index is the running max of the originals' indices
    src = torch.where(copy, 0, torch.arange(body).expand(n, body)).cummax(1).values
    x = x.gather(1, src)
    same = torch.cat([torch.zeros(n, 1, dtype=torch.bool), x[:, 1:] == x[:, :-1]], 1)  # x_t == x_{t-1}
    ids = torch.cat([torch.full((n, 1), cls_id), x, torch.full((n, 1), sep_id)], 1)
    labels = torch.cat([torch.zeros(n, 1, dtype=torch.bool), same, torch.zeros(n, 1, dtype=torch.bool)], 1)
    return ids, torch.ones_like(ids), labels


def _check(n, seq_len, vocab_size, rate, first_id) -> None:
    if not (isinstance(n, int) and n >= 1 and isinstance(seq_len, int) and seq_len >= 4):
        raise ValueError(f"copy_task: n must be an int >= 1 and seq_len an int >= 4, got {n!r} and {seq_len!r}")
    if not (isinstance(vocab_size, int) and vocab_size >= first_id + 3):
        raise ValueError(f"copy_task: vocab_size must be an int >= first_id + 3 = {first_id + 3}, got {vocab_size!r}")
    if not 0.0 < rate < 1.0:
        raise ValueError(f"copy_task: rate must be in (0, 1), got {rate!r}")
