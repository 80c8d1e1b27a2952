"""ELECTRA's networks (Clark et al. 2020): a small MLM generator, a replaced-token discriminator, a classifier.

All three are a BERT-style post-norm :class:`~paperzoo.nn.transformer.TextEncoder` (factorised embeddings:
tables of width ``embedding_dim``, projected to ``dim``) with a head:

* generator head (sec. 2, eq. 1): ``p_G(x_t | x) = softmax(e(x_t)^T LN(gelu(W h_t)))``, the output matrix tied to
  the word embeddings ``e``; :class:`ElectraGenerator` computes it only at the positions asked for (the masked
  ones) when ``positions`` is given, everywhere otherwise (as ``transformers.ElectraForMaskedLM``);
* discriminator head (eq. 2): ``D(x, t) = sigmoid(w^T act(W h_t))`` per token, :class:`ElectraDiscriminator`;
* classification head (fine-tuning): ``W_o gelu(W h_[CLS])`` with dropout, :class:`ElectraClassifier`.

Generator size (sec. 3.2, Table 7): hidden size, FFN size and heads are ``generator_size`` times the
discriminator's (official ``get_generator_config``: ``hidden = round(dim * size)``, ``ffn = 4 * hidden``,
``heads = max(1, hidden // 64)``). Weight sharing (sec. 3.2): ``tie="embeddings"`` (default, the paper's choice)
shares the token, position and type embeddings and the embedding LayerNorm; each network keeps its own projection
to its hidden size. ``tie="none"`` gives the generator its own embeddings of its hidden width; ``tie="all"`` shares
the whole encoder (requires ``generator_size = generator_layers = 1``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from paperzoo.nn.ffn import make_activation
from paperzoo.nn.outputs import ClassifierOutput
from paperzoo.nn.transformer import TextEncoder, TextEncoderConfig, TransformerConfig

__all__ = ["ElectraConfig", "MLMHead", "RTDHead", "ClassificationHead", "ElectraGenerator", "ElectraDiscriminator",
           "ElectraClassifier", "build_generator_and_discriminator", "init_weights", "mlm_config", "tie_embeddings",
           "TIES", "POSITIONS"]

TIES = ("embeddings", "none", "all")
POSITIONS = ("learned", "rotary", "t5")


@dataclass(frozen=True)
class ElectraConfig:
    """Discriminator architecture, generator size and weight sharing.

    Presets: ``tiny`` (tests), ``small`` (the recipes' laptop scale: emb 64, hidden 128, 4 layers, 2 heads, FFN
    512, generator 1/4) and the paper's sizes (Table 7): ``paper-small`` (ELECTRA-Small: emb 128, hidden 256, 12
    layers, 4 heads, generator 1/4; ``released=True`` gives the released model's generator as large as the
    discriminator), ``base`` (768, generator 1/3), ``large`` (1024, 24 layers, generator 1/4).

    ``position``: ``"learned"`` (the paper's: BERT's absolute table, added before the embedding LayerNorm),
    ``"rotary"`` (RoPE in every layer's attention) or ``"t5"`` (T5's bucketed relative bias, with the usual
    ``1/sqrt(d_head)`` scale: ELECTRA's ``N(0, 0.02)`` init is not T5's, see :func:`init_weights`); the relative
    schemes have no position table (the copy-task measurements in the README motivate them).
    """

    vocab_size: int = 30522
    embedding_dim: int = 128
    dim: int = 256
    num_layers: int = 12
    num_heads: int = 4
    ffn_dim: int = 1024
    max_len: int = 512
    type_vocab_size: int = 2
    activation: str = "gelu"
    dropout: float = 0.1
    attn_dropout: float = 0.1
    norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    generator_size: float = 0.25
    generator_layers: float = 1.0
    tie: str = "embeddings"
    position: str = "learned"

    def __post_init__(self):
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        if self.tie not in TIES:
            raise ValueError(f"tie must be one of {TIES}, got {self.tie!r}")
        if not 0.0 < self.generator_size <= 1.0 or not 0.0 < self.generator_layers <= 1.0:
            raise ValueError(f"generator_size and generator_layers must be in (0, 1], got {self.generator_size} "
                             f"and {self.generator_layers}")
        if self.tie == "all" and (self.generator_size != 1.0 or self.generator_layers != 1.0):
            raise ValueError("tie='all' shares the whole encoder: it needs generator_size=1.0 and generator_layers=1.0")
        if self.dim % self.num_heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by num_heads ({self.num_heads})")

    @classmethod
    def preset(cls, name: str, released: bool = False, **overrides) -> ElectraConfig:
        """A named size: 'tiny', 'small', 'paper-small', 'base' or 'large' (``released``: the released
        ELECTRA-Small's full-size generator)."""
        sizes = {
            "tiny": dict(embedding_dim=32, dim=64, num_layers=2, num_heads=2, ffn_dim=128, max_len=128,
                         vocab_size=1000, generator_size=0.5, dropout=0.0, attn_dropout=0.0),
            "small": dict(embedding_dim=64, dim=128, num_layers=4, num_heads=2, ffn_dim=512, max_len=128,
                          generator_size=0.25),
            "paper-small": dict(embedding_dim=128, dim=256, num_layers=12, num_heads=4, ffn_dim=1024, max_len=512,
                                generator_size=0.25),
            "base": dict(embedding_dim=768, dim=768, num_layers=12, num_heads=12, ffn_dim=3072,
                         generator_size=1 / 3),
            "large": dict(embedding_dim=1024, dim=1024, num_layers=24, num_heads=16, ffn_dim=4096,
                          generator_size=0.25),
        }
        if name not in sizes:
            raise ValueError(f"unknown ELECTRA preset {name!r}; valid: {', '.join(sizes)}")
        kw = sizes[name]
        if released:
            kw = {**kw, "generator_size": 1.0}
        return cls(**{**kw, **overrides})

    def _encoder(self, dim: int, num_layers: int, heads: int, ffn: int, emb: int | None) -> TextEncoderConfig:
        scale = (dim // heads) ** -0.5 if self.position == "t5" else None  # scaled q.k: not T5's init here
        t = TransformerConfig(dim=dim, num_layers=num_layers, num_heads=heads, ffn_dim=ffn, activation=self.activation,
                              norm="layernorm", norm_eps=self.norm_eps, prenorm=False, dropout=self.dropout,
                              attn_dropout=self.attn_dropout, position=self.position, max_len=self.max_len,
                              final_norm=False, attn_scale=scale)
        return TextEncoderConfig(transformer=t, vocab_size=self.vocab_size, type_vocab_size=self.type_vocab_size,
                                 embedding_dim=None if emb in (None, dim) else emb, pad_token_id=self.pad_token_id,
                                 embed_norm_eps=self.norm_eps, pooler=False, hf_class="ElectraModel")

    def discriminator_config(self) -> TextEncoderConfig:
        """The discriminator's (and the fine-tuned model's) encoder."""
        return self._encoder(self.dim, self.num_layers, self.num_heads, self.ffn_dim, self.embedding_dim)

    def generator_config(self) -> TextEncoderConfig:
        """The generator's encoder (official ``get_generator_config``)."""
        if self.generator_size == 1.0:
            dim, heads, ffn = self.dim, self.num_heads, self.ffn_dim
        else:
            dim = int(round(self.dim * self.generator_size))
            heads, ffn = max(1, dim // 64), 4 * dim
        num_layers = int(round(self.num_layers * self.generator_layers))
        emb = dim if self.tie == "none" else self.embedding_dim
        return self._encoder(dim, num_layers, heads, ffn, emb)


class MLMHead(nn.Module):
    """Generator head: ``h (n, dim) -> logits (n, vocab) = LN(gelu(W h)) @ E^T + b`` (E: the word embeddings).

    With ``tied=True`` the output matrix is passed to :meth:`forward` (the word-embedding table); otherwise the head
    owns ``weight`` (vocab, embedding_dim).
    """

    def __init__(self, dim: int, embedding_dim: int, vocab_size: int, eps: float = 1e-12, tied: bool = True):
        super().__init__()
        self.dense = nn.Linear(dim, embedding_dim)
        self.act = nn.GELU()  # HF ElectraGeneratorPredictions and the official code use gelu whatever the activation is
        self.norm = nn.LayerNorm(embedding_dim, eps=eps)
        self.weight = None if tied else nn.Parameter(torch.empty(vocab_size, embedding_dim).normal_(0, 0.02))
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, h: torch.Tensor, word_weight: torch.Tensor | None = None) -> torch.Tensor:
        w = self.weight if self.weight is not None else word_weight
        if w is None:
            raise ValueError("a tied MLMHead needs word_weight (vocab, embedding_dim)")
        return F.linear(self.norm(self.act(self.dense(h))), w, self.bias)


class RTDHead(nn.Module):
    """Discriminator head: ``h (..., dim) -> logits (...) = w^T act(W h) + b`` (eq. 2 before the sigmoid)."""

    def __init__(self, dim: int, activation: str = "gelu"):
        super().__init__()
        self.dense = nn.Linear(dim, dim)
        self.act = make_activation(activation)
        self.out = nn.Linear(dim, 1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.act(self.dense(h))).squeeze(-1)


class ClassificationHead(nn.Module):
    """Sentence head on the first token: ``(batch, seq, dim) -> (batch, labels)``; dropout, dense, gelu, dropout,
    out (the head of ``transformers.ElectraForSequenceClassification``)."""

    def __init__(self, dim: int, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.dense = nn.Linear(dim, dim)
        self.act = nn.GELU()
        self.out = nn.Linear(dim, num_labels)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.dropout(h[:, 0])
        return self.out(self.dropout(self.act(self.dense(x))))


def init_weights(module: nn.Module, std: float = 0.02) -> nn.Module:
    """BERT/ELECTRA initialisation: Linear and Embedding weights ~ N(0, std), biases 0, LayerNorm 1 and 0; the
    padding row of an embedding stays 0. Returns ``module``."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, std)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return module


def _example_inputs(config: ElectraConfig, batch: int = 2, seq: int = 8) -> dict[str, torch.Tensor]:
    """``input_ids`` (batch, seq) of ordinary tokens and an ``attention_mask`` whose last row ends in padding."""
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, config.vocab_size, (batch, seq), generator=g)
    attention_mask = torch.ones(batch, seq, dtype=torch.long)
    attention_mask[-1, seq // 2:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


class ElectraGenerator(nn.Module):
    """The MLM generator: :class:`TextEncoder` + :class:`MLMHead` (reproduces ``transformers.ElectraForMaskedLM``).

    Built from ``config.generator_config()`` (``generator_size`` of the discriminator). ``forward(input_ids (batch,
    seq), attention_mask, token_type_ids, inputs_embeds, labels, positions)``: ``positions`` (batch, seq) bool gives
    ``logits`` (n_selected, vocab) at those positions only (row-major order); without it ``logits`` is (batch, seq,
    vocab). ``labels`` (same shape as the logits' leading dims, -100 = ignore) adds the mean cross-entropy ``loss``.
    ``tie_word_embeddings=False`` gives the head its own output matrix (HF's untied generators).
    """

    config_class = ElectraConfig
    example_inputs = staticmethod(_example_inputs)

    def __init__(self, config: ElectraConfig, tie_word_embeddings: bool = True):
        super().__init__()
        _check_config(config, "ElectraGenerator")
        self.config = config
        enc = config.generator_config()
        self.body = TextEncoder(enc)
        e = enc.embedding_dim or enc.transformer.dim
        self.head = MLMHead(enc.transformer.dim, e, enc.vocab_size, enc.transformer.norm_eps,
                            tied=tie_word_embeddings)
        init_weights(self)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, positions: torch.Tensor | None = None,
                output_hidden_states: bool = False) -> ClassifierOutput:
        out = self.body(input_ids, attention_mask, token_type_ids, inputs_embeds, output_hidden_states)
        h = out.last_hidden_state  # (batch, seq, dim)
        _check_positions(positions, h.shape[:2])
        logits = self.head(h[positions] if positions is not None else h, self.body.embeddings.word.weight)
        loss = None
        if labels is not None:
            _check_labels(labels, logits.shape[:-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        return ClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class ElectraDiscriminator(nn.Module):
    """The discriminator: :class:`TextEncoder` + :class:`RTDHead` (reproduces ``transformers.ElectraForPreTraining``).

    ``forward(...) -> logits (batch, seq)``, ``> 0`` means "replaced"; ``labels`` (batch, seq) in {0, 1} add
    HF's loss: binary cross-entropy averaged over the tokens with ``attention_mask == 1``. Pretraining uses its
    parts: ``ElectraPretrainer(generator, disc.body, disc.head, objective)``.
    """

    config_class = ElectraConfig
    example_inputs = staticmethod(_example_inputs)

    def __init__(self, config: ElectraConfig):
        super().__init__()
        _check_config(config, "ElectraDiscriminator")
        self.config = config
        enc = config.discriminator_config()
        self.body = TextEncoder(enc)
        self.head = RTDHead(enc.transformer.dim, enc.transformer.activation)
        init_weights(self)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_hidden_states: bool = False) -> ClassifierOutput:
        out = self.body(input_ids, attention_mask, token_type_ids, inputs_embeds, output_hidden_states)
        logits = self.head(out.last_hidden_state)  # (batch, seq)
        loss = None
        if labels is not None:
            _check_labels(labels, logits.shape)
            keep = attention_mask.bool() if attention_mask is not None else torch.ones_like(labels, dtype=torch.bool)
            loss = F.binary_cross_entropy_with_logits(logits[keep], labels[keep].to(logits.dtype))
        return ClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


class ElectraClassifier(nn.Module):
    """Fine-tuning model: :class:`TextEncoder` + :class:`ClassificationHead` (``ElectraForSequenceClassification``).

    The encoder is the discriminator's (``config.discriminator_config()``). ``forward(...) -> logits (batch,
    num_labels)``; ``labels`` (batch,) int add the cross-entropy ``loss`` (float labels with ``num_labels == 1``:
    mean squared error, as HF's regression).
    """

    config_class = ElectraConfig
    example_inputs = staticmethod(_example_inputs)

    def __init__(self, config: ElectraConfig, num_labels: int = 2, classifier_dropout: float | None = None):
        super().__init__()
        _check_config(config, "ElectraClassifier")
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.config, self.num_labels = config, num_labels
        self.body = TextEncoder(config.discriminator_config())
        p = config.dropout if classifier_dropout is None else classifier_dropout
        self.classifier_dropout = classifier_dropout
        self.head = ClassificationHead(config.dim, num_labels, p)
        init_weights(self)

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, output_hidden_states: bool = False) -> ClassifierOutput:
        out = self.body(input_ids, attention_mask, token_type_ids, inputs_embeds, output_hidden_states)
        logits = self.head(out.last_hidden_state)  # (batch, num_labels)
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
            else:
                loss = F.cross_entropy(logits, labels.long())
        return ClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


def tie_embeddings(generator: TextEncoder, discriminator: TextEncoder) -> None:
    """Share word, position and type tables and the embedding LayerNorm of ``discriminator`` with ``generator``.

    Each keeps its own ``embeddings.project`` (to its own hidden size), as the official code.
    """
    g, d = generator.embeddings, discriminator.embeddings
    if g.embedding_dim != d.embedding_dim or g.vocab_size != d.vocab_size:
        raise ValueError(f"tied embeddings need equal embedding_dim and vocab_size, got "
                         f"{g.embedding_dim}/{g.vocab_size} and {d.embedding_dim}/{d.vocab_size}")
    g.word, g.position, g.token_type, g.norm = d.word, d.position, d.token_type, d.norm


def build_generator_and_discriminator(config: ElectraConfig) -> tuple[ElectraGenerator, ElectraDiscriminator]:
    """The generator and discriminator of ``config`` with its weight sharing (``config.tie``)."""
    disc = ElectraDiscriminator(config)
    gen = ElectraGenerator(config)
    if config.tie == "embeddings":
        tie_embeddings(gen.body, disc.body)
    elif config.tie == "all":
        gen.body = disc.body
    return gen, disc


def mlm_config(config: ElectraConfig) -> ElectraConfig:
    """The BERT-style baseline: a generator the size of the discriminator (``ElectraGenerator(mlm_config(c))``),
    whose encoder is ``c.discriminator_config()`` (the weight-sharing setting has nothing to share)."""
    return dataclasses.replace(config, generator_size=1.0, generator_layers=1.0, tie="embeddings")


# ----------------------------------------------------------------------------------------------------- checks
def _check_config(config: ElectraConfig, who: str) -> None:
    if not isinstance(config, ElectraConfig):
        raise ValueError(f"{who} takes an ElectraConfig (e.g. ElectraConfig.preset('tiny')), got "
                         f"{type(config).__name__}")


def _check_positions(positions: torch.Tensor | None, shape: torch.Size) -> None:
    if positions is not None and (positions.dtype != torch.bool or positions.shape != shape):
        raise ValueError(f"positions must be a bool (batch, seq) tensor of shape {tuple(shape)}, "
                         f"got {positions.dtype} of shape {tuple(positions.shape)}")


def _check_labels(labels: torch.Tensor, shape: torch.Size) -> None:
    if labels.shape != shape:
        raise ValueError(f"labels must have shape {tuple(shape)}, got {tuple(labels.shape)}")
