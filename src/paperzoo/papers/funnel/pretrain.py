"""Funnel pretrained with the ELECTRA objective (paper sec. 4.1), reusing :mod:`paperzoo.papers.electra.objective`.

The discriminator is a full :class:`~.model.FunnelModel` (encoder + upsampling decoder, so every token gets a
replaced/original prediction); the generator is a standard ELECTRA MLM generator (a small Transformer,
``generator_size`` of the width, as ELECTRA recommends) whose word-embedding table is the discriminator's.
After pretraining, ``pretrainer.discriminator_body`` is the Funnel whose encoder is fine-tuned (drop the decoder:
copy its ``embeddings``/``encoder`` into a :class:`~.model.FunnelBase`, see :func:`base_from_pretrained`).

A single-block config without decoder layers (``blocks="12"``, ``num_decoder_layers=0``) never pools: it is a
standard Transformer encoder with the same relative attention, the recipe's baseline. Its discriminator is a plain
:class:`~.model.FunnelBase` (full-length output), since an upsampling decoder would have nothing to undo.

The shared word table is initialised as ELECTRA's (``N(0, 0.02^2)``), not as the official Funnel's ``N(0, 1)``: Funnel
LayerNorms its embeddings, so the scale is free there, but the generator's logits are computed with this table; at
``N(0, 1)`` they are ~50x ELECTRA's, its MLM loss stays above ``ln V`` and its samples stay easy to spot by id alone
(``build_pretrainer(..., embedding_std=None)`` restores it).
"""

from __future__ import annotations

from dataclasses import replace

from paperzoo.papers.electra.model import ElectraConfig, ElectraGenerator, RTDHead, init_weights
from paperzoo.papers.electra.objective import ElectraPretrainer, ObjectiveConfig

from .model import FunnelBase, FunnelClassifier, FunnelConfig, FunnelModel

ELECTRA_EMBEDDING_STD = 0.02  # electra.model.init_weights' std, the shared BERT/ELECTRA init

__all__ = ["ELECTRA_EMBEDDING_STD", "build_pretrainer", "base_from_pretrained", "classifier_from_pretrained",
           "is_standard", "standard_config"]


def is_standard(cfg: FunnelConfig) -> bool:
    """True for a config that never pools and has no decoder: a standard Transformer encoder."""
    return len(cfg.block_sizes) == 1 and cfg.num_decoder_layers == 0


def standard_config(cfg: FunnelConfig, depth: int) -> FunnelConfig:
    """The standard Transformer of ``cfg``'s width (same attention, FFN, norms): one block of ``depth`` layers, no
    pooling, no decoder."""
    _check_depth(depth, "depth")
    return replace(cfg, blocks=str(depth), num_decoder_layers=0)


def build_pretrainer(cfg: FunnelConfig, generator_size: float = 0.25, generator_depth: int | None = None,
                     max_len: int = 512, objective: ObjectiveConfig | None = None,
                     tie_embeddings: bool = True, embedding_std: float | None = ELECTRA_EMBEDDING_STD
                     ) -> ElectraPretrainer:
    """ELECTRA pretrainer with a :class:`FunnelModel` discriminator of ``cfg`` (a :class:`FunnelBase` when
    :func:`is_standard`).

    ``generator_depth`` defaults to the funnel's number of distinct encoder layers; ``max_len`` bounds the
    generator's learned positions (Funnel itself is relative and has no such bound). ``embedding_std``: the
    discriminator's word table is re-initialised ``N(0, embedding_std^2)`` (padding row 0), ELECTRA's 0.02 by
    default; ``None`` keeps the official Funnel init ``N(0, 1)``, which, tied as the generator's output matrix,
    gives generator logits ~50x ELECTRA's and a miscalibrated generator (see the README).
    """
    _check_build(cfg, generator_size)
    depth = generator_depth or sum(cfg.block_sizes)
    _check_depth(depth, "generator_depth")
    ecfg = ElectraConfig(vocab_size=cfg.vocab_size, embedding_dim=cfg.dim, dim=cfg.dim, num_layers=depth,
                         num_heads=cfg.num_heads, ffn_dim=cfg.ffn_dim, max_len=max_len, dropout=cfg.dropout,
                         attn_dropout=cfg.attn_dropout, pad_token_id=cfg.pad_token_id or 0,
                         generator_size=generator_size)
    disc = FunnelBase(cfg) if is_standard(cfg) else FunnelModel(cfg)
    if embedding_std is not None:  # ELECTRA's init for the table the generator's logits are computed with
        _check_std(embedding_std)
        init_weights(disc.embeddings.word_embeddings, embedding_std)
    gen = ElectraGenerator(ecfg)
    if tie_embeddings:  # the only table Funnel has: word embeddings (no absolute positions, no type table)
        gen.body.embeddings.word = disc.embeddings.word_embeddings
    return ElectraPretrainer(gen, disc, init_weights(RTDHead(cfg.dim, "gelu")), objective or ObjectiveConfig())


def base_from_pretrained(pretrainer: ElectraPretrainer) -> FunnelBase:
    """A decoder-free :class:`FunnelBase` carrying the pretrained discriminator's embeddings and encoder."""
    disc = pretrainer.discriminator_body
    _check_discriminator(disc)
    base = FunnelBase(disc.config)
    base.embeddings.load_state_dict(disc.embeddings.state_dict())
    base.encoder.load_state_dict(disc.encoder.state_dict())
    return base


def classifier_from_pretrained(pretrainer: ElectraPretrainer, num_labels: int) -> FunnelClassifier:
    """A :class:`FunnelClassifier` (fresh head) on the pretrained encoder, for fine-tuning."""
    base = base_from_pretrained(pretrainer)
    clf = FunnelClassifier(replace(base.config, num_labels=num_labels))
    clf.funnel.load_state_dict(base.state_dict())
    return clf


# -------------------------------------------------------------------------------------------------------- checks
def _check_depth(depth, name: str) -> None:
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"{name} must be an int >= 1, got {depth!r}")


def _check_std(std) -> None:
    if not isinstance(std, int | float) or not std > 0:
        raise ValueError(f"embedding_std must be a number > 0 (or None for the official N(0, 1)), got {std!r}")


def _check_build(cfg, generator_size: float) -> None:
    if not isinstance(cfg, FunnelConfig):
        raise ValueError(f"cfg must be a FunnelConfig, got {type(cfg).__name__}")
    if not 0.0 < generator_size <= 1.0:
        raise ValueError(f"generator_size must be in (0, 1], got {generator_size}")


def _check_discriminator(disc) -> None:
    if not isinstance(disc, FunnelModel | FunnelBase):
        raise ValueError("expected a pretrainer whose discriminator is a FunnelModel or FunnelBase, got "
                         f"{type(disc).__name__}")
