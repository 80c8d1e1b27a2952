"""Hugging Face interop for Funnel: ``FunnelModel``, ``FunnelBaseModel``, ``FunnelForSequenceClassification``.

Our modules use Hugging Face's parameter names (``embeddings.word_embeddings``, ``encoder.blocks.<b>.<l>.attention
.{q_head,k_head,v_head,r_w_bias,r_r_bias,r_kernel,r_s_bias,seg_embed,post_proj,layer_norm}``, ``.ffn.{linear_1,
linear_2,layer_norm}``, ``decoder.layers.<i>``, ``funnel.*`` + ``classifier.{linear_hidden,linear_out}``), so the
weights are copied with a strict ``load_state_dict`` both ways; only the configs are translated (``_RENAME``: HF's
config names to ours).

==================================  ======================  ==============================================
HF class                            paperzoo class          notes
==================================  ======================  ==============================================
``FunnelModel``                     :class:`FunnelModel`     encoder + decoder, full-length output
``FunnelBaseModel``                 :class:`FunnelBase`      encoder only, pooled output
``FunnelForSequenceClassification``  :class:`FunnelClassifier`  base + tanh head on [CLS]
==================================  ======================  ==============================================
"""

from __future__ import annotations

from typing import Any

from torch import nn

from paperzoo.hf import register_converter

from .model import FunnelBase, FunnelClassifier, FunnelConfig, FunnelModel

__all__ = ["config_from_hf", "config_to_hf", "funnel_from_hf", "funnel_to_hf"]

_OURS = {"FunnelModel": FunnelModel, "FunnelBaseModel": FunnelBase, "FunnelForSequenceClassification": FunnelClassifier}
_ATTN = {"relative_shift": "rel_shift", "factorized": "factorized"}
# transformers.FunnelConfig name -> our FunnelConfig name, for the fields that map one to one
_RENAME = {"vocab_size": "vocab_size", "d_model": "dim", "n_head": "num_heads", "d_head": "head_dim",
           "d_inner": "ffn_dim", "num_decoder_layers": "num_decoder_layers", "hidden_act": "activation",
           "hidden_dropout": "dropout", "attention_dropout": "attn_dropout", "activation_dropout": "activation_dropout",
           "layer_norm_eps": "norm_eps", "pooling_type": "pooling", "separate_cls": "separate_cls",
           "truncate_seq": "truncate_seq", "pool_q_only": "pool_q_only", "pad_token_id": "pad_token_id",
           "num_labels": "num_labels"}


def config_from_hf(hc: Any) -> FunnelConfig:
    """Our :class:`FunnelConfig` from a ``transformers.FunnelConfig``."""
    _check_activation(hc.hidden_act)
    blocks = "-".join(f"{n}x{r}" if r != 1 else str(n) for n, r in zip(hc.block_sizes, hc.block_repeats, strict=True))
    return FunnelConfig(blocks=blocks, attention_type=_ATTN[hc.attention_type],
                        **{ours: getattr(hc, theirs) for theirs, ours in _RENAME.items()})


def config_to_hf(cfg: FunnelConfig) -> Any:
    """A ``transformers.FunnelConfig`` equivalent to ``cfg``."""
    import transformers

    return transformers.FunnelConfig(
        block_sizes=list(cfg.block_sizes), block_repeats=list(cfg.block_repeats),
        attention_type={v: k for k, v in _ATTN.items()}[cfg.attention_type],
        **{theirs: getattr(cfg, ours) for theirs, ours in _RENAME.items()})


def funnel_from_hf(hf_model: Any) -> nn.Module:
    """The paperzoo model for a ``transformers`` Funnel model (one of the three classes), same weights, device,
    dtype and mode."""
    name = next((c.__name__ for c in type(hf_model).__mro__ if c.__name__ in _OURS), None)
    _check_hf_class(name, hf_model)
    ours = _OURS[name](config_from_hf(hf_model.config))
    param = next(hf_model.parameters())
    ours = ours.to(device=param.device, dtype=param.dtype)
    ours.load_state_dict(hf_model.state_dict(), strict=True)
    return ours.train(hf_model.training)


def funnel_to_hf(model: nn.Module) -> Any:
    """The ``transformers`` model (class per ``model.hf_class``) with ``model``'s weights, device, dtype and mode."""
    import transformers

    _check_ours(model)
    hf = getattr(transformers, model.hf_class)(config_to_hf(model.config))
    param = next(model.parameters())
    hf = hf.to(device=param.device, dtype=param.dtype)
    hf.load_state_dict(model.state_dict(), strict=True)
    return hf.train(model.training)


for _name, _cls in _OURS.items():
    register_converter(_name, _cls, funnel_from_hf, funnel_to_hf)


# -------------------------------------------------------------------------------------------------------- checks
def _check_activation(act: str) -> None:
    if act not in ("gelu_new", "gelu", "relu"):
        raise ValueError(f"hidden_act must be 'gelu_new', 'gelu' or 'relu' to convert, got {act!r}")


def _check_hf_class(name: str | None, hf_model: Any) -> None:
    if name is None:
        raise ValueError(f"expected one of transformers.{', '.join(_OURS)}, got {type(hf_model).__name__}")


def _check_ours(model: nn.Module) -> None:
    if not isinstance(model, tuple(_OURS.values())):
        raise ValueError(f"expected a FunnelModel, FunnelBase or FunnelClassifier, got {type(model).__name__}")
