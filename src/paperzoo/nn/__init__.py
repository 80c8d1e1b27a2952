"""The shared core: small, general building blocks that depend only on torch (see README.md beside this file)."""

from .attention import MultiHeadAttention, as_keep_mask, merge_masks, sdpa
from .embedding import TokenEmbeddings, check_token_ids
from .ffn import ACTIVATIONS, GLU_VARIANTS, FeedForward, ffn_flops, make_activation
from .norm import NORMS, LayerNorm, ReZero, RMSNorm, ScaleNorm, make_norm
from .outputs import BaseModelOutput, ClassifierOutput, ModelOutput
from .posenc import (
    ALiBi,
    FactorizedPositionalEmbedding,
    FourierPositionEncoding,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativePositionBias,
    alibi_slopes,
    fourier_features,
    fourier_position_grid,
    frequency_encoding,
    frequency_encoding_dim,
    rotary_permutation,
    sinusoidal_table,
)
from .transformer import (
    DropPath,
    EncoderOutput,
    TextEncoder,
    TextEncoderConfig,
    TransformerBlock,
    TransformerConfig,
    TransformerEncoder,
    fixup_init_,
)

__all__ = [
    "ACTIVATIONS", "ALiBi", "BaseModelOutput", "ClassifierOutput", "DropPath", "EncoderOutput",
    "FactorizedPositionalEmbedding", "FeedForward", "FourierPositionEncoding", "GLU_VARIANTS", "LayerNorm",
    "LearnedPositionalEmbedding", "ModelOutput", "MultiHeadAttention", "NORMS", "ReZero", "RMSNorm",
    "RotaryEmbedding", "ScaleNorm", "SinusoidalPositionalEncoding", "T5RelativePositionBias", "TextEncoder",
    "TextEncoderConfig", "TokenEmbeddings", "TransformerBlock", "TransformerConfig", "TransformerEncoder",
    "alibi_slopes", "as_keep_mask", "check_token_ids", "ffn_flops", "fourier_features", "fourier_position_grid",
    "fixup_init_", "frequency_encoding", "frequency_encoding_dim", "make_activation", "make_norm", "merge_masks",
    "rotary_permutation", "sdpa", "sinusoidal_table",
]
