"""Hugging Face ``BertModel`` / ``ElectraModel`` <-> paperzoo :class:`~paperzoo.nn.transformer.TextEncoder`.

Both are post-norm encoders with learned absolute positions and token types; ELECTRA factorises the embeddings
(``embedding_size`` < ``hidden_size`` plus ``embeddings_project``) and has no pooler. The only change of layout is
q, k, v: HF keeps three Linears, paperzoo one fused ``qkv`` whose rows are ``[query; key; value]``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..nn.ffn import ACTIVATIONS
from ..nn.transformer import TextEncoder, TextEncoderConfig, TransformerConfig
from . import register_converter

__all__ = ["config_from_hf", "bert_from_hf", "bert_to_hf"]

# paperzoo name <- HF name (per layer, after "encoder.layers.{i}." / "encoder.layer.{i}.")
_LAYER = {
    "attn.out": "attention.output.dense",
    "attn_norm": "attention.output.LayerNorm",
    "ffn.fc1": "intermediate.dense",
    "ffn.fc2": "output.dense",
    "ffn_norm": "output.LayerNorm",
}
_EMBED = {
    "embeddings.word": "embeddings.word_embeddings",
    "embeddings.position": "embeddings.position_embeddings",
    "embeddings.token_type": "embeddings.token_type_embeddings",
    "embeddings.norm": "embeddings.LayerNorm",
    "embeddings.project": "embeddings_project",
    "pooler": "pooler.dense",
}
_QKV = ("query", "key", "value")


def config_from_hf(hf_config: Any, hf_class: str, pooler: bool) -> TextEncoderConfig:
    """The :class:`TextEncoderConfig` of a ``BertConfig``/``ElectraConfig``; unsupported variants raise ValueError."""
    c = hf_config
    if getattr(c, "is_decoder", False) or getattr(c, "add_cross_attention", False):
        raise ValueError("only encoder BERT/ELECTRA models convert (is_decoder=False, add_cross_attention=False)")
    if getattr(c, "position_embedding_type", "absolute") not in ("absolute", None):
        raise ValueError(f"only absolute position embeddings convert, got {c.position_embedding_type!r}")
    if c.hidden_size % c.num_attention_heads:
        raise ValueError(f"hidden_size ({c.hidden_size}) must be divisible by num_attention_heads "
                         f"({c.num_attention_heads})")
    if not isinstance(c.hidden_act, str) or c.hidden_act not in ACTIVATIONS:
        raise ValueError(f"hidden_act must be one of {sorted(ACTIVATIONS)}, got {c.hidden_act!r}")
    t = TransformerConfig(
        dim=c.hidden_size, num_layers=c.num_hidden_layers, num_heads=c.num_attention_heads, ffn_dim=c.intermediate_size,
        activation=c.hidden_act, norm="layernorm", norm_eps=c.layer_norm_eps, prenorm=False,
        dropout=c.hidden_dropout_prob, attn_dropout=c.attention_probs_dropout_prob, position="learned",
        max_len=c.max_position_embeddings, final_norm=False)
    emb = getattr(c, "embedding_size", None)
    return TextEncoderConfig(transformer=t, vocab_size=c.vocab_size, type_vocab_size=c.type_vocab_size,
                             embedding_dim=None if emb in (None, c.hidden_size) else emb,
                             pad_token_id=c.pad_token_id, embed_norm_eps=c.layer_norm_eps, pooler=pooler,
                             hf_class=hf_class)


def _to_ours(sd: dict[str, torch.Tensor], depth: int) -> dict[str, torch.Tensor]:
    out = {}
    for ours, theirs in _EMBED.items():
        for p in ("weight", "bias"):
            if f"{theirs}.{p}" in sd:
                out[f"{ours}.{p}"] = sd[f"{theirs}.{p}"]
    for i in range(depth):
        a, b = f"encoder.layers.{i}.", f"encoder.layer.{i}."
        for ours, theirs in _LAYER.items():
            for p in ("weight", "bias"):
                out[f"{a}{ours}.{p}"] = sd[f"{b}{theirs}.{p}"]
        for p in ("weight", "bias"):
            out[f"{a}attn.qkv.{p}"] = torch.cat([sd[f"{b}attention.self.{n}.{p}"] for n in _QKV])
    return out


def _to_theirs(sd: dict[str, torch.Tensor], depth: int, dim: int) -> dict[str, torch.Tensor]:
    out = {}
    for ours, theirs in _EMBED.items():
        for p in ("weight", "bias"):
            if f"{ours}.{p}" in sd:
                out[f"{theirs}.{p}"] = sd[f"{ours}.{p}"]
    for i in range(depth):
        a, b = f"encoder.layers.{i}.", f"encoder.layer.{i}."
        for ours, theirs in _LAYER.items():
            for p in ("weight", "bias"):
                out[f"{b}{theirs}.{p}"] = sd[f"{a}{ours}.{p}"]
        for p in ("weight", "bias"):
            for n, w in zip(_QKV, sd[f"{a}attn.qkv.{p}"].split(dim), strict=True):
                out[f"{b}attention.self.{n}.{p}"] = w
    return out


def bert_from_hf(hf_model: Any) -> TextEncoder:
    """A :class:`TextEncoder` with the weights (copied) and train/eval mode of an HF BertModel/ElectraModel."""
    name = type(hf_model).__name__
    pooler = getattr(hf_model, "pooler", None) is not None
    cfg = config_from_hf(hf_model.config, "ElectraModel" if "Electra" in name else "BertModel", pooler)
    param = next(hf_model.parameters())
    model = TextEncoder(cfg).to(device=param.device, dtype=param.dtype)
    sd = {k: v.detach().clone() for k, v in hf_model.state_dict().items()}
    model.load_state_dict(_to_ours(sd, cfg.transformer.num_layers), strict=True)
    return model.train(hf_model.training)


def bert_to_hf(model: TextEncoder) -> Any:
    """The HF model (``cfg.hf_class``, default BertModel; sdpa attention) with ``model``'s weights and mode."""
    import transformers

    cfg, t = model.cfg, model.cfg.transformer
    hf_class = cfg.hf_class or ("ElectraModel" if cfg.embedding_dim else "BertModel")
    if t.prenorm or t.position != "learned" or t.norm != "layernorm" or t.glu or t.causal or t.use_final_norm \
            or t.attn_scale is not None or not t.bias or cfg.embed_norm_eps is None:
        raise ValueError("to_hf needs a BERT-shaped TextEncoder: post-norm LayerNorm, learned positions, "
                         "plain MLP with biases, default scale, no final norm, an embedding norm")
    common = dict(vocab_size=cfg.vocab_size, hidden_size=t.dim, num_hidden_layers=t.num_layers,
                  num_attention_heads=t.num_heads, intermediate_size=t.hidden_dim, hidden_act=t.activation,
                  hidden_dropout_prob=t.dropout, attention_probs_dropout_prob=t.attn_dropout,
                  max_position_embeddings=t.max_len, type_vocab_size=cfg.type_vocab_size,
                  layer_norm_eps=t.norm_eps, pad_token_id=cfg.pad_token_id)
    if cfg.embed_norm_eps != t.norm_eps:
        raise ValueError(f"HF uses one layer_norm_eps; got embed_norm_eps={cfg.embed_norm_eps} and "
                         f"norm_eps={t.norm_eps}")
    if hf_class == "ElectraModel":
        if cfg.pooler:
            raise ValueError("ElectraModel has no pooler; build the TextEncoder with pooler=False")
        hf_cfg = transformers.ElectraConfig(embedding_size=cfg.embedding_dim or t.dim, **common)
        hf = transformers.ElectraModel(hf_cfg)
    elif hf_class == "BertModel":
        if cfg.embedding_dim not in (None, t.dim):
            raise ValueError("BertModel has no factorised embeddings; use hf_class='ElectraModel'")
        hf = transformers.BertModel(transformers.BertConfig(**common), add_pooling_layer=cfg.pooler)
    else:
        raise ValueError(f"hf_class must be 'BertModel' or 'ElectraModel', got {hf_class!r}")
    param = next(model.parameters())
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    hf.load_state_dict(_to_theirs(sd, t.num_layers, t.dim), strict=True)
    return hf.to(device=param.device, dtype=param.dtype).train(model.training)


register_converter("BertModel", TextEncoder, bert_from_hf, bert_to_hf)
register_converter("ElectraModel", None, bert_from_hf)
