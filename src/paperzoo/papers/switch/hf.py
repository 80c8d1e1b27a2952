"""Hugging Face interop for Switch: ``SwitchTransformersSparseMLP`` <-> :class:`SwitchMoE`, router <-> :class:`Router`.

HF keeps one ``nn.Linear`` pair per expert (``experts.expert_{i}.wi/wo``, weights (F, D) and (D, F)); we stack them
as ``w1`` (E, D, F) and ``w2`` (E, F, D). HF routes each sequence as its own group with a fixed integer
``expert_capacity``, so the converted layer uses ``route_per_sequence=True`` and ``capacity=expert_capacity`` and
reproduces HF's forward exactly in eval mode (capacity binding or not). Differences (see README.md): HF's jitter
multiplies the caller's hidden states in place (experts and residual see jittered inputs; ours jitters the router
input only), its router runs under autocast in the autocast dtype, its aux losses are computed by the full model on
router logits concatenated across layers and do not exclude padding, and its router init is N(0, 1).
"""

from __future__ import annotations

from typing import Any

import torch

from paperzoo.hf import register_converter
from paperzoo.papers.switch.moe import Router, SwitchMoE, SwitchMoEConfig

_HF_ACT_CLASS = {"ReLU": "relu", "GELUActivation": "gelu", "NewGELUActivation": "gelu_tanh", "GELUTanh": "gelu_tanh",
                 "SiLUActivation": "silu", "SiLU": "silu"}
_TO_HF_ACT = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}


def router_from_hf(hf_router: Any) -> Router:
    """``SwitchTransformersTop1Router`` -> :class:`Router` (same logits; HF's router has no bias by default)."""
    if hf_router.classifier.bias is not None:
        raise ValueError("router_bias=True is not the paper's router (no bias); cannot convert")
    w = hf_router.classifier.weight
    router = Router(w.shape[1], w.shape[0], jitter_eps=float(hf_router.jitter_noise))
    with torch.no_grad():
        router.weight.copy_(w.float())
    router.train(hf_router.training)
    return router


def from_hf(hf_mlp: Any) -> SwitchMoE:
    """``SwitchTransformersSparseMLP`` -> :class:`SwitchMoE` carrying the same weights, in the same mode."""
    r, experts = hf_mlp.router, hf_mlp.experts
    e0 = experts["expert_0"]
    E, (F_, D) = r.num_experts, e0.wi.weight.shape
    moe = SwitchMoE(SwitchMoEConfig(dim=D, ffn_dim=F_, num_experts=E, k=1, capacity=int(r.expert_capacity),
                                    min_capacity=0, jitter_eps=float(r.jitter_noise),
                                    expert_dropout=float(e0.dropout.p), activation=_hf_act_name(e0),
                                    route_per_sequence=True))
    moe.router = router_from_hf(r)
    with torch.no_grad():
        moe.w1.copy_(torch.stack([experts[f"expert_{i}"].wi.weight.T for i in range(E)]))
        moe.w2.copy_(torch.stack([experts[f"expert_{i}"].wo.weight.T for i in range(E)]))
    moe.train(hf_mlp.training)
    return moe


def _hf_act_name(dense: Any) -> str:
    name = type(dense.act).__name__
    if name not in _HF_ACT_CLASS:
        raise ValueError(f"cannot convert HF activation {name}; supported: {sorted(_HF_ACT_CLASS)}")
    return _HF_ACT_CLASS[name]


def to_hf(moe: SwitchMoE) -> Any:
    """:class:`SwitchMoE` -> ``SwitchTransformersSparseMLP``. HF needs a fixed integer capacity: ``config.capacity``
    when set, else the eval capacity of one 512-token sequence; HF always routes per sequence and top-1."""
    from transformers import SwitchTransformersConfig
    from transformers.models.switch_transformers.modeling_switch_transformers import SwitchTransformersSparseMLP

    c = moe.config
    if c.k != 1 or moe.group is not None or moe.b1 is not None:
        raise ValueError("to_hf needs a single-process top-1 SwitchMoE without expert biases (HF's layer)")
    cap = c.capacity if c.capacity is not None else moe.current_capacity(512)
    cfg = SwitchTransformersConfig(d_model=c.dim, d_ff=c.ffn_dim, num_experts=c.num_experts,
                                   expert_capacity=cap, router_jitter_noise=moe.router.jitter_eps,
                                   dense_act_fn=_TO_HF_ACT[c.activation], dropout_rate=c.expert_dropout)
    hf = SwitchTransformersSparseMLP(cfg)
    with torch.no_grad():
        hf.router.classifier.weight.copy_(moe.router.weight)
        for i in range(c.num_experts):
            hf.experts[f"expert_{i}"].wi.weight.copy_(moe.w1[i].T)
            hf.experts[f"expert_{i}"].wo.weight.copy_(moe.w2[i].T)
    hf.train(moe.training)
    return hf


register_converter("SwitchTransformersSparseMLP", SwitchMoE, from_hf, to_hf)
register_converter("SwitchTransformersTop1Router", None, router_from_hf)
