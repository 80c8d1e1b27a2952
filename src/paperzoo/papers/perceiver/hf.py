"""Hugging Face interop: ``PerceiverModel`` (text/bytes preprocessor, or none) and ``PerceiverForMaskedLM``.

``from_hf(hf)`` -> :class:`~.model.Perceiver` with ``scheme="io"`` carrying the same weights; ``to_hf(model)``
goes back. Layout mapping: HF's separate ``query``/``key``/``value`` become our fused ``kv`` (cross-attention,
``[k | v]``) and ``qkv`` (self-attention, ``[q | k | v]``); ``attention.output.dense`` -> ``attn.out``;
``attention.self.layernorm1/2`` -> ``norm_q``/``norm_kv``; ``layernorm`` -> ``norm_ff``; ``mlp.dense1/2`` ->
``ff.fc1/fc2``. The MLM decoder's trainable position encoding -> the decoder's learned queries, and
``embedding_decoder.bias`` -> the tied-logit bias. HF resolves ``qk_channels=None`` with
``cross_attention_shape_for_attention`` ("kv": the input width, "q": the latent width); we store the resolved
widths explicitly. ``transformers`` is imported inside the functions only.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from paperzoo.hf import register_converter

from .model import Perceiver, PerceiverConfig

__all__ = ["perceiver_from_hf", "perceiver_to_hf"]


def _layer_map(prefix: str, ours: str, cross: bool) -> list[tuple[str, str]]:
    """(our key, HF key) for the norms, output projection and MLP of one PerceiverLayer."""
    pairs = [("norm_q", "attention.self.layernorm1"), ("attn.out", "attention.output.dense"),
             ("norm_ff", "layernorm"), ("ff.fc1", "mlp.dense1"), ("ff.fc2", "mlp.dense2")]
    if cross:
        pairs.append(("norm_kv", "attention.self.layernorm2"))
    return [(f"{ours}.{a}.{t}", f"{prefix}.{b}.{t}") for a, b in pairs for t in ("weight", "bias")]


def _layers(model: Perceiver, hf_prefix: str = "") -> list[tuple[str, str, bool]]:
    """(our layer prefix, HF layer prefix, is_cross) for every distinct layer."""
    p = hf_prefix
    out = [("encoder.cross.0", f"{p}encoder.cross_attention", True)]
    out += [(f"encoder.latent.0.{i}", f"{p}encoder.self_attends.{i}", False)
            for i in range(model.config.self_per_block)]
    if model.config.output == "mlm":
        out.append(("decoder.decoder.layer", f"{p}decoder.decoding_cross_attention", True))
    return out


def _convert_config(hf_cfg, kind: str, text: bool) -> PerceiverConfig:
    d, dm = hf_cfg.d_latents, hf_cfg.d_model
    if hf_cfg.qk_channels is None:
        cross_qk = dm if hf_cfg.cross_attention_shape_for_attention == "kv" else d
    else:
        cross_qk = hf_cfg.qk_channels
    self_qk = hf_cfg.qk_channels or d
    self_v = hf_cfg.v_channels or self_qk
    if self_v != d:
        raise ValueError(f"HF Perceiver self-attention needs v_channels == d_latents ({d}), got {self_v}")
    act = hf_cfg.hidden_act
    if not isinstance(act, str):
        raise ValueError(f"hidden_act must be a string name, got {act!r}")
    common = dict(num_latents=hf_cfg.num_latents, latent_dim=d, num_blocks=hf_cfg.num_blocks,
                  self_per_block=hf_cfg.num_self_attends_per_block, self_heads=hf_cfg.num_self_attention_heads,
                  cross_heads=hf_cfg.num_cross_attention_heads, cross_qk_dim=cross_qk,
                  cross_v_dim=hf_cfg.v_channels or cross_qk, self_qk_dim=self_qk, self_v_dim=self_v,
                  self_widening=hf_cfg.self_attention_widening_factor,
                  cross_widening=hf_cfg.cross_attention_widening_factor, query_residual=hf_cfg.use_query_residual,
                  activation=act, scheme="io", hf_class=kind)
    if kind == "PerceiverForMaskedLM":
        base = PerceiverConfig.hf_mlm(vocab_size=hf_cfg.vocab_size, max_len=hf_cfg.max_position_embeddings,
                                      byte_dim=dm)
        return replace(base, **common)
    if text:
        return PerceiverConfig(input="bytes", input_shape=(hf_cfg.max_position_embeddings,), position="learned",
                               vocab_size=hf_cfg.vocab_size, byte_dim=dm, output="none", **common)
    return PerceiverConfig(input="features", input_shape=(1,), input_dim=dm, position="none", output="none",
                           **common)


def perceiver_from_hf(hf) -> Perceiver:
    """A :class:`Perceiver` with the weights of HF ``PerceiverModel`` (text preprocessor or none, no decoder) or
    ``PerceiverForMaskedLM``; same train/eval mode."""
    from transformers.models.perceiver import modeling_perceiver as mp

    kind = type(hf).__name__
    base = hf.perceiver if kind == "PerceiverForMaskedLM" else hf
    if kind != "PerceiverForMaskedLM":
        if base.decoder is not None or base.output_postprocessor is not None:
            raise ValueError("from_hf supports PerceiverModel without decoder/postprocessor (use "
                             "PerceiverForMaskedLM for the byte decoder)")
        if base.input_preprocessor is not None and not isinstance(base.input_preprocessor,
                                                                  mp.PerceiverTextPreprocessor):
            raise ValueError(f"from_hf supports PerceiverModel with PerceiverTextPreprocessor or no preprocessor, "
                             f"got {type(base.input_preprocessor).__name__}")
    text = base.input_preprocessor is not None
    cfg = _convert_config(hf.config, "PerceiverForMaskedLM" if kind == "PerceiverForMaskedLM" else "PerceiverModel",
                          text)
    model = Perceiver(cfg)
    sd = hf.state_dict()
    pre = "perceiver." if kind == "PerceiverForMaskedLM" else ""
    new = {"encoder.latents": sd[f"{pre}embeddings.latents"]}
    if text:
        new["adapter.embed.weight"] = sd[f"{pre}input_preprocessor.embeddings.weight"]
        new["adapter.pos"] = sd[f"{pre}input_preprocessor.position_embeddings.weight"]
    if kind == "PerceiverForMaskedLM":
        new["decoder.decoder.query"] = sd[f"{pre}decoder.output_position_encodings.position_embeddings"]
        new["decoder.bias"] = sd["embedding_decoder.bias"]
    for ours, theirs, cross in _layers(model, pre):
        new.update({a: sd[b] for a, b in _layer_map(theirs, ours, cross)})
        s = f"{theirs}.attention.self"
        if cross:
            new[f"{ours}.attn.q.weight"], new[f"{ours}.attn.q.bias"] = sd[f"{s}.query.weight"], sd[f"{s}.query.bias"]
            new[f"{ours}.attn.kv.weight"] = torch.cat([sd[f"{s}.key.weight"], sd[f"{s}.value.weight"]])
            new[f"{ours}.attn.kv.bias"] = torch.cat([sd[f"{s}.key.bias"], sd[f"{s}.value.bias"]])
        else:
            new[f"{ours}.attn.qkv.weight"] = torch.cat([sd[f"{s}.{n}.weight"] for n in ("query", "key", "value")])
            new[f"{ours}.attn.qkv.bias"] = torch.cat([sd[f"{s}.{n}.bias"] for n in ("query", "key", "value")])
    model.load_state_dict(new, strict=True)
    return model.train(hf.training)


def _hf_config(cfg: PerceiverConfig):
    import transformers

    if cfg.scheme != "io" or cfg.input not in ("bytes", "features") or cfg.output not in ("mlm", "none"):
        raise ValueError(f"to_hf needs scheme='io', input 'bytes'/'features', output 'mlm'/'none'; got "
                         f"scheme={cfg.scheme!r}, input={cfg.input!r}, output={cfg.output!r}")
    if cfg.input == "bytes" and cfg.position != "learned":
        raise ValueError(f"to_hf needs learned (added) byte positions, got position={cfg.position!r}")
    d = cfg.latent_dim
    dm = cfg.byte_dim if cfg.input == "bytes" else cfg.input_dim
    self_qk, self_v = cfg.self_qk_dim or d, cfg.self_v_dim or cfg.self_qk_dim or d
    cross_qk = cfg.cross_qk_dim or dm
    cross_v = cfg.cross_v_dim or cross_qk
    if self_v != d:
        raise ValueError(f"HF needs self_v_dim == latent_dim ({d}), got {self_v}")
    if self_qk == d and cross_v == cross_qk and cross_qk in (dm, d):
        qk = v = None
        shape = "kv" if cross_qk == dm else "q"
    elif self_qk == cross_qk and cross_v == self_v:
        qk, v, shape = self_qk, self_v, "kv"
    else:
        raise ValueError(f"HF shares qk/v widths between cross- and self-attention; got cross ({cross_qk}, {cross_v}) "
                         f"and self ({self_qk}, {self_v})")
    if cfg.output == "mlm" and (cfg.decoder_heads, cfg.decoder_qk_dim, cfg.decoder_v_dim, cfg.decoder_widening,
                                cfg.decoder_query_residual, cfg.output_positions) != (
                                    8, 256, dm, 1, False, cfg.input_shape[0]):
        raise ValueError("HF's MLM decoder is fixed: 8 heads, qk 256, v = d_model, widening 1, no query "
                         "residual, max_len queries; use PerceiverConfig.hf_mlm")
    return transformers.PerceiverConfig(
        num_latents=cfg.num_latents, d_latents=d, d_model=dm, num_blocks=cfg.num_blocks,
        num_self_attends_per_block=cfg.self_per_block, num_self_attention_heads=cfg.self_heads,
        num_cross_attention_heads=cfg.cross_heads, qk_channels=qk, v_channels=v,
        cross_attention_shape_for_attention=shape, self_attention_widening_factor=cfg.self_widening,
        cross_attention_widening_factor=cfg.cross_widening, hidden_act=cfg.activation,
        attention_probs_dropout_prob=cfg.attn_dropout, use_query_residual=cfg.query_residual,
        vocab_size=cfg.vocab_size, max_position_embeddings=cfg.input_shape[0])


def perceiver_to_hf(model: Perceiver):
    """The HF ``PerceiverForMaskedLM`` or ``PerceiverModel`` (with text preprocessor if bytes) of ``model``."""
    import transformers
    from transformers.models.perceiver import modeling_perceiver as mp

    cfg = model.config
    hf_cfg = _hf_config(cfg)
    if cfg.output == "mlm":
        hf = transformers.PerceiverForMaskedLM(hf_cfg)
    else:
        pre = mp.PerceiverTextPreprocessor(hf_cfg) if cfg.input == "bytes" else None
        hf = transformers.PerceiverModel(hf_cfg, input_preprocessor=pre)
    # invert from_hf's mapping by converting the fresh HF model and matching keys
    template = perceiver_from_hf(hf)
    ours = model.state_dict()
    if set(ours) != set(template.state_dict()):
        raise ValueError("this Perceiver's parameters do not match the HF layout")
    sd = hf.state_dict()
    pre = "perceiver." if cfg.output == "mlm" else ""
    out = {f"{pre}embeddings.latents": ours["encoder.latents"]}
    if cfg.input == "bytes":
        out[f"{pre}input_preprocessor.embeddings.weight"] = ours["adapter.embed.weight"]
        out[f"{pre}input_preprocessor.position_embeddings.weight"] = ours["adapter.pos"]
    if cfg.output == "mlm":
        out[f"{pre}decoder.output_position_encodings.position_embeddings"] = ours["decoder.decoder.query"]
        out["embedding_decoder.bias"] = ours["decoder.bias"]
    for o, t, cross in _layers(model, pre):
        out.update({b: ours[a] for a, b in _layer_map(t, o, cross)})
        s = f"{t}.attention.self"
        if cross:
            qk = sd[f"{s}.key.weight"].shape[0]
            out[f"{s}.query.weight"], out[f"{s}.query.bias"] = ours[f"{o}.attn.q.weight"], ours[f"{o}.attn.q.bias"]
            for n, part in (("key", slice(0, qk)), ("value", slice(qk, None))):
                out[f"{s}.{n}.weight"] = ours[f"{o}.attn.kv.weight"][part]
                out[f"{s}.{n}.bias"] = ours[f"{o}.attn.kv.bias"][part]
        else:
            qk = sd[f"{s}.query.weight"].shape[0]
            for n, part in (("query", slice(0, qk)), ("key", slice(qk, 2 * qk)), ("value", slice(2 * qk, None))):
                out[f"{s}.{n}.weight"] = ours[f"{o}.attn.qkv.weight"][part]
                out[f"{s}.{n}.bias"] = ours[f"{o}.attn.qkv.bias"][part]
    missing = set(sd) - set(out)
    if missing:
        raise ValueError(f"to_hf could not fill {sorted(missing)}")
    hf.load_state_dict({k: v.clone() for k, v in out.items()}, strict=True)
    return hf.train(model.training)


register_converter("PerceiverForMaskedLM", Perceiver, perceiver_from_hf, perceiver_to_hf)
register_converter("PerceiverModel", Perceiver, perceiver_from_hf, perceiver_to_hf)
