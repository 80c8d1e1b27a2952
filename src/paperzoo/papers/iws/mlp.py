"""Many small MLPs trained as one batched computation: the bootstrap ensemble of the expert model and the end models.

Every member has its own weights, stacked on a leading member axis: layer l holds ``W_l (members, in, out)`` and
``b_l (members, out)``. A forward pass is one GEMM for the first layer (all members read the same inputs) and one
``bmm`` per further layer; a training step is one hand-written backward pass (a few ``bmm``, no autograd graph)
and one fused Adam update of a single (members, parameters) tensor for all members.

Training follows the official ``torchmodels.py`` member by member: full-batch Adam (L2 weight decay inside the
gradient, as ``torch.optim.Adam``), up to ``epochs`` epochs, and its early stopping: a counter of epochs whose loss
is not at least ``tol`` below the reference loss; a member stops (before its step) once the counter exceeds
``patience - 1``. The official reference is the *first* epoch's loss (``lastloss`` is set once and never updated);
``early_stop_against="previous"`` compares with the previous epoch instead. Each member stops on its own (a mask);
stopped members keep their weights while the others train on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class MLPConfig:
    """``hidden`` sizes (ReLU between), Adam ``lr`` / ``weight_decay``, ``epochs`` cap and early stopping."""

    hidden: tuple[int, ...] = (10, 10)
    lr: float = 1e-3
    weight_decay: float = 1e-4
    epochs: int = 200
    patience: int = 10  # the official `tolcount > 9`
    tol: float = 1e-4
    early_stop_against: str = "first"  # the official code's reference loss; "previous" = the previous epoch

    def __post_init__(self) -> None:
        if self.early_stop_against not in ("first", "previous"):
            raise ValueError(f"early_stop_against must be 'first' or 'previous', got {self.early_stop_against!r}")
        if self.epochs < 1 or self.patience < 1:
            raise ValueError(f"epochs and patience must be >= 1, got {self.epochs}, {self.patience}")


class BatchedMLP:
    """``members`` MLPs ``in_dim -> hidden... -> out_dim`` with PyTorch's default Linear initialisation each.

    ``out_dim == 1``: a sigmoid output trained with binary cross-entropy (soft targets allowed); ``out_dim > 1``: a
    softmax output trained with cross-entropy against target distributions.
    """

    def __init__(self, members: int, in_dim: int, out_dim: int, config: MLPConfig, generator: torch.Generator):
        if members < 1 or in_dim < 1 or out_dim < 1:
            raise ValueError(f"BatchedMLP needs members, in_dim, out_dim >= 1; got {members}, {in_dim}, {out_dim}")
        self.config = config
        self.members, self.in_dim, self.out_dim = members, in_dim, out_dim
        sizes = (in_dim, *config.hidden, out_dim)
        self.shapes = list(zip(sizes[:-1], sizes[1:], strict=True))  # (in, out) per layer
        # every parameter of a member lives in one row of `flat` (members, P): one Adam update, one mask
        self.flat = torch.empty(members, sum(a * b + b for a, b in self.shapes))
        for (a, _), w, b in zip(self.shapes, self.weights, self.biases, strict=True):
            bound = 1.0 / math.sqrt(a)  # nn.Linear.reset_parameters: kaiming_uniform(a=sqrt 5) -> U(-1/sqrt(in), ..)
            w.copy_((torch.rand(w.shape, generator=generator) * 2 - 1) * bound)
            b.copy_((torch.rand(b.shape, generator=generator) * 2 - 1) * bound)

    def _views(self, flat: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        ws, bs, o = [], [], 0
        for a, b in self.shapes:
            ws.append(flat[:, o:o + a * b].view(-1, a, b))
            bs.append(flat[:, o + a * b:o + a * b + b])
            o += a * b + b
        return ws, bs

    @property
    def weights(self) -> list[torch.Tensor]:
        """Layer weights (members, in, out), views of ``flat``."""
        return self._views(self.flat)[0]

    @property
    def biases(self) -> list[torch.Tensor]:
        """Layer biases (members, out), views of ``flat``."""
        return self._views(self.flat)[1]

    def logits(self, x: torch.Tensor, members: slice = slice(None), flat: torch.Tensor | None = None
               ) -> torch.Tensor:
        """(members, n, out) logits for shared inputs ``x`` (n, in) or per-member inputs (members, n, in);
        ``members`` selects a contiguous block of members, ``flat`` replaces the parameters (for autograd)."""
        return self._forward(x, (self.flat if flat is None else flat)[members])[1]

    def _forward(self, x: torch.Tensor, flat: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``(inputs of layers 1.., logits)``: the ReLU activations each later layer reads, and the output."""
        weights, biases = self._views(flat)
        w0, b0 = weights[0], biases[0]
        if x.dim() == 2:  # one GEMM for every member: (n, in) @ (in, members * out)
            n, m = x.shape[0], w0.shape[0]
            h = (x @ w0.permute(1, 0, 2).reshape(self.in_dim, -1)).view(n, m, -1).transpose(0, 1)
            h = h + b0[:, None, :]
        else:
            h = torch.baddbmm(b0[:, None, :], x, w0)
        acts = []
        for w, b in zip(weights[1:], biases[1:], strict=True):
            a = F.relu(h)
            acts.append(a)
            h = torch.baddbmm(b[:, None, :], a, w)  # (members, n, out_l)
        return acts, h

    def _backward(self, x: torch.Tensor, flat: torch.Tensor, acts: list[torch.Tensor], dz: torch.Tensor,
                  out: torch.Tensor | None = None) -> torch.Tensor:
        """d loss / d flat (members, P) by hand (no autograd graph: a handful of bmm), from dz = d loss / d logits;
        written into ``out`` when given."""
        weights, _ = self._views(flat)
        g = torch.empty_like(flat) if out is None else out
        gw, gb = self._views(g)
        d = dz  # (members, n, out_l)
        for i in range(len(weights) - 1, 0, -1):
            a = acts[i - 1]
            gw[i].copy_(torch.bmm(a.transpose(1, 2), d))  # dW_l = a_{l-1}^T d
            gb[i].copy_(d.sum(1))
            d = torch.bmm(d, weights[i].transpose(1, 2)) * (a > 0)  # back through W_l and the ReLU
        if x.dim() == 2:  # dW_0 = x^T d for all members in one GEMM
            n, m, h = x.shape[0], d.shape[0], d.shape[2]
            gw[0].copy_((x.T @ d.transpose(0, 1).reshape(n, m * h)).view(self.in_dim, m, h).transpose(0, 1))
        else:
            gw[0].copy_(torch.bmm(x.transpose(1, 2), d))
        gb[0].copy_(d.sum(1))
        return g

    def _loss_and_dz(self, z: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, norm: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss (members,), d loss / d z)`` of the weighted-mean BCE (sigmoid) or soft cross-entropy (softmax)."""
        scale = (weight / norm.clamp_min(1e-12)[:, None])  # (members, n)
        if self.out_dim == 1:
            t = target.expand(self.members, -1) if target.dim() == 1 else target
            per = F.binary_cross_entropy_with_logits(z[..., 0], t, reduction="none")
            dz = ((torch.sigmoid(z[..., 0]) - t) * scale)[..., None]  # dBCE/dz = sigmoid(z) - t
        else:
            t = target.expand(self.members, -1, -1) if target.dim() == 2 else target
            logp = F.log_softmax(z, dim=-1)
            per = -(t * logp).sum(-1)
            dz = (logp.exp() * t.sum(-1, keepdim=True) - t) * scale[..., None]  # dCE/dz = p sum(t) - t
        return (per * scale).sum(1), dz

    @torch.no_grad()
    def predict(self, x: torch.Tensor, members: slice = slice(None), chunk: int = 8192) -> torch.Tensor:
        """(members, n) probabilities (``out_dim == 1``) or (members, n, out) distributions, in chunks of rows."""
        outs = [self._prob(self.logits(x[..., i:i + chunk, :], members)) for i in range(0, x.shape[-2], chunk)]
        return torch.cat(outs, dim=1)

    def _prob(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(z[..., 0]) if self.out_dim == 1 else torch.softmax(z, dim=-1)

    def member_losses(self, x: torch.Tensor, target: torch.Tensor, weight: torch.Tensor,
                      norm: torch.Tensor | None = None, flat: torch.Tensor | None = None) -> torch.Tensor:
        """(members,) loss_m = sum_i weight[m, i] * l(m, i) / norm[m] (default norm: sum_i weight[m, i]).

        ``target``: (n,) or (members, n) probabilities for ``out_dim == 1``; (n, out) or (members, n, out)
        distributions otherwise. ``weight``: (members, n) (bootstrap counts x sample weights, or a row mask).
        """
        norm = weight.sum(1) if norm is None else norm
        z = self.logits(x, flat=flat)
        if self.out_dim == 1:
            t = target.expand(self.members, -1) if target.dim() == 1 else target
            per = F.binary_cross_entropy_with_logits(z[..., 0], t, reduction="none")  # (members, n)
        else:
            t = target.expand(self.members, -1, -1) if target.dim() == 2 else target
            per = -(t * F.log_softmax(z, dim=-1)).sum(-1)
        return (per * weight).sum(1) / norm.clamp_min(1e-12)

    @torch.no_grad()
    def fit(self, x: torch.Tensor, target: torch.Tensor, weight: torch.Tensor,
            norm: torch.Tensor | None = None) -> torch.Tensor:
        """Train every member full-batch with its own early stopping; returns (members,) epochs trained (steps).

        The loss of member m is sum_i weight[m, i] l(m, i) / norm[m] (see :meth:`member_losses`). Members whose
        weights are all zero have nothing to learn and are not trained.
        """
        c = self.config
        _check_fit(self, x, target, weight)
        p = self.flat.clone()  # (members, P)
        g = torch.zeros_like(p)
        p.grad = g
        # torch's Adam, fused into one kernel over the single (members, P) tensor: g + lambda theta (L2 weight
        # decay), m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, theta -= lr m_hat / (sqrt(v_hat) + eps)
        opt = torch.optim.Adam([p], lr=c.lr, weight_decay=c.weight_decay, fused=True)
        norm = weight.sum(1) if norm is None else norm
        active = weight.sum(1) > 0
        stopped = ~active
        kept = p.clone()  # the weights of stopped members, restored after every step
        steps = torch.zeros(self.members, dtype=torch.int64)
        count = torch.zeros(self.members, dtype=torch.int64)
        ref: torch.Tensor | None = None
        for _ in range(c.epochs):
            acts, z = self._forward(x, p)
            loss, dz = self._loss_and_dz(z, target, weight, norm)  # (members,)
            if ref is None:
                ref = loss.clone()
            else:
                improved = (ref - loss) >= c.tol
                count = torch.where(improved, torch.zeros_like(count), count + 1)
                newly = active & (count > c.patience - 1)  # official: `if tolcount > 9: break` before the step
                if bool(newly.any()):
                    kept[newly] = p[newly]
                    active &= ~newly
                    stopped |= newly
                if c.early_stop_against == "previous":
                    ref = loss.clone()
            if not bool(active.any()):
                break
            self._backward(x, p, acts, dz, out=g)
            opt.step()
            if bool(stopped.any()):  # stopped members keep their weights
                p[stopped] = kept[stopped]
            steps += active.to(torch.int64)
        p.grad = None
        self.flat = p
        return steps

    def state(self) -> dict[str, torch.Tensor]:
        return {"flat": self.flat}

    def load(self, state: dict[str, torch.Tensor]) -> None:
        if state["flat"].shape != self.flat.shape:
            raise ValueError(f"saved parameters have shape {tuple(state['flat'].shape)}, expected "
                             f"{tuple(self.flat.shape)} ({self.members} members {self.in_dim} -> "
                             f"{self.config.hidden} -> {self.out_dim})")
        self.flat = state["flat"].clone()


def _check_fit(m: BatchedMLP, x: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> None:
    if x.dim() != 2 or x.shape[1] != m.in_dim:
        raise ValueError(f"x must have shape (n, {m.in_dim}), got {tuple(x.shape)}")
    n = x.shape[0]
    if weight.shape != (m.members, n):
        raise ValueError(f"weight must have shape ({m.members}, {n}), got {tuple(weight.shape)}")
    ok = ((n,), (m.members, n)) if m.out_dim == 1 else ((n, m.out_dim), (m.members, n, m.out_dim))
    if tuple(target.shape) not in ok:
        raise ValueError(f"target must have shape {ok[0]} or {ok[1]}, got {tuple(target.shape)}")
