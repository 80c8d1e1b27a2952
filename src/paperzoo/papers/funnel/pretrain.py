"""Funnel pretrained with the ELECTRA objective (paper sec. 4.1), reusing :mod:`paperzoo.papers.electra.objective`.

The discriminator is a full :class:`~.model.FunnelModel` (encoder + upsampling decoder, so every token gets a
replaced/original prediction); the generator is a standard ELECTRA MLM generator (a small Transformer,
``generator_size`` of the width, as ELECTRA recommends) whose word-embedding table is the discriminator's.
After pretraining, ``pretrainer.discriminator`` is the Funnel whose encoder is fine-tuned (drop the decoder:
copy its ``embeddings``/``encoder`` into a :class:`~.model.FunnelBase`, see :func:`base_from_pretrained`).
"""

from __future__ import annotations

from paperzoo.papers.electra.model import ElectraConfig, ElectraGenerator
from paperzoo.papers.electra.objective import ElectraPretrainer, ObjectiveConfig

from .model import FunnelBase, FunnelClassifier, FunnelConfig, FunnelModel

__all__ = ["build_pretrainer", "base_from_pretrained", "classifier_from_pretrained"]


def build_pretrainer(cfg: FunnelConfig, generator_size: float = 0.25, generator_depth: int | None = None,
                     max_len: int = 512, objective: ObjectiveConfig | None = None,
                     tie_embeddings: bool = True) -> ElectraPretrainer:
    """ELECTRA pretrainer with a :class:`FunnelModel` discriminator of ``cfg``.

    ``generator_depth`` defaults to the funnel's number of distinct encoder layers; ``max_len`` bounds the
    generator's learned positions (Funnel itself is relative and has no such bound).
    """
    if not isinstance(cfg, FunnelConfig):
        raise ValueError(f"cfg must be a FunnelConfig, got {type(cfg).__name__}")
    if not 0.0 < generator_size <= 1.0:
        raise ValueError(f"generator_size must be in (0, 1], got {generator_size}")
    depth = generator_depth or sum(cfg.block_sizes)
    ecfg = ElectraConfig(vocab_size=cfg.vocab_size, embedding_dim=cfg.d_model, dim=cfg.d_model, depth=depth,
                         num_heads=cfg.n_head, ffn_dim=cfg.d_ff, max_len=max_len, dropout=cfg.dropout,
                         attn_dropout=cfg.attention_dropout, pad_token_id=cfg.pad_token_id or 0,
                         generator_size=generator_size)
    disc = FunnelModel(cfg)
    gen = ElectraGenerator(ecfg.generator_config())
    if tie_embeddings:  # the only table Funnel has: word embeddings (no absolute positions, no type table)
        gen.body.embeddings.word = disc.embeddings.word_embeddings
    return ElectraPretrainer(gen, disc, objective or ObjectiveConfig(), dim=cfg.d_model, activation="gelu")


def base_from_pretrained(pretrainer: ElectraPretrainer) -> FunnelBase:
    """A decoder-free :class:`FunnelBase` carrying the pretrained discriminator's embeddings and encoder."""
    disc = pretrainer.discriminator
    if not isinstance(disc, FunnelModel):
        raise ValueError(f"expected a pretrainer whose discriminator is a FunnelModel, got {type(disc).__name__}")
    base = FunnelBase(disc.cfg)
    base.embeddings.load_state_dict(disc.embeddings.state_dict())
    base.encoder.load_state_dict(disc.encoder.state_dict())
    return base


def classifier_from_pretrained(pretrainer: ElectraPretrainer, num_labels: int) -> FunnelClassifier:
    """A :class:`FunnelClassifier` (fresh head) on the pretrained encoder, for fine-tuning."""
    base = base_from_pretrained(pretrainer)
    from dataclasses import replace

    clf = FunnelClassifier(replace(base.cfg, num_labels=num_labels))
    clf.funnel.load_state_dict(base.state_dict())
    return clf
