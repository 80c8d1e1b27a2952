"""Perceiver (Jaegle et al., 2021, arXiv:2103.03206) and Perceiver IO (Jaegle et al., 2021, arXiv:2107.14795).

A learned latent array ``z`` (N x D) cross-attends to a large input ``x`` (M x C) -- queries from the latents,
keys/values from the input, cost O(M N) -- and a latent transformer (self-attention over the N latents, cost
O(N^2), independent of M) follows (Perceiver, sec. 2, fig. 1)::

    z = z + Attn(LN(z), LN(x));  z = z + MLP(LN(z))               # cross-attend (1 head by default)
    z = z + Attn(LN(z));         z = z + MLP(LN(z))   (x L)       # latent transformer (8 heads)

Two weight-sharing schemes, chosen by ``PerceiverConfig.scheme`` (see :func:`block_plan`):

- ``"paper"`` (Perceiver, sec. 2 and 3): ``num_blocks`` repeats of (cross-attend + latent transformer of
  ``self_per_block`` layers). The first repeat has its own weights; all later repeats share one set.
  With ``share_weights=False`` every repeat has its own weights (the paper's no-sharing ablation).
- ``"io"`` (Perceiver IO, DeepMind's released code, Hugging Face): a single cross-attend, then
  ``num_blocks`` applications of one shared block of ``self_per_block`` self-attention layers.

The input adapter (:mod:`.adapters`) turns raw pixels / patches / waveforms / bytes into ``(batch, M, C)``
with positions; the output head (:mod:`.decoders`) turns latents into logits (mean-pooled classifier of the
Perceiver paper, or Perceiver IO's cross-attention decoders).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import torch
from torch import nn

from paperzoo.nn.attention import MultiHeadAttention
from paperzoo.nn.ffn import FeedForward
from paperzoo.nn.norm import LayerNorm
from paperzoo.nn.outputs import ModelOutput

__all__ = ["PerceiverConfig", "PerceiverLayer", "PerceiverEncoder", "Perceiver", "PerceiverOutput", "block_plan",
           "layer_param_count", "encoder_param_count", "labelled_positions", "SCHEMES", "SIZES"]

SCHEMES = ("paper", "io")
INPUTS = ("pixels", "patches", "audio", "bytes", "features")
POSITIONS = ("fourier", "learned", "none")
OUTPUTS = ("mean", "classify", "per_position", "mlm", "none")
QUERIES = ("learned", "fourier", "input")


# Named sizes: tiny (tests: 16 x 32 latents, 4 Fourier bands), small (the laptop reproduction: 64 x 128 latents,
# 16 bands, 2 blocks of 2 latent layers with 8 heads)
SIZES: dict[str, dict[str, int]] = {
    "tiny": dict(num_bands=4, num_latents=16, latent_dim=32, num_blocks=2, self_per_block=1, self_heads=4,
                 cross_heads=1, self_widening=2),
    "small": dict(num_bands=16, num_latents=64, latent_dim=128, num_blocks=2, self_per_block=2, self_heads=8,
                  cross_heads=1, self_widening=2, cross_widening=1),
}


@dataclass(frozen=True)
class PerceiverConfig:
    """Everything a :class:`Perceiver` needs: input adapter, latent encoder, output head.

    Input (``input``):
        ``pixels``: images ``(batch, channels, H, W)`` flattened to ``H*W`` tokens of ``channels`` values, no
        convolution; ``patches``: ``patch_size`` x ``patch_size`` patches flattened (``(H/p)*(W/p)`` tokens of
        ``channels*p*p`` values); ``audio``: raw waveforms ``(batch, T)`` cut into ``T/patch_size`` tokens of
        ``patch_size`` samples; ``bytes``: ids ``(batch, seq)`` embedded to ``byte_dim`` with learned positions
        added (as Perceiver IO / HF); ``features``: ready ``(batch, M, input_dim)`` arrays.
        ``input_shape`` is ``(channels, H, W)`` for images, ``(T,)`` for audio, ``(max_len,)`` for bytes, ``(M,)``
        for features. ``position``: ``fourier`` (concatenated features with ``num_bands`` bands per axis and
        ``max_resolution`` per axis, default the grid), ``learned`` (``learned_pos_dim`` learned channels
        concatenated; for bytes, added), or ``none``.
    Encoder:
        ``num_latents`` x ``latent_dim`` latents; ``scheme`` / ``num_blocks`` / ``self_per_block`` /
        ``share_weights`` as in the module docstring. Cross-attention: ``cross_heads`` (1), ``cross_qk_dim``
        (None: the input width C, DeepMind's ``cross_attention_shape_for_attention="kv"``), ``cross_v_dim`` (None:
        = ``cross_qk_dim``), ``cross_widening``, ``query_residual``. Self-attention: ``self_heads`` (8),
        ``self_qk_dim`` / ``self_v_dim`` (None: D), ``self_widening``.
    Output (``output``):
        ``mean``: average the latents, LayerNorm, Linear to ``num_classes`` (the Perceiver paper);
        ``classify``: one learned query cross-attends to the latents (Perceiver IO); ``per_position``: one query
        per output position (``queries``: ``learned`` over ``num_outputs``, ``fourier`` over ``output_shape``,
        or ``input`` = the adapter's output) projected to ``out_dim``; ``mlm``: learned per-position queries of
        width ``byte_dim`` and logits through the tied byte embedding (Perceiver IO's masked language model);
        ``none``: return the latents. Decoder attention: ``decoder_heads``, ``decoder_qk_dim``,
        ``decoder_v_dim``, ``decoder_widening``, ``decoder_query_residual``; ``query_dim`` is the width of
        learned queries (None: ``latent_dim``).
    """

    # input adapter
    input: str = "pixels"
    input_shape: tuple[int, ...] = (3, 32, 32)
    patch_size: int = 1
    position: str = "fourier"
    num_bands: int = 16
    max_resolution: tuple[int, ...] | None = None
    learned_pos_dim: int = 64
    vocab_size: int = 262
    byte_dim: int = 256
    input_dim: int | None = None
    # latent encoder
    num_latents: int = 128
    latent_dim: int = 256
    scheme: str = "paper"
    num_blocks: int = 2
    self_per_block: int = 2
    share_weights: bool = True
    cross_heads: int = 1
    cross_qk_dim: int | None = None
    cross_v_dim: int | None = None
    cross_widening: int = 1
    query_residual: bool = True
    self_heads: int = 8
    self_qk_dim: int | None = None
    self_v_dim: int | None = None
    self_widening: int = 1
    activation: str = "gelu"
    attn_dropout: float = 0.0
    ffn_dropout: float = 0.0
    # output head
    output: str = "mean"
    num_classes: int = 10
    queries: str = "learned"
    num_outputs: int | None = None
    output_shape: tuple[int, ...] | None = None
    out_dim: int | None = None
    query_dim: int | None = None
    decoder_heads: int = 1
    decoder_qk_dim: int | None = None
    decoder_v_dim: int | None = None
    decoder_widening: int = 1
    decoder_query_residual: bool = False
    decoder_final_project: bool = True
    init_std: float = 0.02
    hf_class: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for name, allowed in (("input", INPUTS), ("position", POSITIONS), ("scheme", SCHEMES),
                              ("output", OUTPUTS), ("queries", QUERIES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"PerceiverConfig.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        object.__setattr__(self, "input_shape", tuple(self.input_shape))
        for name in ("num_latents", "latent_dim", "num_blocks", "self_per_block", "cross_heads", "self_heads",
                     "cross_widening", "self_widening", "num_bands", "patch_size", "decoder_heads",
                     "decoder_widening"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"PerceiverConfig.{name} must be a positive int, got {v!r}")
        if self.scheme == "io" and not self.share_weights:
            raise ValueError("PerceiverConfig.share_weights=False is only defined for scheme='paper'")
        if self.output in ("per_position", "mlm") and self.queries == "learned" and self.output_positions is None:
            raise ValueError("learned per-position queries need num_outputs (or output_shape)")
        if self.output == "mlm" and self.input != "bytes":
            raise ValueError(f"output='mlm' needs input='bytes', got input={self.input!r}")
        if self.input == "features" and not self.input_dim:
            raise ValueError("input='features' needs input_dim (the width C of each input element)")

    @property
    def output_positions(self) -> int | None:
        """How many output queries a per-position decoder has (None: as many as the input)."""
        if self.num_outputs is not None:
            return self.num_outputs
        return prod(self.output_shape) if self.output_shape else None

    @classmethod
    def hf_mlm(cls, vocab_size=262, max_len=2048, byte_dim=768, num_latents=256, latent_dim=1280, num_blocks=1,
               self_per_block=26, self_heads=8, cross_heads=8, qk_dim=None, v_dim=None, self_widening=1,
               cross_widening=1, query_residual=True, activation="gelu") -> PerceiverConfig:
        """Hugging Face ``PerceiverForMaskedLM`` (defaults: ``deepmind/language-perceiver``'s sizes)."""
        return cls(input="bytes", input_shape=(max_len,), position="learned", vocab_size=vocab_size,
                   byte_dim=byte_dim, num_latents=num_latents, latent_dim=latent_dim, scheme="io",
                   num_blocks=num_blocks, self_per_block=self_per_block, cross_heads=cross_heads,
                   self_heads=self_heads, cross_qk_dim=qk_dim, cross_v_dim=v_dim, self_qk_dim=qk_dim,
                   self_v_dim=v_dim, self_widening=self_widening, cross_widening=cross_widening,
                   query_residual=query_residual, activation=activation, output="mlm", queries="learned",
                   num_outputs=max_len, query_dim=byte_dim, decoder_heads=8, decoder_qk_dim=8 * 32,
                   decoder_v_dim=byte_dim, decoder_widening=1, decoder_query_residual=False,
                   decoder_final_project=False, hf_class="PerceiverForMaskedLM")

    @classmethod
    def preset(cls, name: str, **overrides) -> PerceiverConfig:
        """A named size (:data:`SIZES`) as Perceiver IO's encoder on ready ``(batch, 64, 16)`` feature arrays
        (Hugging Face's ``PerceiverModel`` without pre- or postprocessor, so it converts both ways); override
        the input, scheme and head for other uses. The recipe builds the paper's raw-pixel/audio classifier
        from the same sizes (``PerceiverConfig(**SIZES[name], input=...)``)."""
        if name not in SIZES:
            raise ValueError(f"unknown preset {name!r}; expected one of {sorted(SIZES)}")
        base = dict(scheme="io", input="features", input_shape=(64,), input_dim=16, output="none")
        return cls(**{**base, **SIZES[name], **overrides})

    @classmethod
    def image(cls, size: int = 32, channels: int = 3, **kw) -> PerceiverConfig:
        """Raw-pixel image classifier in the Perceiver paper's layout (Fourier positions, mean-pooled head)."""
        return cls(input="pixels", input_shape=(channels, size, size), **kw)


@dataclass
class PerceiverOutput(ModelOutput):
    """``logits``: (batch, classes) or (batch, outputs, out_dim); ``last_hidden_state``: latents (batch, N, D)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    output_index: torch.Tensor | None = None


def labelled_positions(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample indices of the labelled positions (label != -100) of ``labels`` (batch, O), padded to the largest
    count K with unlabelled positions, and the labels there: ``(index (batch, K), labels (batch, K))``.
    Decoding only these positions gives the same loss as decoding all O (each output query is independent)."""
    keep = labels != -100
    k = max(int(keep.sum(1).max()), 1)
    index = torch.argsort((~keep).to(torch.int8), dim=1, stable=True)[:, :k]  # labelled first, in order
    return index, labels.gather(1, index)


class PerceiverLayer(nn.Module):
    """One attention layer + MLP, pre-norm (Perceiver, fig. 1; Perceiver IO, appendix E)::

        h = Attn(LN(z), LN(x))   (cross, kv_dim set)   or   Attn(LN(z))   (self)
        z = z + h  (or z = h without the query residual);   z = z + MLP(LN(z))

    ``z``: (batch, N, dim); ``x``: (batch, M, kv_dim). The MLP is ``dim -> widening*dim -> dim``.
    Attention is the core :class:`~paperzoo.nn.attention.MultiHeadAttention` on SDPA; its output projection maps
    the ``v_dim`` heads back to ``dim``.
    """

    def __init__(self, dim: int, num_heads: int, kv_dim: int | None = None, qk_dim: int | None = None,
                 v_dim: int | None = None, widening: int = 1, query_residual: bool = True, activation: str = "gelu",
                 attn_dropout: float = 0.0, ffn_dropout: float = 0.0):
        super().__init__()
        self.is_cross, self.query_residual = kv_dim is not None, query_residual
        self.norm_q = LayerNorm(dim)
        self.norm_kv = LayerNorm(kv_dim) if kv_dim is not None else None
        self.attn = MultiHeadAttention(dim, num_heads, kv_dim=kv_dim, qk_dim=qk_dim, v_dim=v_dim, out_dim=dim,
                                       dropout=attn_dropout)
        self.norm_ff = LayerNorm(dim)
        self.ff = FeedForward(dim, widening * dim, activation=activation, dropout=ffn_dropout)

    def forward(self, z: torch.Tensor, x: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        q = self.norm_q(z)
        h = self.attn(q, self.norm_kv(x), key_padding_mask=key_padding_mask) if self.is_cross else self.attn(q)
        z = z + h if self.query_residual else h
        return z + self.ff(self.norm_ff(z))


def block_plan(scheme: str, num_blocks: int, self_per_block: int, share_weights: bool = True) -> list[tuple]:
    """The order in which layers run, as ``[(cross index or None, [self indices]), ...]`` per block.

    Indices point into the encoder's ``cross`` and ``latent`` ModuleLists (one entry per *distinct* set of
    weights). ``paper``: block 0 -> cross 0, latent 0; blocks >= 1 -> cross 1, latent 1 (shared); without
    sharing block b -> cross b, latent b. ``io``: block 0 -> cross 0; every block -> latent 0.
    A latent entry is a ModuleList of ``self_per_block`` layers.
    """
    if scheme == "io":
        return [(0 if b == 0 else None, 0) for b in range(num_blocks)]
    if scheme != "paper":
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return [(b, b) if not share_weights else (min(b, 1), min(b, 1)) for b in range(num_blocks)]


class PerceiverEncoder(nn.Module):
    """Latent array + cross-attends + latent transformers. ``forward(x (batch, M, C), mask (batch, M)) -> (batch,
    N, D)``; ``mask`` True/1 = a real input element."""

    def __init__(self, cfg: PerceiverConfig, input_dim: int):
        super().__init__()
        self.config = cfg
        d = cfg.latent_dim
        self.latents = nn.Parameter(torch.randn(cfg.num_latents, d) * cfg.init_std)
        self.plan = block_plan(cfg.scheme, cfg.num_blocks, cfg.self_per_block, cfg.share_weights)
        n_cross = 1 + max(c for c, _ in self.plan if c is not None)
        n_latent = 1 + max(s for _, s in self.plan)
        common = dict(activation=cfg.activation, attn_dropout=cfg.attn_dropout, ffn_dropout=cfg.ffn_dropout)
        self.cross = nn.ModuleList(
            PerceiverLayer(d, cfg.cross_heads, kv_dim=input_dim, qk_dim=cfg.cross_qk_dim or input_dim,
                           v_dim=cfg.cross_v_dim, widening=cfg.cross_widening, query_residual=cfg.query_residual,
                           **common) for _ in range(n_cross))
        self.latent = nn.ModuleList(
            nn.ModuleList(PerceiverLayer(d, cfg.self_heads, qk_dim=cfg.self_qk_dim, v_dim=cfg.self_v_dim,
                                         widening=cfg.self_widening, **common) for _ in range(cfg.self_per_block))
            for _ in range(n_latent))
        self.input_dim = input_dim

    def layers(self) -> list[PerceiverLayer]:
        """Every layer in execution order (shared layers appear once per use)."""
        out = []
        for c, s in self.plan:
            out += ([self.cross[c]] if c is not None else []) + list(self.latent[s])
        return out

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None,
                output_hidden_states: bool = False):
        _check_elements(x, self.input_dim)
        z = self.latents.expand(x.shape[0], -1, -1)  # the learned latent array (batch, N, D)
        states = [z]
        for c, s in self.plan:
            if c is not None:
                z = self.cross[c](z, x, key_padding_mask)  # cross-attend: z = z + Attn(LN(z), LN(x)), O(M N)
            for layer in self.latent[s]:
                z = layer(z)  # latent transformer: z = z + Attn(LN(z)), O(N^2), independent of M
            states.append(z)
        return (z, tuple(states)) if output_hidden_states else z


def layer_param_count(dim: int, kv_dim: int | None, qk: int, v: int, widening: int) -> int:
    """Parameters of one :class:`PerceiverLayer` (biases everywhere, affine LayerNorms)."""
    ln = 2 * dim + (2 * kv_dim if kv_dim is not None else 0) + 2 * dim
    kin = kv_dim if kv_dim is not None else dim
    attn = dim * qk + qk + kin * (qk + v) + (qk + v) + v * dim + dim
    ff = 2 * widening * dim * dim + widening * dim + dim
    return ln + attn + ff


def encoder_param_count(cfg: PerceiverConfig, input_dim: int) -> int:
    """The closed-form parameter count of :class:`PerceiverEncoder` for ``cfg``'s weight-sharing scheme:

    ``N*D + n_cross * P_cross + n_latent * L * P_self`` with ``(n_cross, n_latent)`` = ``(min(B, 2), min(B, 2))``
    for the shared paper scheme, ``(B, B)`` without sharing, ``(1, 1)`` for Perceiver IO.
    """
    d, b = cfg.latent_dim, cfg.num_blocks
    if cfg.scheme == "io":
        n_cross, n_latent = 1, 1
    else:
        n_cross = n_latent = min(b, 2) if cfg.share_weights else b
    cqk = cfg.cross_qk_dim or input_dim
    sqk = cfg.self_qk_dim or d
    p_cross = layer_param_count(d, input_dim, cqk, cfg.cross_v_dim or cqk, cfg.cross_widening)
    p_self = layer_param_count(d, None, sqk, cfg.self_v_dim or sqk, cfg.self_widening)
    return cfg.num_latents * d + n_cross * p_cross + n_latent * cfg.self_per_block * p_self


class Perceiver(nn.Module):
    """Adapter -> latent encoder -> output head, from one :class:`PerceiverConfig`.

    ``forward(inputs, attention_mask=None, output_index=None, labels=None)``: ``inputs`` as the adapter expects
    (see the config), ``attention_mask`` (batch, M) 1 = real element (bytes/features), ``output_index`` (O',)
    long indices of the output positions to decode (subsampled decoding for training, Perceiver IO sec. 3.3),
    ``labels`` for a cross-entropy loss ((batch,) for classification, (batch, O) with -100 ignored for
    per-position/MLM). ``decode_labelled_only=True`` decodes only each sample's labelled positions (see
    :func:`labelled_positions`): the same loss, logits (batch, K, ...) at ``output.output_index``, and far less
    work when few positions carry a loss (masked byte modelling: 15%). Returns :class:`PerceiverOutput`
    (``logits``, ``last_hidden_state`` = final latents). The per-position decoders accept ``output_index`` of
    shape (O',) or (batch, O').

    Masked LM (``output="mlm"``) on bytes shorter than ``max_len`` decodes the input's ``L`` positions (logits
    (batch, L, vocab), labels (batch, L)); each output query is independent, so these are the first ``L`` rows of a
    full decode. Hugging Face's ``PerceiverForMaskedLM`` always decodes ``max_len`` positions.
    """

    config_class = PerceiverConfig

    @staticmethod
    def example_inputs(config: PerceiverConfig, batch: int = 2) -> dict[str, torch.Tensor]:
        """Random inputs of the configured kind: images/waveforms/features (float) or byte ids (long)."""
        if config.input == "bytes":
            return {"inputs": torch.randint(0, config.vocab_size, (batch, config.input_shape[0]))}
        if config.input == "features":
            return {"inputs": torch.randn(batch, config.input_shape[0], config.input_dim)}
        return {"inputs": torch.randn(batch, *config.input_shape)}

    def __init__(self, cfg: PerceiverConfig):
        super().__init__()
        from .adapters import build_adapter
        from .decoders import build_decoder

        self.config = cfg
        self.adapter = build_adapter(cfg)
        self.encoder = PerceiverEncoder(cfg, self.adapter.out_dim)
        self.decoder = build_decoder(cfg, self.adapter)

    def forward(self, inputs: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                output_index: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                output_hidden_states: bool = False, input_ids: torch.Tensor | None = None,
                return_dict: bool = True, decode_labelled_only: bool = False, **unused) -> PerceiverOutput:
        inputs = _check_inputs(inputs, input_ids)
        x, x_raw = self.adapter(inputs)  # adapt: raw array -> (batch, M, C) elements with positions
        mask = _check_mask(attention_mask, x)
        z, states = self.encoder(x, mask, output_hidden_states=True)  # encode: latents (batch, N, D)
        if decode_labelled_only:
            _check_labelled_only(labels, output_index)
            output_index, labels = labelled_positions(labels)
        elif output_index is None and self.config.output == "mlm" and inputs.shape[1] < self.decoder.num_outputs:
            output_index = torch.arange(inputs.shape[1], device=z.device)  # a shorter input: decode its L positions
        # decode: latents -> logits (mean-pooled classifier, or Perceiver IO's output queries)
        logits = self.decoder(z, x=x, x_raw=x_raw, output_index=output_index) if self.decoder is not None else None
        loss = None
        if labels is not None and logits is not None:
            if output_index is not None and labels.ndim == 2 and labels.shape[1] != output_index.shape[-1]:
                labels = labels[:, output_index] if output_index.ndim == 1 else labels.gather(1, output_index)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                               ignore_index=-100)
        return PerceiverOutput(loss, logits, z, states if output_hidden_states else None, output_index)


# ----------------------------------------------------------------------------------------------------- input checks
def _check_elements(x: torch.Tensor, input_dim: int) -> None:
    if x.ndim != 3 or x.shape[-1] != input_dim:
        raise ValueError(f"inputs must have shape (batch, M, C={input_dim}), got {tuple(x.shape)}")


def _check_inputs(inputs: torch.Tensor | None, input_ids: torch.Tensor | None) -> torch.Tensor:
    if inputs is not None and input_ids is not None:
        raise ValueError("pass either inputs or input_ids, not both")
    inputs = inputs if inputs is not None else input_ids
    if inputs is None:
        raise ValueError("expected inputs (the raw array the adapter takes)")
    return inputs


def _check_mask(mask: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor | None:
    if mask is not None and (mask.ndim != 2 or tuple(mask.shape) != tuple(x.shape[:2])):
        raise ValueError(f"attention_mask must have shape (batch, M) = {tuple(x.shape[:2])}, got {tuple(mask.shape)}")
    return mask


def _check_labelled_only(labels: torch.Tensor | None, output_index: torch.Tensor | None) -> None:
    if labels is None or labels.ndim != 2 or output_index is not None:
        raise ValueError("decode_labelled_only needs per-position labels (batch, O) and no output_index")
