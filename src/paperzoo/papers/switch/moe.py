"""Switch-style mixture of experts: router, capacity, dispatch/combine, auxiliary losses, expert parallelism.

Fedus, Zoph & Shazeer, "Switch Transformers" (arXiv 2101.03961). Notation: T tokens, E experts, D model
width, F expert hidden width, C expert capacity.

* Router (eq. 1): ``p(x) = softmax(W_r x)`` with ``W_r`` (E, D), no bias, computed in float32 with autocast off
  ("selective precision", sec. 2.4); in training the router *input* is multiplied by U(1 - eps, 1 + eps) jitter.
* Top-1 (Switch) or top-k (classic MoE, gates renormalised over the k choices as in GShard).
* Capacity (eq. 3): ``C = max(min_capacity, floor(capacity_factor * k * T / E))`` with a train and an eval factor,
  per routing group (the flattened batch by default; each sequence with ``route_per_sequence``, as HF does).
  Tokens beyond an expert's capacity are dropped by position priority (earlier tokens of the flattened batch win;
  with k > 1 every first choice ranks before every second choice). A dropped token's MoE output is exactly zero,
  so it only passes through the residual connection. The expert output is scaled by the gate ``p_i(x)``.
* Load balancing (eqs. 4-6): ``E * sum_i f_i P_i`` with ``f_i`` the fraction of tokens whose top-1 choice is
  expert i (before capacity) and ``P_i`` the mean router probability; 1.0 under uniform routing. The 0.01
  coefficient is the caller's. Router z-loss (ST-MoE, arXiv 2202.08906, eq. 5): mean over tokens of
  ``logsumexp(logits)^2`` on the raw logits. Padding tokens (``mask == 0``) take no capacity, get zero output and
  are left out of both losses and of the metrics.
* Dispatch is vectorised: positions in each expert come from a cumulative sum over the one-hot choices, tokens are
  gathered into an (E, C, D) buffer, experts run as batched matmuls with stacked weights (E, D, F), (E, F, D), and
  outputs are gathered back; dispatch and combine are inverse gathers, so backward needs no scatter-add either.
  Memory is O(T * (E + D)), no (T, E, C) dispatch tensor.
* Expert parallelism: with ``group`` set, each of the W ranks owns E / W experts; each rank routes its own tokens
  with capacity computed from its own token count (the paper's per-core capacity) and exchanges the capacity
  buffers with ``all_to_all`` (forward and backward). Every rank must hold the same number of tokens.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange, reduce, repeat

from paperzoo.train.distributed import all_to_all

BALANCE_COEF = 1e-2  # the paper's alpha (sec. 2.2)
Z_LOSS_COEF = 1e-3  # ST-MoE's router z-loss coefficient

_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


class MoEOutput(NamedTuple):
    """``hidden_states`` (same shape as the input) and ``aux``: a dict of scalar losses and metrics.

    ``aux`` keys: ``balance_loss``, ``z_loss`` (scalars, float32, differentiable), ``fraction_dropped`` (scalar),
    ``expert_load`` (E,) fraction of real tokens whose top-1 choice is each expert, ``expert_count`` (E,) tokens
    each expert processed, ``capacity`` (int scalar). Unpacks as ``(hidden_states, aux)``.
    """

    hidden_states: torch.Tensor
    aux: dict[str, torch.Tensor]


def expert_capacity(tokens: int, num_experts: int, capacity_factor: float, k: int = 1, min_capacity: int = 4) -> int:
    """Eq. 3: ``max(min_capacity, floor(capacity_factor * k * tokens / num_experts))``."""
    return max(min_capacity, math.floor(capacity_factor * k * tokens / num_experts))


def balance_loss(probs: torch.Tensor, top1: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 4: ``E * sum_i f_i P_i``. probs (T, E) float, top1 (T,) long, valid (T,) bool or None."""
    num_experts = probs.shape[-1]
    w = torch.ones_like(probs[:, 0]) if valid is None else valid.to(probs.dtype)
    n = w.sum().clamp_min(1.0)
    f = torch.zeros(num_experts, dtype=probs.dtype, device=probs.device).index_add_(0, top1, w) / n
    p = (probs * w[:, None]).sum(0) / n
    return num_experts * (f * p).sum()


def router_z_loss(logits: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Router z-loss on raw logits (T, E): mean over (valid) tokens of ``logsumexp(logits)^2``."""
    z = torch.logsumexp(logits.float(), dim=-1).square()
    if valid is None:
        return z.mean()
    w = valid.to(z.dtype)
    return (z * w).sum() / w.sum().clamp_min(1.0)


class Router(nn.Module):
    """Linear router without bias, always float32. Input (T, D) -> logits (T, E) float32."""

    def __init__(self, dim: int, num_experts: int, jitter_eps: float = 0.01, init_scale: float = 0.1):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, dim, dtype=torch.float32))
        self.jitter_eps = jitter_eps
        self.init_scale = init_scale
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = math.sqrt(self.init_scale / self.weight.shape[1])
        nn.init.trunc_normal_(self.weight, std=std, a=-2 * std, b=2 * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = x.float()
            if self.training and self.jitter_eps > 0:
                x = x * torch.empty_like(x).uniform_(1.0 - self.jitter_eps, 1.0 + self.jitter_eps)
            return F.linear(x, self.weight.float())


class _RowGather(torch.autograd.Function):
    """``out[j] = src[index[j]]`` for an injective ``index`` into ``src`` (entries ``len(src)`` mean "none" and give
    an arbitrary row, to be masked by the caller). The adjoint is the gather with the inverse map, zeroed where
    ``grad_mask`` (float, (len(src), 1)) is 0. Dispatch and combine are mutually inverse, so both directions of both
    are gathers: no scatter-add (slow on CPU, atomic on GPU) in forward or backward."""

    @staticmethod
    def forward(ctx, src, index, inverse, grad_mask):  # type: ignore[override]
        ctx.save_for_backward(inverse, grad_mask)
        return src.index_select(0, index.clamp(max=src.shape[0] - 1))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        inverse, grad_mask = ctx.saved_tensors
        return grad.index_select(0, inverse.clamp(max=grad.shape[0] - 1)).mul_(grad_mask), None, None, None


def _cast(w: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Weights in the activations' dtype when autocast is off (under autocast, bmm casts both)."""
    return w if torch.is_autocast_enabled(h.device.type) or w.dtype == h.dtype else w.to(h.dtype)


class SwitchMoE(nn.Module):
    """Mixture-of-experts FFN with Switch (k=1) or top-k routing.

    Args:
        dim, hidden: D and F; each expert is ``w2 @ act(w1 @ x)`` (T5/Switch style, optional biases).
        num_experts: E (global; with ``group`` each rank holds E / world of them).
        k: experts per token (1 = Switch).
        capacity_factor, eval_capacity_factor: eq. 3 factors in training / eval (1.25 / 2.0).
        min_capacity: lower bound on C. ``capacity``: a fixed C overriding eq. 3 (HF-style), or None.
        jitter_eps: router input jitter (training only). expert_dropout: dropout on the expert hidden layer.
        init_scale: s in the truncated normal init with std sqrt(s / fan_in) (paper: 0.1).
        route_per_sequence: each sequence of a (batch, seq, D) input is its own routing group with its own
            capacity (HF's choice); default False: the whole flattened batch is one group.
        trim_capacity: run the experts on a buffer as long as the fullest expert's kept tokens instead of the
            full capacity (identical results, less compute; one host sync, so data-dependent shapes). Ignored
            under expert parallelism, whose all-to-all needs the static capacity on every rank.
        group: a ``torch.distributed`` process group (or ``"world"``) for expert parallelism, or None.

    Input (batch, seq, D) or (tokens, D), optional mask (batch, seq) / (tokens,) with 1 for real tokens.
    Returns :class:`MoEOutput` ``(hidden_states, aux)``.
    """

    accepts_token_mask = True  # TransformerBlock passes its key-padding mask as ``mask``

    def __init__(self, dim: int, hidden: int, num_experts: int, k: int = 1, capacity_factor: float = 1.25,
                 eval_capacity_factor: float = 2.0, min_capacity: int = 4, capacity: int | None = None,
                 jitter_eps: float = 0.01, expert_dropout: float = 0.0, activation: str = "relu",
                 bias: bool = False, init_scale: float = 0.1, route_per_sequence: bool = False,
                 trim_capacity: bool = True, group=None):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        if not 1 <= k <= num_experts:
            raise ValueError(f"k must be in [1, num_experts={num_experts}], got {k}")
        self.dim, self.hidden, self.num_experts, self.k = dim, hidden, num_experts, k
        self.capacity_factor, self.eval_capacity_factor = capacity_factor, eval_capacity_factor
        self.min_capacity, self.capacity = min_capacity, capacity
        self.expert_dropout, self.activation, self.init_scale = expert_dropout, activation, init_scale
        self.route_per_sequence, self.trim_capacity = route_per_sequence, trim_capacity
        self.group = dist.group.WORLD if group == "world" else group
        world = dist.get_world_size(self.group) if self.group is not None else 1
        if num_experts % world:
            raise ValueError(f"num_experts ({num_experts}) must be divisible by the expert-parallel world size {world}")
        self.world = world
        self.rank = dist.get_rank(self.group) if self.group is not None else 0
        n_local = num_experts // world
        self.router = Router(dim, num_experts, jitter_eps, init_scale)
        self.w1 = nn.Parameter(torch.empty(n_local, dim, hidden))
        self.w2 = nn.Parameter(torch.empty(n_local, hidden, dim))
        self.b1 = nn.Parameter(torch.zeros(n_local, 1, hidden)) if bias else None
        self.b2 = nn.Parameter(torch.zeros(n_local, 1, dim)) if bias else None
        self.reset_parameters()

    @property
    def num_local_experts(self) -> int:
        return self.w1.shape[0]

    def reset_parameters(self) -> None:
        self.router.reset_parameters()
        for w, fan_in in ((self.w1, self.dim), (self.w2, self.hidden)):
            std = math.sqrt(self.init_scale / fan_in)
            nn.init.trunc_normal_(w, std=std, a=-2 * std, b=2 * std)
        for b in (self.b1, self.b2):
            if b is not None:
                nn.init.zeros_(b)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, hidden={self.hidden}, num_experts={self.num_experts}, k={self.k}, "
                f"local_experts={self.num_local_experts}, capacity_factor={self.capacity_factor}/"
                f"{self.eval_capacity_factor}")

    def current_capacity(self, tokens: int) -> int:
        """C for ``tokens`` tokens in the current mode (train or eval factor)."""
        if self.capacity is not None:
            return self.capacity
        cf = self.capacity_factor if self.training else self.eval_capacity_factor
        return expert_capacity(tokens, self.num_experts, cf, self.k, self.min_capacity)

    def experts(self, h: torch.Tensor) -> torch.Tensor:
        """The local experts as batched matmuls: (E_local, n, D) -> (E_local, n, D)."""
        h = torch.bmm(h, _cast(self.w1, h))
        if self.b1 is not None:
            h = h + self.b1
        h = _ACTIVATIONS[self.activation](h)
        if self.training and self.expert_dropout > 0:
            h = F.dropout(h, self.expert_dropout, True)
        h = torch.bmm(h, _cast(self.w2, h))
        if self.b2 is not None:
            h = h + self.b2
        return h

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None) -> MoEOutput:
        """``hidden_states`` (batch, seq, D) or (tokens, D) (HF's argument name), ``mask`` 1 = real token."""
        x = hidden_states
        if x.dim() not in (2, 3) or x.shape[-1] != self.dim:
            raise ValueError(f"x must be (batch, seq, {self.dim}) or (tokens, {self.dim}), got {tuple(x.shape)}")
        if not x.is_floating_point():
            raise ValueError(f"x must be a floating tensor, got {x.dtype}")
        if mask is not None and tuple(mask.shape) != tuple(x.shape[:-1]):
            raise ValueError(f"mask must have shape {tuple(x.shape[:-1])} (1 = real token), got {tuple(mask.shape)}")
        if x.numel() == 0:
            raise ValueError(f"x must hold at least one token, got shape {tuple(x.shape)}")
        shape = x.shape
        xt = x.reshape(-1, self.dim)
        T, E, k = xt.shape[0], self.num_experts, self.k
        valid = None if mask is None else mask.reshape(-1).bool()

        logits = self.router(xt)  # (T, E) float32
        probs = logits.softmax(dim=-1)
        if k == 1:
            gate, idx = probs.max(dim=-1, keepdim=True)  # (T, 1)
        else:
            gate, idx = probs.topk(k, dim=-1)
            gate = gate / gate.sum(-1, keepdim=True)

        # Position of each (group, choice, token) assignment in its expert; choice-major inside a group, so
        # every first choice wins over any second choice; each group has its own capacity C.
        G = shape[0] if self.route_per_sequence and x.dim() == 3 else 1
        C = self.current_capacity(T // G)
        idx_f = rearrange(idx, "(g t) k -> g (k t)", g=G)
        onehot = F.one_hot(idx_f, E).to(torch.int32)  # (G, kTg, E)
        if valid is not None:
            valid_f = rearrange(valid, "(g t) -> g t", g=G).repeat(1, k)
            onehot = onehot * valid_f.to(torch.int32)[..., None]
        pos = onehot.cumsum(1).gather(2, idx_f[..., None]).squeeze(2) - 1  # (G, kTg) 0-based rank in the expert
        keep = pos < C if valid is None else (pos < C) & valid_f
        if self.trim_capacity and self.group is None:
            # Same kept tokens, packed per expert across groups into a buffer only as long as the fullest expert
            # (one host sync): the experts skip the empty capacity slots.
            kept = onehot * keep.to(torch.int32)[..., None]
            if G > 1:
                kept = kept.reshape(1, -1, E)
                pos = kept.cumsum(1).gather(2, idx_f.reshape(1, -1, 1)).squeeze(2).reshape(G, -1) - 1
            R = max(1, int(kept.sum((0, 1)).max()))  # rows per expert
            slot_of = idx_f * R + pos
        else:
            R = G * C
            slot_of = idx_f * R + torch.arange(G, device=x.device)[:, None] * C + pos
        S = E * R  # slots; index S means "no slot" (dropped or padding) / "no token" (empty slot)
        slot = torch.where(keep, slot_of, S).reshape(-1)  # (A,) per assignment
        A = slot.shape[0]
        inverse = torch.full((S + 1,), A, dtype=slot.dtype, device=x.device)
        inverse[slot] = torch.arange(A, device=x.device)  # only the discarded row S sees duplicates
        inverse = inverse[:S]

        # Dispatch: (A = G k Tg, D) -> (S, D) as a gather; each real slot holds at most one token. Empty slots
        # hold a copy of some token: the experts compute on it, the combine never reads it, its gradient is zero.
        src = xt if k == 1 else repeat(xt, "(g t) d -> (g k t) d", g=G, k=k)
        keep_f = keep.reshape(-1, 1).to(x.dtype)
        buf = rearrange(_RowGather.apply(src, inverse, slot, keep_f), "(e c) d -> e c d", e=E)  # (E, R, D)
        if self.group is None:
            out = self.experts(buf)
        else:
            W = self.world
            recv = all_to_all(rearrange(buf, "(w e) c d -> (w e c) d", w=W), self.group)
            h = rearrange(recv, "(w e c) d -> e (w c) d", w=W, c=R)
            h = self.experts(h)
            out = all_to_all(rearrange(h, "e (w c) d -> (w e c) d", w=W), self.group)
        out = out.reshape(S, self.dim)

        # Combine: gather each assignment's expert output and scale it by gate * keep (exactly zero when dropped).
        g = rearrange(gate, "(g t) k -> (g k t) 1", g=G).to(out.dtype) * keep_f.to(out.dtype)
        y = _RowGather.apply(out, slot, inverse, (inverse < A).to(out.dtype)[:, None]) * g
        if k > 1:
            y = reduce(y, "(g k t) d -> (g t) d", "sum", g=G, k=k)
        keep = keep.reshape(-1)
        idx_f = idx_f.reshape(-1)

        with torch.no_grad():
            w = torch.ones(T, device=x.device) if valid is None else valid.float()
            n_valid = w.sum().clamp_min(1.0)
            load = torch.zeros(E, device=x.device).index_add_(0, idx[:, 0], w) / n_valid
            count = torch.zeros(E + 1, device=x.device).index_add_(
                0, torch.where(keep, idx_f, E), torch.ones_like(idx_f, dtype=torch.float))[:E]
            dropped = 1.0 - keep.float().sum() / (n_valid * k)
        aux = {
            "balance_loss": balance_loss(probs, idx[:, 0], valid),
            "z_loss": router_z_loss(logits, valid),
            "fraction_dropped": dropped,
            "expert_load": load,
            "expert_count": count,
            "capacity": torch.tensor(C),
        }
        return MoEOutput(y.reshape(shape).to(x.dtype), aux)
