"""Switch-style mixture of experts: router, capacity, dispatch/combine, auxiliary losses, expert parallelism.

Fedus, Zoph & Shazeer, "Switch Transformers" (arXiv 2101.03961). Notation: T tokens, E experts, D model
width, F expert hidden width, C expert capacity, k experts per token, A = k * T assignments.

:meth:`SwitchMoE.forward` reads in the paper's steps:

1. **Route** (eqs. 1-2): ``p(x) = softmax(W_r x)`` with ``W_r`` (E, D), no bias, computed in float32 with
   autocast off ("selective precision", sec. 2.4); in training the router *input* is multiplied by
   U(1 - eps, 1 + eps) jitter. Top-1 (Switch) or top-k (classic MoE, gates renormalised over the k choices as in
   GShard).
2. **Assign slots** (eq. 3): ``C = max(min_capacity, floor(capacity_factor * k * T / E))`` with a train and an
   eval factor, per routing group (the flattened batch by default; each sequence with ``route_per_sequence``, as
   HF does). Tokens beyond an expert's capacity are dropped by position priority (earlier tokens of the flattened
   batch win; with k > 1 every first choice ranks before every second choice).
3. **Dispatch, experts, combine** (eq. 2): tokens are gathered into an (E, C, D) buffer, experts run as batched
   matmuls with stacked weights (E, D, F), (E, F, D), and outputs are gathered back, scaled by the gate
   ``p_i(x)``. A dropped token's MoE output is exactly zero, so it only passes through the residual connection.
   Dispatch and combine are inverse gathers, so backward needs no scatter-add either. Memory is O(T * (E + D)),
   no (T, E, C) dispatch tensor.
4. **Auxiliary losses** (eqs. 4-6): load balancing ``E * sum_i f_i P_i`` with ``f_i`` the fraction of tokens whose
   top-1 choice is expert i (before capacity) and ``P_i`` the mean router probability; 1.0 under uniform routing.
   The 0.01 coefficient is the caller's. Router z-loss (ST-MoE, arXiv 2202.08906, eq. 5): mean over tokens of
   ``logsumexp(logits)^2`` on the raw logits. Padding tokens (``mask == 0``) take no capacity, get zero output and
   are left out of both losses and of the metrics.

Expert parallelism: with ``group`` set, each of the W ranks owns E / W experts; each rank routes its own tokens
with capacity computed from its own token count (the paper's per-core capacity) and exchanges the capacity buffers
with ``all_to_all`` (forward and backward). Every rank must hold the same number of tokens. The auxiliary losses and
metrics are computed from statistics summed over the group (a differentiable all-reduce), so every rank gets the
values of the concatenated batch: the balancing loss is a product of two means, not a mean of per-token terms, and
the mean of the ranks' own balancing losses would be a different objective. The expert weights are marked
expert-sharded for the :class:`~paperzoo.train.Trainer` (kept out of DDP); a plain DDP wrap raises at the forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange, reduce, repeat

from paperzoo.train.distributed import all_reduce, all_to_all, check_not_replicated_by_ddp, mark_expert_parallel

BALANCE_COEF = 1e-2  # the paper's alpha (sec. 2.2)
Z_LOSS_COEF = 1e-3  # ST-MoE's router z-loss coefficient

_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
}


@dataclass(frozen=True)
class SwitchMoEConfig:
    """One mixture-of-experts FFN layer.

    ``dim``, ``ffn_dim``: D and F; each expert is ``w2 @ act(w1 @ x)`` (T5/Switch style, optional biases).
    ``num_experts``: E (global; under expert parallelism each rank holds E / world of them). ``k``: experts per
    token (1 = Switch). ``capacity_factor``, ``eval_capacity_factor``: eq. 3 factors in training / eval (1.25 /
    2.0). ``min_capacity``: lower bound on C. ``capacity``: a fixed C overriding eq. 3 (HF-style), or None.
    ``jitter_eps``: router input jitter (training only). ``expert_dropout``: dropout on the expert hidden layer.
    ``init_scale``: s in the truncated normal init with std sqrt(s / fan_in) (paper: 0.1).
    ``route_per_sequence``: each sequence of a (batch, seq, D) input is its own routing group with its own capacity
    (HF's choice); default False: the whole flattened batch is one group.
    ``trim_capacity``: run the experts on a buffer as long as the fullest expert's kept tokens instead of the full
    capacity (identical results, less compute; one host sync, so data-dependent shapes). Ignored under expert
    parallelism, whose all-to-all needs the static capacity on every rank.
    """

    dim: int = 256
    ffn_dim: int = 1024
    num_experts: int = 8
    k: int = 1
    capacity_factor: float = 1.25
    eval_capacity_factor: float = 2.0
    min_capacity: int = 4
    capacity: int | None = None
    jitter_eps: float = 0.01
    expert_dropout: float = 0.0
    activation: str = "relu"
    bias: bool = False
    init_scale: float = 0.1
    route_per_sequence: bool = False
    trim_capacity: bool = True

    def __post_init__(self) -> None:
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> SwitchMoEConfig:
        """``tiny`` (tests) or ``base`` (one Switch-Base layer, paper Table 9); keyword overrides on top."""
        if name not in MOE_PRESETS:
            raise ValueError(f"preset must be one of {sorted(MOE_PRESETS)}, got {name!r}")
        return cls(**{**MOE_PRESETS[name], **overrides})


MOE_PRESETS = {
    "tiny": dict(dim=16, ffn_dim=32, num_experts=4),
    "base": dict(dim=768, ffn_dim=3072, num_experts=128),
}


class MoEOutput(NamedTuple):
    """``hidden_states`` (same shape as the input) and ``aux``: a dict of scalar losses and metrics.

    ``aux`` keys: ``balance_loss``, ``z_loss`` (scalars, float32, differentiable), ``fraction_dropped`` (scalar),
    ``expert_load`` (E,) fraction of real tokens whose top-1 choice is each expert, ``expert_count`` (E,) tokens
    each expert processed, ``capacity`` (int scalar). Unpacks as ``(hidden_states, aux)``.
    """

    hidden_states: torch.Tensor
    aux: dict[str, torch.Tensor]


class Slots(NamedTuple):
    """Where step 2 put each of the A assignments (group, choice, token) in the (E * R, D) expert buffer.

    ``slot`` (A,): the buffer row of each assignment, ``E * R`` for "none" (dropped or padding); ``inverse``
    (E * R,): the assignment in each row, A for "empty"; ``keep`` (G, k * Tg) bool; ``expert`` (G, k * Tg) the
    chosen expert; ``capacity``: C per group; ``rows``: R rows per expert in the buffer.
    """

    slot: torch.Tensor
    inverse: torch.Tensor
    keep: torch.Tensor
    expert: torch.Tensor
    capacity: int
    rows: int


class SwitchMoE(nn.Module):
    """Mixture-of-experts FFN with Switch (k=1) or top-k routing; see :class:`SwitchMoEConfig`.

    ``group``: a ``torch.distributed`` process group (or ``"world"``) for expert parallelism, or None. It is a
    runtime resource like a device, not part of the config.

    Input (batch, seq, D) or (tokens, D), optional mask (batch, seq) / (tokens,) with 1 for real tokens.
    Returns :class:`MoEOutput` ``(hidden_states, aux)``.
    """

    config_class = SwitchMoEConfig
    accepts_token_mask = True  # TransformerBlock passes its key-padding mask as ``mask``

    def __init__(self, config: SwitchMoEConfig, *, group=None):
        super().__init__()
        self.config = c = config
        self.group = dist.group.WORLD if group == "world" else group
        self.world = dist.get_world_size(self.group) if self.group is not None else 1
        self.rank = dist.get_rank(self.group) if self.group is not None else 0
        _check_world(c.num_experts, self.world)
        n_local = c.num_experts // self.world
        self.router = Router(c.dim, c.num_experts, c.jitter_eps, c.init_scale)
        self.w1 = nn.Parameter(torch.empty(n_local, c.dim, c.ffn_dim))
        self.w2 = nn.Parameter(torch.empty(n_local, c.ffn_dim, c.dim))
        self.b1 = nn.Parameter(torch.zeros(n_local, 1, c.ffn_dim)) if c.bias else None
        self.b2 = nn.Parameter(torch.zeros(n_local, 1, c.dim)) if c.bias else None
        self.reset_parameters()
        if self.group is not None:
            mark_expert_parallel(self.expert_parameters(), dist.get_process_group_ranks(self.group))

    @classmethod
    def example_inputs(cls, config: SwitchMoEConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return {"hidden_states": torch.randn(batch, 8, config.dim)}

    @property
    def num_local_experts(self) -> int:
        return self.w1.shape[0]

    def expert_parameters(self) -> list[nn.Parameter]:
        """The stacked expert weights (and biases), experts along dim 0: sharded over the ranks under expert
        parallelism."""
        return [p for p in (self.w1, self.w2, self.b1, self.b2) if p is not None]

    def reset_parameters(self) -> None:
        """Truncated normal init. Under expert parallelism each rank draws all E experts and keeps its own E / W, so
        the same seed gives the single-process layer's weights and leaves the RNG where it would (one full weight
        tensor of transient memory)."""
        self.router.reset_parameters()
        n = self.num_local_experts
        for w, fan_in in ((self.w1, self.config.dim), (self.w2, self.config.ffn_dim)):
            std = math.sqrt(self.config.init_scale / fan_in)
            full = w if self.world == 1 else w.new_empty(self.config.num_experts, *w.shape[1:])
            nn.init.trunc_normal_(full, std=std, a=-2 * std, b=2 * std)
            if full is not w:
                with torch.no_grad():
                    w.copy_(full[self.rank * n:(self.rank + 1) * n])
        for b in (self.b1, self.b2):
            if b is not None:
                nn.init.zeros_(b)

    def extra_repr(self) -> str:
        c = self.config
        return (f"dim={c.dim}, ffn_dim={c.ffn_dim}, num_experts={c.num_experts}, k={c.k}, "
                f"local_experts={self.num_local_experts}, capacity_factor={c.capacity_factor}/"
                f"{c.eval_capacity_factor}")

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor | None = None) -> MoEOutput:
        """``hidden_states`` (batch, seq, D) or (tokens, D) (HF's argument name), ``mask`` 1 = real token."""
        x = hidden_states
        _check_input(x, mask, self.config.dim)
        if self.world > 1:  # a one-rank group holds every expert: DDP may replicate them
            check_not_replicated_by_ddp(self.expert_parameters(), "SwitchMoE(group=...)")
        xt = x.reshape(-1, self.config.dim)  # (T, D)
        valid = None if mask is None else mask.reshape(-1).bool()  # (T,)
        groups = x.shape[0] if self.config.route_per_sequence and x.dim() == 3 else 1

        logits, probs, gate, idx = self.route(xt)  # 1. (T, E) fp32, (T, E), (T, k), (T, k)
        slots = self.assign_slots(idx, valid, groups)  # 2.
        buf = self.dispatch(xt, slots, groups)  # 3. (E, R, D)
        out = self.run_experts(buf)  # (E * R, D)
        y = self.combine(out, gate, slots, groups)  # (T, D)
        aux = self.aux_losses(logits, probs, idx, valid, slots)  # 4.
        return MoEOutput(y.reshape(x.shape).to(x.dtype), aux)

    # ---- 1. route (eqs. 1-2)
    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (T, D) -> router logits h(x) (T, E) fp32, p(x) (T, E), the chosen experts' gates and ids (T, k)."""
        logits = self.router(x)  # h(x) = W_r x, (T, E) float32
        probs = logits.softmax(dim=-1)  # eq. 1: p_i(x) = exp(h_i) / sum_j exp(h_j)
        if self.config.k == 1:
            gate, idx = probs.max(dim=-1, keepdim=True)  # eq. 2: the top-1 expert and its gate p_i(x), (T, 1)
        else:
            gate, idx = probs.topk(self.config.k, dim=-1)  # (T, k)
            gate = gate / gate.sum(-1, keepdim=True)  # GShard: the k gates renormalised to sum to 1
        return logits, probs, gate, idx

    # ---- 2. assign slots (capacity, eq. 3)
    def current_capacity(self, tokens: int) -> int:
        """C for ``tokens`` tokens in the current mode (train or eval factor)."""
        c = self.config
        if c.capacity is not None:
            return c.capacity
        cf = c.capacity_factor if self.training else c.eval_capacity_factor
        return expert_capacity(tokens, c.num_experts, cf, c.k, c.min_capacity)

    def assign_slots(self, idx: torch.Tensor, valid: torch.Tensor | None, groups: int) -> Slots:
        """Each assignment's row in the expert buffer, by position priority inside its group's capacity C.

        Choice-major inside a group, so every first choice wins over any second choice.
        """
        E, k, G, device = self.config.num_experts, self.config.k, groups, idx.device
        C = self.current_capacity(idx.shape[0] // G)  # eq. 3
        idx_f = rearrange(idx, "(g t) k -> g (k t)", g=G)  # (G, kTg)
        onehot = F.one_hot(idx_f, E).to(torch.int32)  # (G, kTg, E)
        if valid is not None:
            valid_f = rearrange(valid, "(g t) -> g t", g=G).repeat(1, k)  # (G, kTg)
            onehot = onehot * valid_f.to(torch.int32)[..., None]  # padding takes no capacity
        pos = onehot.cumsum(1).gather(2, idx_f[..., None]).squeeze(2) - 1  # (G, kTg) 0-based rank in the expert
        keep = pos < C if valid is None else (pos < C) & valid_f  # (G, kTg)
        if self.config.trim_capacity and self.group is None:
            # Same kept tokens, packed per expert across groups into a buffer only as long as the fullest expert
            # (one host sync): the experts skip the empty capacity slots.
            kept = onehot * keep.to(torch.int32)[..., None]
            if G > 1:
                kept = kept.reshape(1, -1, E)
                pos = kept.cumsum(1).gather(2, idx_f.reshape(1, -1, 1)).squeeze(2).reshape(G, -1) - 1
            # rows per expert; compiled, at least 2 (one spare empty row), which lets the inductor prove the
            # data-dependent length is not a broadcastable 1
            R = max(2 if torch.compiler.is_compiling() else 1, int(kept.sum((0, 1)).max()))
            slot_of = idx_f * R + pos
        else:
            R = G * C
            slot_of = idx_f * R + torch.arange(G, device=device)[:, None] * C + pos
        S = E * R  # slots; index S means "no slot" (dropped or padding) / "no token" (empty slot)
        slot = torch.where(keep, slot_of, S).reshape(-1)  # (A,)
        A = slot.shape[0]
        inverse = torch.full((S + 1,), A, dtype=slot.dtype, device=device)
        inverse[slot] = torch.arange(A, device=device)  # only the discarded row S sees duplicates
        return Slots(slot, inverse[:S], keep, idx_f, C, R)

    # ---- 3. dispatch, experts, combine (eq. 2)
    def dispatch(self, x: torch.Tensor, slots: Slots, groups: int) -> torch.Tensor:
        """x (T, D) -> the expert buffer (E, R, D), as a gather; each real slot holds at most one token.

        Empty slots hold a copy of some token: the experts compute on it, the combine never reads it, its gradient
        is zero.
        """
        src = x if self.config.k == 1 else repeat(x, "(g t) d -> (g k t) d", g=groups, k=self.config.k)  # (A, D)
        keep = slots.keep.reshape(-1, 1).to(x.dtype)  # (A, 1)
        buf = _RowGather.apply(src, slots.inverse, slots.slot, keep)  # (E * R, D)
        return rearrange(buf, "(e c) d -> e c d", e=self.config.num_experts)

    def experts(self, h: torch.Tensor) -> torch.Tensor:
        """The local experts as batched matmuls: (E_local, n, D) -> (E_local, n, D)."""
        h = torch.bmm(h, _cast(self.w1, h))  # (E_local, n, F)
        if self.b1 is not None:
            h = h + self.b1
        h = _ACTIVATIONS[self.config.activation](h)
        if self.training and self.config.expert_dropout > 0:
            h = F.dropout(h, self.config.expert_dropout, True)
        h = torch.bmm(h, _cast(self.w2, h))  # (E_local, n, D)
        if self.b2 is not None:
            h = h + self.b2
        return h

    def run_experts(self, buf: torch.Tensor) -> torch.Tensor:
        """(E, R, D) -> (E * R, D): here, or on the ranks that own the experts (all-to-all there and back)."""
        if self.group is None:
            out = self.experts(buf)
        else:
            W, R = self.world, buf.shape[1]
            recv = all_to_all(rearrange(buf, "(w e) c d -> (w e c) d", w=W), self.group)
            h = rearrange(recv, "(w e c) d -> e (w c) d", w=W, c=R)  # (E_local, W * R, D)
            h = self.experts(h)
            out = all_to_all(rearrange(h, "e (w c) d -> (w e c) d", w=W), self.group)
        return out.reshape(-1, self.config.dim)

    def combine(self, out: torch.Tensor, gate: torch.Tensor, slots: Slots, groups: int) -> torch.Tensor:
        """Eq. 2, ``y = sum_i p_i(x) E_i(x)``: each assignment's expert output (E * R, D) -> (T, D), scaled by
        gate * keep (exactly zero when dropped)."""
        A = slots.slot.shape[0]
        g = (rearrange(gate, "(g t) k -> (g k t) 1", g=groups).to(out.dtype)
             * slots.keep.reshape(-1, 1).to(out.dtype))  # (A, 1)
        y = _RowGather.apply(out, slots.slot, slots.inverse, (slots.inverse < A).to(out.dtype)[:, None]) * g
        if self.config.k > 1:
            y = reduce(y, "(g k t) d -> (g t) d", "sum", g=groups, k=self.config.k)
        return y

    # ---- 4. auxiliary losses (eqs. 4-6) and routing metrics
    def aux_losses(self, logits: torch.Tensor, probs: torch.Tensor, idx: torch.Tensor, valid: torch.Tensor | None,
                   slots: Slots) -> dict[str, torch.Tensor]:
        """Balancing loss (eqs. 4-6) and z-loss on the router's outputs; load, count and drop metrics."""
        E, k, T, device = self.config.num_experts, self.config.k, logits.shape[0], logits.device
        keep, expert = slots.keep.reshape(-1), slots.expert.reshape(-1)  # (A,)
        if self.group is not None:
            return self._aux_over_group(logits, probs, idx, valid, slots)
        with torch.no_grad():
            w = torch.ones(T, device=device) if valid is None else valid.float()
            n_valid = w.sum().clamp_min(1.0)
            load = torch.zeros(E, device=device).index_add_(0, idx[:, 0], w) / n_valid  # f_i (eq. 5)
            count = torch.zeros(E + 1, device=device).index_add_(
                0, torch.where(keep, expert, E), torch.ones_like(expert, dtype=torch.float))[:E]
            dropped = 1.0 - keep.float().sum() / (n_valid * k)
        return {
            "balance_loss": balance_loss(probs, idx[:, 0], valid),
            "z_loss": router_z_loss(logits, valid),
            "fraction_dropped": dropped,
            "expert_load": load,
            "expert_count": count,
            "capacity": torch.tensor(slots.capacity),
        }

    def _aux_over_group(self, logits: torch.Tensor, probs: torch.Tensor, idx: torch.Tensor,
                        valid: torch.Tensor | None, slots: Slots) -> dict[str, torch.Tensor]:
        """:meth:`aux_losses` under expert parallelism: the per-expert sums behind f_i and P_i (eqs. 5-6), the
        z-loss sum and the token counts are summed over the group first (one differentiable all-reduce of 3E + 3
        numbers), so each rank gets the losses and metrics of the whole group's batch. Backward sums the ranks'
        gradients of those sums, which is the gradient of the group-wide loss."""
        E, k, T, device = self.config.num_experts, self.config.k, logits.shape[0], logits.device
        keep, expert = slots.keep.reshape(-1), slots.expert.reshape(-1)  # (A,)
        w = torch.ones(T, device=device) if valid is None else valid.float()  # (T,) 1 = real token
        with torch.no_grad():
            first = torch.zeros(E, device=device).index_add_(0, idx[:, 0], w)  # tokens whose top-1 is i
            count = torch.zeros(E + 1, device=device).index_add_(
                0, torch.where(keep, expert, E), torch.ones_like(expert, dtype=torch.float))[:E]
            counts = torch.stack([w.sum(), keep.float().sum()])  # real tokens, kept assignments
        p_sum = (probs * w[:, None]).sum(0)  # (E,) sum_x p_i(x)
        z_sum = (torch.logsumexp(logits.float(), dim=-1).square() * w).sum()[None]  # (1,)
        sums = all_reduce(torch.cat([p_sum, z_sum, first, count, counts]), self.group)
        p_sum, z_sum, first, count, counts = sums.split([E, 1, E, E, 2])
        n = counts[0].detach().clamp_min(1.0)  # real tokens of the group
        f, p = first.detach() / n, p_sum / n  # eq. 5, eq. 6
        return {
            "balance_loss": E * (f * p).sum(),  # eq. 4 (without alpha)
            "z_loss": z_sum[0] / n,
            "fraction_dropped": (1.0 - counts[1] / (n * k)).detach(),
            "expert_load": f,
            "expert_count": count.detach(),
            "capacity": torch.tensor(slots.capacity),
        }


# ----------------------------------------------------------------------------------------------------- pieces
class Router(nn.Module):
    """Linear router without bias, always float32 (eq. 1's ``h(x) = W_r x``). Input (T, D) -> logits (T, E)."""

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
        with torch.autocast(device_type=x.device.type, enabled=False):  # selective precision (sec. 2.4)
            x = x.float()
            if self.training and self.jitter_eps > 0:
                x = x * torch.empty_like(x).uniform_(1.0 - self.jitter_eps, 1.0 + self.jitter_eps)
            return F.linear(x, self.weight.float())


def expert_capacity(tokens: int, num_experts: int, capacity_factor: float, k: int = 1, min_capacity: int = 4) -> int:
    """Eq. 3: ``max(min_capacity, floor(capacity_factor * k * tokens / num_experts))``."""
    return max(min_capacity, math.floor(capacity_factor * k * tokens / num_experts))


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


def balance_loss(probs: torch.Tensor, top1: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Eqs. 4-6: ``E * sum_i f_i P_i``. probs (T, E) float, top1 (T,) long, valid (T,) bool or None."""
    num_experts = probs.shape[-1]
    w = torch.ones_like(probs[:, 0]) if valid is None else valid.to(probs.dtype)
    n = w.sum().clamp_min(1.0)
    f = torch.zeros(num_experts, dtype=probs.dtype, device=probs.device).index_add_(0, top1, w) / n  # eq. 5
    p = (probs * w[:, None]).sum(0) / n  # eq. 6
    return num_experts * (f * p).sum()  # eq. 4 (without alpha)


def router_z_loss(logits: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Router z-loss on raw logits (T, E): mean over (valid) tokens of ``logsumexp(logits)^2``."""
    z = torch.logsumexp(logits.float(), dim=-1).square()
    if valid is None:
        return z.mean()
    w = valid.to(z.dtype)
    return (z * w).sum() / w.sum().clamp_min(1.0)


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: SwitchMoEConfig) -> None:
    for name in ("dim", "ffn_dim", "num_experts", "k"):
        v = getattr(c, name)
        if type(v) is not int or v < 1:
            raise ValueError(f"SwitchMoEConfig.{name} must be a positive int, got {v!r}")
    if c.activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {c.activation!r}")
    if not 1 <= c.k <= c.num_experts:
        raise ValueError(f"k must be in [1, num_experts={c.num_experts}], got {c.k}")
    if c.capacity is not None and (type(c.capacity) is not int or c.capacity < 1):
        raise ValueError(f"SwitchMoEConfig.capacity must be None or a positive int, got {c.capacity!r}")


def _check_world(num_experts: int, world: int) -> None:
    if num_experts % world:
        raise ValueError(f"num_experts ({num_experts}) must be divisible by the expert-parallel world size {world}")


def _check_input(x: torch.Tensor, mask: torch.Tensor | None, dim: int) -> None:
    if x.dim() not in (2, 3) or x.shape[-1] != dim:
        raise ValueError(f"x must be (batch, seq, {dim}) or (tokens, {dim}), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"x must be a floating tensor, got {x.dtype}")
    if mask is not None and tuple(mask.shape) != tuple(x.shape[:-1]):
        raise ValueError(f"mask must have shape {tuple(x.shape[:-1])} (1 = real token), got {tuple(mask.shape)}")
    if x.numel() == 0:
        raise ValueError(f"x must hold at least one token, got shape {tuple(x.shape)}")
