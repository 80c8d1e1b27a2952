"""Hugging Face interop for ELECTRA's heads, on top of the core ``ElectraModel`` converter (``paperzoo.hf.bert``).

=================================  =========================  =====================================================
HF class                           paperzoo class             head weights (HF name -> ours)
=================================  =========================  =====================================================
``ElectraForPreTraining``          :class:`ElectraDiscriminator`  ``discriminator_predictions.dense`` -> ``head.dense``,
                                                              ``.dense_prediction`` -> ``head.out``
``ElectraForMaskedLM``             :class:`ElectraGenerator`   ``generator_predictions.dense/LayerNorm`` ->
                                                              ``head.dense/norm``; ``generator_lm_head.bias`` ->
                                                              ``head.bias`` (its weight is the word embeddings
                                                              when ``tie_word_embeddings``, else ``head.weight``)
``ElectraForSequenceClassification``  :class:`ElectraClassifier`  ``classifier.dense/out_proj`` -> ``head.dense/out``
=================================  =========================  =====================================================

The encoder goes through :func:`paperzoo.hf.bert.bert_from_hf` / :func:`~paperzoo.hf.bert.bert_to_hf`; the
model's :class:`~.model.ElectraConfig` is read off the converted encoder (:func:`electra_config`, a generator's with
``generator_size=1``: HF describes the generator by its own sizes).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from paperzoo.hf import register_converter
from paperzoo.hf.bert import bert_from_hf, bert_to_hf
from paperzoo.nn.transformer import TextEncoderConfig

from .model import ElectraClassifier, ElectraConfig, ElectraDiscriminator, ElectraGenerator

__all__ = ["electra_config", "discriminator_from_hf", "discriminator_to_hf", "generator_from_hf", "generator_to_hf",
           "classifier_from_hf", "classifier_to_hf"]

_HEADS = {
    "ElectraForPreTraining": {"head.dense": "discriminator_predictions.dense",
                              "head.out": "discriminator_predictions.dense_prediction"},
    "ElectraForMaskedLM": {"head.dense": "generator_predictions.dense", "head.norm": "generator_predictions.LayerNorm"},
    "ElectraForSequenceClassification": {"head.dense": "classifier.dense", "head.out": "classifier.out_proj"},
}


def _copy_heads(dst: nn.Module, src: nn.Module, names: dict[str, str], theirs_to_ours: bool) -> None:
    with torch.no_grad():
        for ours, theirs in names.items():
            a, b = dst.get_submodule(theirs if not theirs_to_ours else ours), \
                src.get_submodule(ours if not theirs_to_ours else theirs)
            a.weight.copy_(b.weight)
            a.bias.copy_(b.bias)


def _wrap(ours: nn.Module, body: nn.Module, hf_model: Any, hf_name: str) -> nn.Module:
    """``ours`` with ``body`` (converted from ``hf_model.electra``) and the heads copied; HF's device, dtype, mode."""
    param = next(hf_model.parameters())
    ours = ours.to(device=param.device, dtype=param.dtype)
    ours.body = body
    _copy_heads(ours, hf_model, _HEADS[hf_name], theirs_to_ours=True)
    return ours.train(hf_model.training)


def electra_config(encoder: TextEncoderConfig) -> ElectraConfig:
    """The :class:`ElectraConfig` (``generator_size=1``) whose ``discriminator_config()`` is ``encoder``."""
    t = encoder.transformer
    cfg = ElectraConfig(vocab_size=encoder.vocab_size, embedding_dim=encoder.embedding_dim or t.dim, dim=t.dim,
                        num_layers=t.num_layers, num_heads=t.num_heads, ffn_dim=t.hidden_dim, max_len=t.max_len,
                        type_vocab_size=encoder.type_vocab_size, activation=t.activation, dropout=t.dropout,
                        attn_dropout=t.attn_dropout, norm_eps=t.norm_eps, pad_token_id=encoder.pad_token_id,
                        generator_size=1.0)
    if cfg.discriminator_config() != encoder:
        raise ValueError(f"this encoder is not ELECTRA-shaped (post-norm, learned positions, one LayerNorm eps): "
                         f"{encoder}")
    return cfg


def _check(hf_model: Any, name: str) -> None:
    if type(hf_model).__name__ != name and name not in [c.__name__ for c in type(hf_model).__mro__]:
        raise ValueError(f"expected a transformers.{name}, got {type(hf_model).__name__}")


def discriminator_from_hf(hf_model: Any) -> ElectraDiscriminator:
    """:class:`ElectraDiscriminator` with the weights of a ``transformers.ElectraForPreTraining``."""
    _check(hf_model, "ElectraForPreTraining")
    body = bert_from_hf(hf_model.electra)
    return _wrap(ElectraDiscriminator(electra_config(body.cfg)), body, hf_model, "ElectraForPreTraining")


def generator_from_hf(hf_model: Any) -> ElectraGenerator:
    """:class:`ElectraGenerator` with the weights of a ``transformers.ElectraForMaskedLM`` (tied or not)."""
    _check(hf_model, "ElectraForMaskedLM")
    word, lm = hf_model.electra.embeddings.word_embeddings.weight, hf_model.generator_lm_head.weight
    tied = lm is word or (lm.data_ptr() == word.data_ptr() and lm.shape == word.shape)
    body = bert_from_hf(hf_model.electra)
    ours = _wrap(ElectraGenerator(electra_config(body.cfg), tie_word_embeddings=tied), body, hf_model,
                 "ElectraForMaskedLM")
    with torch.no_grad():
        ours.head.bias.copy_(hf_model.generator_lm_head.bias)
        if not tied:
            ours.head.weight.copy_(lm)
    return ours


def classifier_from_hf(hf_model: Any) -> ElectraClassifier:
    """:class:`ElectraClassifier` with the weights of a ``transformers.ElectraForSequenceClassification``."""
    _check(hf_model, "ElectraForSequenceClassification")
    c = hf_model.config
    if getattr(c, "problem_type", None) == "multi_label_classification":
        raise ValueError("only single-label classification and regression convert (problem_type "
                         "'single_label_classification' or 'regression')")
    body = bert_from_hf(hf_model.electra)
    ours = ElectraClassifier(electra_config(body.cfg), c.num_labels, c.classifier_dropout)
    return _wrap(ours, body, hf_model, "ElectraForSequenceClassification")


def _hf_config(model: nn.Module, **extra: Any) -> tuple[Any, Any]:
    """(HF ElectraModel carrying the body's weights, its config with ``extra`` set)."""
    base = bert_to_hf(model.body)
    if type(base).__name__ != "ElectraModel":
        raise ValueError("to_hf needs an ELECTRA-shaped body (TextEncoderConfig.hf_class='ElectraModel')")
    cfg = base.config
    for k, v in extra.items():
        setattr(cfg, k, v)
    return base, cfg


def _finish(hf: Any, base: Any, model: nn.Module, name: str) -> Any:
    hf.electra.load_state_dict(base.state_dict(), strict=True)
    param = next(model.parameters())
    hf = hf.to(device=param.device, dtype=param.dtype)
    _copy_heads(hf, model, _HEADS[name], theirs_to_ours=False)
    return hf.train(model.training)


def discriminator_to_hf(model: ElectraDiscriminator) -> Any:
    """``transformers.ElectraForPreTraining`` with ``model``'s weights (head activation: ``activation``)."""
    import transformers

    base, cfg = _hf_config(model)
    return _finish(transformers.ElectraForPreTraining(cfg), base, model, "ElectraForPreTraining")


def generator_to_hf(model: ElectraGenerator) -> Any:
    """``transformers.ElectraForMaskedLM`` with ``model``'s weights (``tie_word_embeddings`` as the model's head)."""
    import transformers

    tied = model.head.weight is None
    base, cfg = _hf_config(model, tie_word_embeddings=tied)
    hf = _finish(transformers.ElectraForMaskedLM(cfg), base, model, "ElectraForMaskedLM")
    with torch.no_grad():
        hf.generator_lm_head.bias.copy_(model.head.bias)
        if tied:
            hf.generator_lm_head.weight = hf.electra.embeddings.word_embeddings.weight
        else:
            hf.generator_lm_head.weight.copy_(model.head.weight)
    return hf


def classifier_to_hf(model: ElectraClassifier) -> Any:
    """``transformers.ElectraForSequenceClassification`` with ``model``'s weights."""
    import transformers

    base, cfg = _hf_config(model, num_labels=model.num_labels, classifier_dropout=model.classifier_dropout)
    return _finish(transformers.ElectraForSequenceClassification(cfg), base, model, "ElectraForSequenceClassification")


register_converter("ElectraForPreTraining", ElectraDiscriminator, discriminator_from_hf, discriminator_to_hf)
register_converter("ElectraForMaskedLM", ElectraGenerator, generator_from_hf, generator_to_hf)
register_converter("ElectraForSequenceClassification", ElectraClassifier, classifier_from_hf, classifier_to_hf)
