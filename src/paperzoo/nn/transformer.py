"""One configurable transformer encoder: block, stack and a BERT/ELECTRA-style text encoder, all from one config.

Block (Vaswani et al. 2017, sec. 3.1), post-norm (the paper, BERT)::

    x = Norm(x + Drop(Attn(x)));  x = Norm(x + Drop(FFN(x)))

pre-norm (Xiong et al. 2020; GPT-2, T5, ViT)::

    x = x + DropPath(Drop(Attn(Norm(x))));  x = x + DropPath(Drop(FFN(Norm(x))))

ReZero (Bachlechner et al. 2020) has no norm: ``x = x + alpha * F(x)`` with alpha initialised to 0.
``residual_gate`` puts that learned scalar on every branch of any block: ``x = x + alpha * F(Norm(x))`` (0: ReZero
with a norm, as Narang et al. 2021's "ReZero + LayerNorm"; 1.0 with ``norm="none"`` and :func:`fixup_init_`: Fixup's
multiplier, Zhang et al. 2019). ``shared_layers`` = k < num_layers builds k distinct blocks, each applied
num_layers / k times in a row (block sharing; k = 1 is the Universal Transformer's one block, Dehghani et al. 2019).
Positions: absolute encodings ("sinusoidal", "learned") are added to the stack's input; relative biases
("t5", "alibi") are computed once per forward by one module and shared by every layer; "rotary" rotates q and k
in every layer.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .attention import MultiHeadAttention, as_keep_mask, merge_masks
from .embedding import TokenEmbeddings
from .ffn import FeedForward
from .norm import NORMS, ReZero, make_norm
from .outputs import BaseModelOutput, ModelOutput
from .posenc import (
    ALiBi,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativePositionBias,
)

__all__ = ["TransformerConfig", "DropPath", "TransformerBlock", "TransformerEncoder", "EncoderOutput",
           "TextEncoderConfig", "TextEncoder", "fixup_init_"]

POSITIONS = ("none", "sinusoidal", "learned", "t5", "rotary", "alibi")


@dataclass(frozen=True)
class TransformerConfig:
    """Everything a transformer encoder stack needs.

    ``ffn_dim`` defaults to 4 * dim; ``final_norm`` defaults to ``prenorm`` (a pre-norm stack ends with a norm);
    ``drop_path`` is the stochastic-depth rate of the last block, growing linearly from 0 at the first
    (Huang et al. 2016; DeiT/Swin); ``attn_scale`` None means the scheme's own: 1.0 with ``position="t5"`` (T5
    scores q.k unscaled and folds 1/sqrt(head_dim) into the query projection's initialisation, as this stack then
    does, so the function at init is the scaled one's; a model that re-initialises every Linear after building the
    stack undoes the fold and should set ``attn_scale`` itself), 1/sqrt(head_dim) otherwise; a number sets it (no
    folding);
    ``t5_*`` configure the T5 bucketed bias, ``rotary_*`` RoPE; ``causal`` masks the future in every layer.
    ``residual_gate``: None, or the initial value of a learned scalar multiplying every branch's output (0: ReZero);
    ``shared_layers``: None (every layer its own weights) or the number of distinct blocks (divides num_layers).
    """

    dim: int = 256
    num_layers: int = 4
    num_heads: int = 4
    ffn_dim: int | None = None
    activation: str = "gelu"
    glu: str | None = None
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    prenorm: bool = True
    dropout: float = 0.0
    attn_dropout: float = 0.0
    ffn_dropout: float = 0.0
    drop_path: float = 0.0
    bias: bool = True
    attn_scale: float | None = None
    position: str = "none"
    max_len: int = 512
    t5_num_buckets: int = 32
    t5_max_distance: int = 128
    rotary_base: float = 10000.0
    rotary_interleaved: bool = False
    causal: bool = False
    final_norm: bool | None = None
    residual_gate: float | None = None
    shared_layers: int | None = None

    def __post_init__(self):
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, got {self.norm!r}")
        for name in ("dropout", "attn_dropout", "ffn_dropout", "drop_path"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.num_layers < 0:
            raise ValueError(f"num_layers must be >= 0, got {self.num_layers}")
        k = self.shared_layers
        if k is not None and (type(k) is not int or k < 1 or self.num_layers % k):
            raise ValueError(f"shared_layers must be None or a positive int dividing num_layers={self.num_layers}, "
                             f"got {k!r}")

    @property
    def hidden_dim(self) -> int:
        return self.ffn_dim or 4 * self.dim

    @property
    def head_dim(self) -> int:
        return self.dim // self.num_heads

    @property
    def t5_unscaled(self) -> bool:
        """T5's attention: q.k without 1/sqrt(head_dim), the factor folded into the query projection's init."""
        return self.position == "t5" and self.attn_scale is None

    @property
    def use_final_norm(self) -> bool:
        return self.prenorm if self.final_norm is None else self.final_norm


class DropPath(nn.Module):
    """Stochastic depth (Huang et al. 2016): in training, zero the branch for a whole sample with probability p
    and scale the kept ones by 1/(1-p); identity in eval. ``(batch, ...) -> (batch, ...)``."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"drop-path rate must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(1.0 - self.p)
        return x * keep / (1.0 - self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _maybe(module: nn.Module, active: bool) -> nn.Module:
    return module if active else nn.Identity()


class TransformerBlock(nn.Module):
    """One encoder block: attention then FFN, each a residual branch (see the module docstring).

    ``ffn``: any module mapping (batch, seq, dim) to a tensor of the same shape, or to ``(tensor, aux: dict)``
    (e.g. a mixture-of-experts layer with its balancing losses); default the config's MLP/GLU ``FeedForward``.
    ``forward`` returns the tensor, or ``(tensor, aux)`` when the FFN returned aux.
    """

    def __init__(self, cfg: TransformerConfig, ffn: nn.Module | None = None, drop_path: float | None = None):
        super().__init__()
        self.prenorm, self.rezero = cfg.prenorm, cfg.norm == "rezero"
        self.attn = MultiHeadAttention(cfg.dim, cfg.num_heads, bias=cfg.bias, dropout=cfg.attn_dropout,
                                       scale=1.0 if cfg.t5_unscaled else cfg.attn_scale)
        if cfg.t5_unscaled:  # T5's init: W_q ~ (d_model d_kv)^-1/2 where k, v get d_model^-1/2 (Raffel et al.)
            with torch.no_grad():
                self.attn.qkv.weight[:cfg.dim].mul_(cfg.head_dim ** -0.5)
                if self.attn.qkv.bias is not None:
                    self.attn.qkv.bias[:cfg.dim].mul_(cfg.head_dim ** -0.5)
        self.ffn = ffn if ffn is not None else FeedForward(cfg.dim, cfg.hidden_dim, activation=cfg.activation,
                                                           glu=cfg.glu, bias=cfg.bias, dropout=cfg.ffn_dropout)
        self.attn_norm = make_norm(cfg.norm, cfg.dim, cfg.norm_eps)
        self.ffn_norm = make_norm(cfg.norm, cfg.dim, cfg.norm_eps)
        self.dropout = _maybe(nn.Dropout(cfg.dropout), cfg.dropout > 0)
        gate = cfg.residual_gate is not None
        self.attn_gate = _maybe(ReZero(cfg.residual_gate if gate else 0.0), gate)  # alpha * F(...)
        self.ffn_gate = _maybe(ReZero(cfg.residual_gate if gate else 0.0), gate)
        p = cfg.drop_path if drop_path is None else drop_path
        self.drop_path = _maybe(DropPath(p), p > 0)

    def _residual(self, x: torch.Tensor, f: Callable, norm: nn.Module, gate: nn.Module):
        """x + branch, with the norm placed by the config; returns (new x, aux or None)."""
        out = f(norm(x) if self.prenorm and not self.rezero else x)
        aux = None
        if isinstance(out, tuple):
            out, aux = out
        if self.rezero:
            out = norm(out)
        x = x + self.drop_path(self.dropout(gate(out)))  # x + alpha * F(.) with a residual gate
        return (x if self.prenorm or self.rezero else norm(x)), aux

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_bias: torch.Tensor | None = None, causal: bool = False, rotary: nn.Module | None = None,
                attn_mask: torch.Tensor | None = None, token_mask: torch.Tensor | None = None):
        """x (batch, seq, dim) -> (batch, seq, dim) [, aux]; masks as in :class:`MultiHeadAttention`.

        ``token_mask`` (batch, seq) True/1 = real token, for an FFN that takes one (``accepts_token_mask``, e.g. a
        mixture of experts); default ``key_padding_mask``. A stack passes it beside its merged ``attn_mask``.
        """
        x, _ = self._residual(x, lambda h: self.attn(h, key_padding_mask=key_padding_mask, attn_bias=attn_bias,
                                                     causal=causal, rotary=rotary, attn_mask=attn_mask),
                              self.attn_norm, self.attn_gate)
        ffn = self.ffn
        token_mask = key_padding_mask if token_mask is None else token_mask
        if token_mask is not None and getattr(ffn, "accepts_token_mask", False):  # MoE: padding takes no
            ffn = functools.partial(self.ffn, mask=token_mask)  # expert capacity and stays out of its losses
        x, aux = self._residual(x, ffn, self.ffn_norm, self.ffn_gate)
        return x if aux is None else (x, aux)


@dataclass
class EncoderOutput(ModelOutput):
    """``last_hidden_state`` (batch, seq, dim); ``hidden_states``: the stack's input and every block's output
    (num_layers + 1, before the final norm); ``aux``: per-layer aux dicts of FFNs that return them (else None)."""

    last_hidden_state: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None = None
    aux: tuple[dict, ...] | None = None


class TransformerEncoder(nn.Module):
    """A stack of :class:`TransformerBlock` with the config's position scheme and optional final norm.

    ``make_ffn(layer_index) -> nn.Module | None`` overrides the FFN per layer (e.g. Switch: MoE every other layer).
    With ``shared_layers`` = k, ``layers`` holds the k distinct blocks and ``order`` the block applied at each depth
    (block ``i // (num_layers / k)``); ``make_ffn`` is then called per distinct block.
    Absolute positions ("sinusoidal", "learned") are added to the input in ``forward`` (see :meth:`add_positions`);
    relative biases come from one shared module (``rel_bias``), rotary from ``rotary``.
    """

    def __init__(self, cfg: TransformerConfig, make_ffn: Callable[[int], nn.Module | None] | None = None):
        super().__init__()
        self.cfg = cfg
        self.abs_pos = self.rel_bias = self.rotary = None
        if cfg.position == "sinusoidal":
            self.abs_pos = SinusoidalPositionalEncoding(cfg.dim, cfg.max_len)
        elif cfg.position == "learned":
            self.abs_pos = LearnedPositionalEmbedding(cfg.max_len, cfg.dim)
        elif cfg.position == "t5":
            self.rel_bias = T5RelativePositionBias(cfg.num_heads, cfg.t5_num_buckets, cfg.t5_max_distance,
                                                   bidirectional=not cfg.causal)
        elif cfg.position == "alibi":
            self.rel_bias = ALiBi(cfg.num_heads, causal=cfg.causal)
        elif cfg.position == "rotary":
            self.rotary = RotaryEmbedding(cfg.head_dim, cfg.rotary_base, cfg.rotary_interleaved)
        n = cfg.num_layers
        k = cfg.shared_layers or n
        rates = torch.linspace(0, cfg.drop_path, n, device="cpu").tolist() if n > 1 else [cfg.drop_path] * n
        self.order = tuple(i // (n // k) for i in range(n)) if n else ()  # distinct block used at each depth
        self.layers = nn.ModuleList([
            TransformerBlock(cfg, make_ffn(i) if make_ffn is not None else None, drop_path=rates[i * (n // k)])
            for i in range(k if n else 0)])
        use = cfg.use_final_norm and cfg.norm not in ("rezero", "none")
        self.norm = make_norm(cfg.norm, cfg.dim, cfg.norm_eps) if use else None

    def add_positions(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x (batch, seq, dim) plus the absolute encoding of positions offset.. (identity for other schemes)."""
        return x if self.abs_pos is None else x + self.abs_pos(x.shape[1], offset).to(x.dtype)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                attn_bias: torch.Tensor | None = None, output_hidden_states: bool = False) -> EncoderOutput:
        """x (batch, seq, dim); ``key_padding_mask`` (batch, seq) True/1 = keep (merged into every layer's attention
        mask, and given to FFNs that take a token mask, see :class:`TransformerBlock`); ``attn_bias`` extra additive
        float (or bool keep) bias, shapes as in :class:`MultiHeadAttention`."""
        cfg = self.cfg
        if x.ndim != 3 or x.shape[-1] != cfg.dim:
            raise ValueError(f"x must have shape (batch, seq, dim={cfg.dim}), got {tuple(x.shape)}")
        n = x.shape[1]
        x = self.add_positions(x)
        if self.rel_bias is not None:  # once per forward, shared by all layers
            rel = self.rel_bias(n, n, device=x.device).to(x.dtype)  # (heads, q, k)
            if attn_bias is not None and attn_bias.dtype == torch.bool:
                attn_bias = rel.masked_fill(~attn_bias, float("-inf"))
            else:
                attn_bias = rel if attn_bias is None else rel + attn_bias
        attn_mask, causal = merge_masks(key_padding_mask, attn_bias, cfg.causal, n, n, x.dtype)  # the one merge
        hidden, auxes = [x] if output_hidden_states else None, []
        for i in self.order:
            out = self.layers[i](x, attn_mask=attn_mask, causal=causal, rotary=self.rotary,
                                 token_mask=key_padding_mask)
            x, aux = out if isinstance(out, tuple) else (out, None)
            auxes.append(aux)
            if hidden is not None:
                hidden.append(x)
        if self.norm is not None:
            x = self.norm(x)
        any_aux = any(a is not None for a in auxes)
        return EncoderOutput(x, tuple(hidden) if hidden is not None else None,
                             tuple(a or {} for a in auxes) if any_aux else None)


@torch.no_grad()
def fixup_init_(encoder: TransformerEncoder, m: int = 2) -> TransformerEncoder:
    """Fixup-style initialisation (Zhang, Dauphin & Ma, 2019, sec. 3) of a stack without norms, in place.

    Each residual branch has ``m`` layers (attention: the q/k/v projection then ``out``; FFN: ``fc1`` then ``fc2``).
    With L branches in the stack (2 per applied layer): the branch's last layer starts at zero, so every block is the
    identity at initialisation, and its other weights are scaled by ``L^(-1/(2m-2))`` (rule 2). Biases start at
    zero. Fixup's scalar multiplier is the config's ``residual_gate`` (1.0); its other scalar biases are the
    layers' own biases here. Returns ``encoder``.
    """
    if not isinstance(encoder, TransformerEncoder):
        raise ValueError(f"fixup_init_ expects a TransformerEncoder, got {type(encoder).__name__}")
    if type(m) is not int or m < 2:
        raise ValueError(f"m (layers per residual branch) must be an int >= 2, got {m!r}")
    L = 2 * max(1, len(encoder.order))
    scale = L ** (-1.0 / (2 * m - 2))  # L^(-1/(2m-2))
    for block in encoder.layers:
        branches = [(block.attn.qkv if hasattr(block.attn, "qkv") else block.attn.q, block.attn.out)]
        if isinstance(block.ffn, FeedForward):
            branches.append((block.ffn.fc1, block.ffn.fc2))
        for first, last in branches:
            first.weight.mul_(scale)
            nn.init.zeros_(last.weight)
            for lin in (first, last):
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)
    return encoder


@dataclass(frozen=True)
class TextEncoderConfig:
    """A BERT/ELECTRA-style text encoder: :class:`TokenEmbeddings` then a :class:`TransformerEncoder`.

    Absolute positions ("learned"/"sinusoidal") live in the embeddings (added before the embedding norm, as BERT);
    other schemes live in the stack. ``embedding_dim`` < ``transformer.dim`` factorises the embeddings (ELECTRA);
    ``embed_norm_eps`` is the embedding LayerNorm's epsilon (None: no norm); ``pooler``: BERT's tanh pooler on
    the first token. ``hf_class`` records the Hugging Face class this was converted from (for ``to_hf``).
    """

    transformer: TransformerConfig = TransformerConfig()
    vocab_size: int = 30522
    type_vocab_size: int = 2
    embedding_dim: int | None = None
    pad_token_id: int | None = 0
    embed_norm_eps: float | None = 1e-12
    pooler: bool = False
    hf_class: str | None = None

    @classmethod
    def bert(cls, dim=768, num_layers=12, num_heads=12, ffn_dim=3072, vocab_size=30522, max_len=512, dropout=0.1,
             **kw) -> TextEncoderConfig:
        """BERT's architecture: post-norm, exact GELU, LayerNorm eps 1e-12, learned positions, pooler."""
        t = TransformerConfig(dim=dim, num_layers=num_layers, num_heads=num_heads, ffn_dim=ffn_dim, activation="gelu",
                              norm="layernorm", norm_eps=1e-12, prenorm=False, dropout=dropout, attn_dropout=dropout,
                              position="learned", max_len=max_len, final_norm=False)
        return cls(transformer=t, vocab_size=vocab_size, **{"pooler": True, **kw})


class TextEncoder(nn.Module):
    """Embeddings + encoder stack with Hugging Face's call signature and output names.

    ``forward(input_ids (batch, seq), attention_mask (batch, seq) 1 = token 0 = padding, token_type_ids,
    inputs_embeds, output_hidden_states) -> BaseModelOutput`` with ``last_hidden_state`` (batch, seq, dim),
    ``pooler_output`` (batch, dim) if configured, ``hidden_states`` (num_layers + 1 tensors) on request.
    Reproduces ``BertModel`` and ``ElectraModel`` (see ``paperzoo.hf.bert``).
    """

    def __init__(self, cfg: TextEncoderConfig):
        super().__init__()
        self.cfg = cfg
        t = cfg.transformer
        absolute = t.position in ("learned", "sinusoidal")
        self.embeddings = TokenEmbeddings(cfg.vocab_size, t.dim, t.max_len, cfg.type_vocab_size, cfg.embedding_dim,
                                          position=t.position if absolute else "none", norm_eps=cfg.embed_norm_eps,
                                          dropout=t.dropout, pad_token_id=cfg.pad_token_id)
        self.encoder = TransformerEncoder(dataclasses.replace(t, position="none") if absolute else t)
        self.pooler = nn.Linear(t.dim, t.dim) if cfg.pooler else None

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                output_hidden_states: bool = False) -> BaseModelOutput:
        x = self.embeddings(input_ids, token_type_ids, inputs_embeds)
        if attention_mask is not None:
            if attention_mask.shape != x.shape[:2]:
                raise ValueError(f"attention_mask must have shape {tuple(x.shape[:2])}, "
                                 f"got {tuple(attention_mask.shape)}")
            attention_mask = as_keep_mask(attention_mask)
            if not torch.compiler.is_compiling() and bool(attention_mask.all()):  # no padding: keep SDPA on its
                attention_mask = None  # mask-free path (eager only: a data-dependent branch would break the graph)
        out = self.encoder(x, key_padding_mask=attention_mask, output_hidden_states=output_hidden_states)
        h = out.last_hidden_state
        pooled = torch.tanh(self.pooler(h[:, 0])) if self.pooler is not None else None
        return BaseModelOutput(last_hidden_state=h, pooler_output=pooled, hidden_states=out.hidden_states)
