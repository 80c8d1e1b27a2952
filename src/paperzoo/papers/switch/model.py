"""Switch language model: a causal pre-norm transformer whose every other FFN is a Switch layer (Fedus et al. 2021).

The dense baseline is the same model with ``num_experts=0``: every FFN is one ``dim -> ffn_dim -> dim`` MLP, the
size of one expert, so FLOPs per token are identical up to the router's ``2 * dim * E`` per Switch layer.
Training loss (paper sec. 2.2): ``lm_loss + balance_coef * sum_layers balance_loss + z_loss_coef * sum_layers z_loss``
(the paper uses no z-loss; ST-MoE's is available). Architecture choices of this laptop-scale model (T5-like):
RMSNorm, no biases, ReLU, rotary positions, tied input/output embeddings; every weight is initialised from a
truncated normal with std ``sqrt(init_scale / fan_in)`` (paper sec. 2.4, s = 0.1), dense and Switch alike.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from paperzoo.nn.attention import as_keep_mask
from paperzoo.nn.embedding import check_token_ids
from paperzoo.nn.outputs import ModelOutput
from paperzoo.nn.transformer import TransformerConfig, TransformerEncoder
from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig


@dataclass(frozen=True)
class SwitchLMConfig:
    """A Switch (``num_experts > 0``) or dense (``num_experts = 0``) causal LM.

    ``moe_every``: a Switch FFN in layers ``i`` with ``i % moe_every == moe_every - 1`` (2: every other, the
    paper's choice). Capacity factors, jitter, expert dropout, init scale and ``route_per_sequence`` (each sequence its
    own routing group; default False, the paper's batch-wide group) as in
    :class:`~paperzoo.papers.switch.moe.SwitchMoEConfig`.

    ``dropout`` applies outside the experts (attention and residual branches), ``expert_dropout`` inside them (on the
    expert hidden layer). The presets here are pretraining runs (no dropout in ``tiny``, 0.1 elsewhere, none in the
    experts). For fine-tuning, the paper's "expert dropout" (sec. 2.4, Table 4) is ``dropout=0.1,
    expert_dropout=0.4``: a larger rate inside the experts only, which beat raising the rate everywhere on the
    smaller downstream tasks. No preset fine-tunes yet, so none sets it.
    """

    vocab_size: int = 8192
    dim: int = 256
    num_layers: int = 4
    num_heads: int = 4
    ffn_dim: int = 1024
    max_len: int = 512
    num_experts: int = 8
    moe_every: int = 2
    k: int = 1
    capacity_factor: float = 1.25
    eval_capacity_factor: float = 2.0
    min_capacity: int = 4
    jitter_eps: float = 0.01
    expert_dropout: float = 0.0
    dropout: float = 0.1
    balance_coef: float = 0.01
    z_loss_coef: float = 0.0
    init_scale: float = 0.1
    activation: str = "relu"
    route_per_sequence: bool = False

    def __post_init__(self) -> None:
        _check_config(self)

    @classmethod
    def preset(cls, name: str, **overrides) -> SwitchLMConfig:
        """``tiny`` (tests, seconds on CPU), ``small`` (the committed CPU reproduction, d 128) or ``medium``
        (d 256, the recipe's ``medium`` preset); keyword overrides on top."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return cls(**{**PRESETS[name], **overrides})

    def dense(self) -> SwitchLMConfig:
        """The FLOP-matched dense baseline of this config."""
        return dataclasses.replace(self, num_experts=0)

    def is_switch_layer(self, i: int) -> bool:
        return self.num_experts > 0 and i % self.moe_every == self.moe_every - 1

    def moe(self) -> SwitchMoEConfig:
        """The config of this model's Switch FFN layers (each expert the size of the dense FFN)."""
        return SwitchMoEConfig(dim=self.dim, ffn_dim=self.ffn_dim, num_experts=self.num_experts, k=self.k,
                               capacity_factor=self.capacity_factor, eval_capacity_factor=self.eval_capacity_factor,
                               min_capacity=self.min_capacity, jitter_eps=self.jitter_eps,
                               expert_dropout=self.expert_dropout, activation=self.activation,
                               init_scale=self.init_scale, route_per_sequence=self.route_per_sequence)


PRESETS = {
    "tiny": dict(vocab_size=512, dim=64, num_layers=2, num_heads=2, ffn_dim=128, max_len=128, num_experts=4,
                 dropout=0.0),
    "small": dict(vocab_size=4096, dim=128, num_layers=4, num_heads=4, ffn_dim=512, max_len=256, num_experts=8,
                  dropout=0.1),
    "medium": dict(vocab_size=8192, dim=256, num_layers=4, num_heads=4, ffn_dim=1024, max_len=256, num_experts=8,
                   dropout=0.1),
}


@dataclass
class SwitchLMOutput(ModelOutput):
    """``logits`` (batch, seq, vocab); with labels: ``loss`` = ``lm_loss`` + ``aux_loss``; ``router``: one aux dict
    per Switch layer (see :class:`paperzoo.papers.switch.moe.MoEOutput`)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    lm_loss: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None
    router: tuple[dict, ...] | None = None


class SwitchLM(nn.Module):
    """``forward(input_ids (batch, seq), labels=None, attention_mask=None)``; labels are the inputs (shifted inside,
    -100 ignored).

    ``group``: a process group (or ``"world"``) for expert parallelism, passed to every Switch layer (each rank holds
    E / world experts per layer; the same seed gives the single-process model's weights). Train such a model with
    :class:`~paperzoo.train.Trainer` under ``torchrun`` (see the README's "Expert parallelism").

    ``attention_mask`` (batch, seq), 1 = token, 0 = padding (HF's convention): padded positions are masked as keys in
    every attention layer (on top of the causal mask), take no expert capacity, get zero MoE output and stay out of
    the balancing and z losses and the routing metrics (:class:`~paperzoo.papers.switch.moe.SwitchMoE`'s mask), and
    no target is predicted at or from a padded position. So real positions' logits and every loss equal those of the
    unpadded batch (left or right padding; up to float rounding, and when capacity drops no token in either).
    """

    config_class = SwitchLMConfig

    def __init__(self, config: SwitchLMConfig, *, group=None):
        super().__init__()
        self.config = c = config
        self.group = group
        tcfg = TransformerConfig(dim=c.dim, num_layers=c.num_layers, num_heads=c.num_heads, ffn_dim=c.ffn_dim,
                                 activation=c.activation, norm="rmsnorm", prenorm=True, dropout=c.dropout,
                                 bias=False, position="rotary", max_len=c.max_len, causal=True)
        self.embed = nn.Embedding(c.vocab_size, c.dim)
        self.encoder = TransformerEncoder(tcfg, make_ffn=self._make_ffn)
        self.reset_parameters()

    @classmethod
    def example_inputs(cls, config: SwitchLMConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.randint(0, config.vocab_size, (batch, 16))}

    def _make_ffn(self, i: int) -> nn.Module | None:
        return SwitchMoE(self.config.moe(), group=self.group) if self.config.is_switch_layer(i) else None

    def reset_parameters(self) -> None:
        s = self.config.init_scale
        for m in self.modules():
            if isinstance(m, nn.Linear):
                std = math.sqrt(s / m.in_features)
                nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std)
            elif isinstance(m, SwitchMoE):
                m.reset_parameters()
        std = math.sqrt(s / self.config.dim)
        nn.init.trunc_normal_(self.embed.weight, std=std, a=-2 * std, b=2 * std)

    def num_parameters(self, per_token: bool = False) -> int:
        """All parameters, or those one token uses (one expert per Switch layer, no other experts)."""
        n = sum(p.numel() for p in self.parameters())
        if per_token:
            for m in self.modules():
                if isinstance(m, SwitchMoE):
                    n -= (m.w1.numel() + m.w2.numel()) * (m.num_local_experts - m.config.k) // m.num_local_experts
        return n

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> SwitchLMOutput:
        _check_input_ids(input_ids, self.config.max_len)
        check_token_ids(input_ids, self.config.vocab_size)
        keep = _keep_mask(attention_mask, input_ids)  # (batch, seq) bool, None without padding
        out = self.encoder(self.embed(input_ids), key_padding_mask=keep)  # (batch, seq, dim); aux per Switch layer
        logits = F.linear(out.last_hidden_state, self.embed.weight)  # tied embeddings, (batch, seq, vocab)
        router = tuple(a for a in (out.aux or ()) if a)
        if labels is None:
            return SwitchLMOutput(logits=logits, router=router or None)
        _check_labels(labels, input_ids)
        targets = labels[:, 1:]
        if keep is not None:  # a target counts only if it and the token predicting it are real
            targets = targets.masked_fill(~(keep[:, :-1] & keep[:, 1:]), -100)
        lm = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets.reshape(-1),
                             ignore_index=-100)  # next-token loss
        aux = logits.new_zeros(())
        for a in router:  # sec. 2.2: alpha * balance loss (eq. 4) per layer, summed; no mixing across layers
            aux = aux + self.config.balance_coef * a["balance_loss"] + self.config.z_loss_coef * a["z_loss"]
        return SwitchLMOutput(lm + aux, logits, lm, aux, router or None)


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: SwitchLMConfig) -> None:
    for name in ("vocab_size", "dim", "num_layers", "num_heads", "ffn_dim", "max_len", "moe_every", "k"):
        v = getattr(c, name)
        if type(v) is not int or v < 1:
            raise ValueError(f"SwitchLMConfig.{name} must be a positive int, got {v!r}")
    if type(c.num_experts) is not int or c.num_experts < 0:
        raise ValueError(f"SwitchLMConfig.num_experts must be an int >= 0 (0 = dense), got {c.num_experts!r}")
    if c.dim % c.num_heads:
        raise ValueError(f"SwitchLMConfig.dim ({c.dim}) must be divisible by num_heads ({c.num_heads})")


def _check_input_ids(input_ids: torch.Tensor, max_len: int) -> None:
    if input_ids.dim() != 2 or input_ids.dtype != torch.long:
        raise ValueError(f"input_ids must be a (batch, seq) long tensor, got {tuple(input_ids.shape)} "
                         f"{input_ids.dtype}")
    if input_ids.shape[1] > max_len:
        raise ValueError(f"sequence length must be <= max_len={max_len}, got {input_ids.shape[1]}")


def _keep_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor | None:
    """The bool keep-mask of an HF-style ``attention_mask``; None when absent or without padding (the mask-free
    causal attention and unmasked routing: the same computation as no mask)."""
    if attention_mask is None:
        return None
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"attention_mask must have shape {tuple(input_ids.shape)} (batch, seq; 1 = token, "
                         f"0 = padding), got {tuple(attention_mask.shape)}")
    keep = as_keep_mask(attention_mask)
    return None if bool(keep.all()) else keep


def _check_labels(labels: torch.Tensor, input_ids: torch.Tensor) -> None:
    if labels.shape != input_ids.shape:
        raise ValueError(f"labels must have shape {tuple(input_ids.shape)}, got {tuple(labels.shape)}")
