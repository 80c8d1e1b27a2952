"""One language model whose every modification studied by Narang et al. (2021) is a field of its config.

``ModsLM``: token embeddings -> a body -> a language-model head over the vocabulary.

* Body ``transformer`` (default): the shared core's :class:`~paperzoo.nn.transformer.TransformerEncoder`, configured
  by :meth:`ModsConfig.transformer`: activation (ReLU, GeLU, Swish, ELU, SeLU, sigmoid, softplus) or GLU variant
  (GLU, GeGLU, ReGLU, SwiGLU, LiGLU), norm (LayerNorm, RMSNorm, ScaleNorm, none; pre or post), a residual gate
  (ReZero, with or without a norm; Fixup's multiplier with :func:`~paperzoo.nn.transformer.fixup_init_`), depth and
  width, block sharing, positions (T5 shared relative bias, RoPE, ALiBi in the stack; learned or sinusoidal
  absolute ones added to or concatenated with the token embedding), and Switch FFNs
  (:class:`~paperzoo.papers.switch.moe.SwitchMoE`, every ``moe_every``-th layer).
* Body ``funnel`` (``funnel_blocks`` set): :class:`~paperzoo.papers.funnel.model.FunnelModel` (pooling encoder +
  upsampling decoder, full-length output), bidirectional, so only with the masked-LM objective.

Baseline (the paper's "vanilla", sec. 2): pre-norm LayerNorm, ReLU FFN with biases, T5 relative attention bias
shared by all layers, tied input/output embeddings, no dropout. Objectives: ``causal`` (next token) or ``mlm``
(BERT-style masked tokens, ELECTRA's masking code with the 80/10/10 rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from paperzoo.nn.attention import as_keep_mask
from paperzoo.nn.embedding import TokenEmbeddings, check_token_ids
from paperzoo.nn.ffn import ACTIVATIONS, GLU_VARIANTS
from paperzoo.nn.norm import NORMS
from paperzoo.nn.outputs import ClassifierOutput, ModelOutput
from paperzoo.nn.transformer import POSITIONS, TransformerConfig, TransformerEncoder, fixup_init_

__all__ = ["ModsConfig", "ModsLM", "ModsClassifier", "ModsOutput", "OBJECTIVES"]

OBJECTIVES = ("causal", "mlm")
INITS = ("default", "fixup")
SIZES = {  # the body of each preset; variants change fields on top
    "tiny": dict(vocab_size=256, dim=64, num_layers=4, num_heads=2, ffn_dim=256, max_len=32),
    "small": dict(vocab_size=8000, dim=128, num_layers=4, num_heads=4, ffn_dim=512, max_len=64),
    "full": dict(vocab_size=16000, dim=512, num_layers=8, num_heads=8, ffn_dim=2048, max_len=256),
}


@dataclass(frozen=True)
class ModsConfig:
    """Every modification as a field; the defaults are the paper's baseline at the ``small`` size.

    ``glu`` None is a plain MLP with ``activation``; a GLU variant fixes its own gate activation. ``norm`` one of
    layernorm/rmsnorm/scalenorm/rezero/none (``rezero``: the core's ReZero without any norm); ``residual_gate``:
    the initial value of a learned scalar on every branch (0.0 with a norm: "ReZero + norm"; 1.0 with
    ``init="fixup"``). ``position_concat_dim`` p > 0 concatenates a p-wide absolute position table to a
    ``dim - p``-wide token embedding (learned or sinusoidal only). ``embedding_dim`` < ``dim`` factorises the
    embeddings (ALBERT). ``shared_layers`` k: k distinct blocks over ``num_layers`` (1: Universal-style).
    ``num_experts`` > 0: Switch FFN (top-1, ``capacity_factor``, balance loss ``balance_coef``) every
    ``moe_every``-th layer, each expert the size of the dense FFN. ``funnel_blocks``: Funnel's layout (e.g.
    ``"2-2"``) with ``funnel_decoder_layers``; needs ``objective="mlm"``.
    """

    vocab_size: int = 8000
    dim: int = 128
    num_layers: int = 4
    num_heads: int = 4
    ffn_dim: int = 512
    max_len: int = 64
    activation: str = "relu"
    glu: str | None = None
    bias: bool = True
    norm: str = "layernorm"
    prenorm: bool = True
    norm_eps: float = 1e-6
    residual_gate: float | None = None
    init: str = "default"
    init_std: float = 0.02
    position: str = "t5"
    position_concat_dim: int = 0
    tie_embeddings: bool = True
    embedding_dim: int | None = None
    shared_layers: int | None = None
    num_experts: int = 0
    moe_every: int = 2
    capacity_factor: float = 1.25
    balance_coef: float = 0.01
    funnel_blocks: str | None = None
    funnel_decoder_layers: int = 1
    objective: str = "causal"
    mask_prob: float = 0.15
    mask_token_id: int = 4
    special_ids: tuple[int, ...] = (0, 2, 3, 4)
    dropout: float = 0.0

    def __post_init__(self) -> None:
        _check_config(self)

    @classmethod
    def preset(cls, name: str = "small", **overrides) -> ModsConfig:
        """The baseline at size ``tiny`` (tests), ``small`` (the laptop grid) or ``full`` (a GPU); overrides on top."""
        if name not in SIZES:
            raise ValueError(f"preset must be one of {sorted(SIZES)}, got {name!r}")
        return cls(**{**SIZES[name], **overrides})

    @property
    def causal(self) -> bool:
        return self.objective == "causal"

    @property
    def absolute_position(self) -> bool:
        return self.position in ("learned", "sinusoidal")

    def transformer(self) -> TransformerConfig:
        """The shared core's stack config of this variant (absolute positions live in the embeddings)."""
        return TransformerConfig(
            dim=self.dim, num_layers=self.num_layers, num_heads=self.num_heads, ffn_dim=self.ffn_dim,
            activation=self.activation, glu=self.glu, norm=self.norm, norm_eps=self.norm_eps, prenorm=self.prenorm,
            dropout=self.dropout, bias=self.bias, position="none" if self.absolute_position else self.position,
            max_len=self.max_len, t5_max_distance=max(self.max_len, 32), causal=self.causal,
            residual_gate=self.residual_gate, shared_layers=self.shared_layers)

    def funnel(self):
        """The :class:`~paperzoo.papers.funnel.model.FunnelConfig` of a Funnel body at this width."""
        from paperzoo.papers.funnel.model import FunnelConfig

        act = {"relu": "relu", "gelu": "gelu"}.get(self.activation, "relu")
        return FunnelConfig(vocab_size=self.vocab_size, blocks=self.funnel_blocks, dim=self.dim,
                            num_heads=self.num_heads, head_dim=self.dim // self.num_heads, ffn_dim=self.ffn_dim,
                            num_decoder_layers=self.funnel_decoder_layers, activation=act, dropout=self.dropout,
                            attn_dropout=self.dropout, norm_eps=self.norm_eps, pad_token_id=0)


@dataclass
class ModsOutput(ModelOutput):
    """``logits`` (batch, seq, vocab); with labels ``loss = lm_loss + aux_loss`` (aux: Switch balance losses)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    lm_loss: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None


class ModsLM(nn.Module):
    """``forward(input_ids (batch, seq), labels=None, attention_mask=None) -> ModsOutput``.

    Causal: ``labels`` are the inputs (shifted inside; -100 ignored). MLM: ``labels`` (batch, seq) hold the
    original token at masked positions and -100 elsewhere (see :meth:`mask`). ``attention_mask`` 1 = token,
    0 = padding. :meth:`hidden` returns the body's final states (batch, seq, dim).
    """

    config_class = ModsConfig

    def __init__(self, config: ModsConfig):
        super().__init__()
        self.config = c = config
        self.funnel = None
        if c.funnel_blocks:
            from paperzoo.papers.funnel.model import FunnelModel

            self.funnel = FunnelModel(c.funnel())
            self.word = self.funnel.embeddings.word_embeddings
            nn.init.normal_(self.word.weight, std=c.init_std)  # Funnel's N(0, 1) is too large for a tied head
            width = c.dim
        else:
            pos = c.position if c.absolute_position else "none"
            self.embed = TokenEmbeddings(c.vocab_size, c.dim, c.max_len, 0, c.embedding_dim, position=pos,
                                         norm_eps=None, dropout=c.dropout, pad_token_id=None,
                                         concat_position_dim=c.position_concat_dim)
            self.word = self.embed.word
            nn.init.normal_(self.word.weight, std=c.init_std)
            if c.position == "learned":
                nn.init.normal_(self.embed.position.weight, std=c.init_std)
            self.encoder = TransformerEncoder(c.transformer(), make_ffn=self._make_ffn if c.num_experts else None)
            if c.init == "fixup":
                fixup_init_(self.encoder)
            width = self.word.embedding_dim
        # tied: logits = (h W_o) E^T, with W_o: dim -> table width when the table is narrower (factorised/concat)
        self.out_proj = nn.Linear(c.dim, width, bias=False) if c.tie_embeddings and width != c.dim else None
        self.head = None if c.tie_embeddings else nn.Linear(c.dim, c.vocab_size, bias=False)

    def _make_ffn(self, i: int) -> nn.Module | None:
        from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

        c = self.config
        if i % c.moe_every != c.moe_every - 1:
            return None
        act = c.activation if c.activation in ("relu", "gelu", "silu") else "relu"
        return SwitchMoE(SwitchMoEConfig(dim=c.dim, ffn_dim=c.ffn_dim, num_experts=c.num_experts,
                                         capacity_factor=c.capacity_factor, activation=act, bias=False))

    @staticmethod
    def example_inputs(config: ModsConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return {"input_ids": torch.randint(5, config.vocab_size, (batch, min(16, config.max_len)))}

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def hidden(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(final states (batch, seq, dim), Switch aux loss scalar)."""
        _check_input_ids(input_ids, self.config)
        check_token_ids(input_ids, self.config.vocab_size)
        keep = _keep_mask(attention_mask, input_ids)
        if self.funnel is not None:
            mask = keep.long() if keep is not None else None
            h = self.funnel(input_ids, attention_mask=mask).last_hidden_state  # (batch, seq, dim), full length
            return h, h.new_zeros((), dtype=torch.float)
        out = self.encoder(self.embed(input_ids), key_padding_mask=keep)  # (batch, seq, dim)
        aux = out.last_hidden_state.new_zeros((), dtype=torch.float)
        for a in out.aux or ():  # Switch sec. 2.2: alpha * balance loss of each Switch layer, summed
            if a:
                aux = aux + self.config.balance_coef * a["balance_loss"]
        return out.last_hidden_state, aux

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.head is not None:
            return self.head(h)
        return F.linear(self.out_proj(h) if self.out_proj is not None else h, self.word.weight)  # tied

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> ModsOutput:
        h, aux = self.hidden(input_ids, attention_mask)
        logits = self.logits(h)  # (batch, seq, vocab)
        if labels is None:
            return ModsOutput(logits=logits, aux_loss=aux)
        if labels.shape != input_ids.shape:
            raise ValueError(f"labels must have shape {tuple(input_ids.shape)}, got {tuple(labels.shape)}")
        if self.config.causal:
            targets = labels[:, 1:]
            if attention_mask is not None:  # a target counts only if it and its predictor are real tokens
                m = attention_mask.bool()
                targets = targets.masked_fill(~(m[:, :-1] & m[:, 1:]), -100)
            logits_used = logits[:, :-1]
        else:
            targets, logits_used = labels, logits
        lm = F.cross_entropy(logits_used.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                             ignore_index=-100)
        return ModsOutput(lm + aux, logits, lm, aux)

    def mask(self, input_ids: torch.Tensor, generator: torch.Generator | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """BERT-style masking for the MLM objective: (corrupted inputs, labels with -100 at unmasked positions)."""
        from paperzoo.papers.electra.masking import BERT_MASKING, mask_tokens

        c = self.config
        m = mask_tokens(input_ids, None, c.mask_token_id, c.special_ids, c.mask_prob, generator=generator,
                        vocab_size=c.vocab_size, **BERT_MASKING)
        return m.input_ids, m.original_ids.masked_fill(~m.is_masked, -100)


class ModsClassifier(nn.Module):
    """A pretrained :class:`ModsLM` body with a linear head on one position: the first token ([CLS]) for a
    bidirectional body, the last real token ([SEP]) for a causal one. ``forward(input_ids, attention_mask,
    labels) -> ClassifierOutput``."""

    config_class = ModsConfig

    def __init__(self, config: ModsConfig, num_labels: int = 2, dropout: float = 0.1):
        super().__init__()
        self.body = ModsLM(config)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.dim, num_labels)

    @staticmethod
    def example_inputs(config: ModsConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        return ModsLM.example_inputs(config, batch)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> ClassifierOutput:
        h, aux = self.body.hidden(input_ids, attention_mask)
        if self.body.config.causal:
            n = attention_mask.long().sum(1) if attention_mask is not None else torch.full(
                (h.shape[0],), h.shape[1], device=h.device)
            pooled = h[torch.arange(h.shape[0], device=h.device), n - 1]  # last real token
        else:
            pooled = h[:, 0]
        logits = self.classifier(self.dropout(pooled))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float(), labels) + aux
        return ClassifierOutput(loss=loss, logits=logits, aux_loss=aux)


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(c: ModsConfig) -> None:
    for name in ("vocab_size", "dim", "num_layers", "num_heads", "ffn_dim", "max_len", "moe_every"):
        v = getattr(c, name)
        if type(v) is not int or v < 1:
            raise ValueError(f"ModsConfig.{name} must be a positive int, got {v!r}")
    if c.dim % c.num_heads:
        raise ValueError(f"ModsConfig.dim ({c.dim}) must be divisible by num_heads ({c.num_heads})")
    if c.activation not in ACTIVATIONS:
        raise ValueError(f"ModsConfig.activation must be one of {sorted(ACTIVATIONS)}, got {c.activation!r}")
    if c.glu is not None and c.glu not in GLU_VARIANTS:
        raise ValueError(f"ModsConfig.glu must be None or one of {sorted(GLU_VARIANTS)}, got {c.glu!r}")
    if c.norm not in NORMS:
        raise ValueError(f"ModsConfig.norm must be one of {NORMS}, got {c.norm!r}")
    if c.position not in POSITIONS:
        raise ValueError(f"ModsConfig.position must be one of {POSITIONS}, got {c.position!r}")
    if c.init not in INITS:
        raise ValueError(f"ModsConfig.init must be one of {INITS}, got {c.init!r}")
    if c.init == "fixup" and c.norm != "none":
        raise ValueError(f"ModsConfig.init='fixup' is for a stack without norms: set norm='none', got {c.norm!r}")
    if c.objective not in OBJECTIVES:
        raise ValueError(f"ModsConfig.objective must be one of {OBJECTIVES}, got {c.objective!r}")
    if c.position_concat_dim and not (c.absolute_position and 0 < c.position_concat_dim < (c.embedding_dim or c.dim)):
        raise ValueError("ModsConfig.position_concat_dim needs position 'learned' or 'sinusoidal' and a value in "
                         f"(0, embedding width), got {c.position_concat_dim!r} with position={c.position!r}")
    if type(c.num_experts) is not int or c.num_experts < 0:
        raise ValueError(f"ModsConfig.num_experts must be an int >= 0 (0 = dense FFN), got {c.num_experts!r}")
    if c.funnel_blocks is not None and c.objective != "mlm":
        raise ValueError("ModsConfig.funnel_blocks needs objective='mlm': Funnel pools neighbouring positions, so a "
                         "causal LM would see the future")
    if c.shared_layers is not None and (type(c.shared_layers) is not int or c.shared_layers < 1
                                        or c.num_layers % c.shared_layers):
        raise ValueError(f"ModsConfig.shared_layers must divide num_layers={c.num_layers}, got {c.shared_layers!r}")


def _check_input_ids(input_ids: torch.Tensor, c: ModsConfig) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
        raise ValueError(f"input_ids must be an integer (batch, seq) tensor, got "
                         f"{getattr(input_ids, 'dtype', type(input_ids))} of shape "
                         f"{tuple(getattr(input_ids, 'shape', ()))}")
    if input_ids.shape[1] > c.max_len and c.position == "learned":
        raise ValueError(f"sequence length must be <= max_len={c.max_len} with learned positions, "
                         f"got {input_ids.shape[1]}")


def _keep_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor | None:
    if attention_mask is None:
        return None
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"attention_mask must have shape {tuple(input_ids.shape)} (1 = token, 0 = padding), "
                         f"got {tuple(attention_mask.shape)}")
    keep = as_keep_mask(attention_mask)
    return None if bool(keep.all()) else keep


