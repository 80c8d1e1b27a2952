"""Output heads: the Perceiver paper's mean-pooled classifier and Perceiver IO's cross-attention decoders.

Perceiver IO (Jaegle et al., 2021b, sec. 2.2 and 3): an output query array ``q`` (batch, O, E) cross-attends to
the final latents ``z`` (batch, N, D) -- queries from ``q``, keys/values from ``z`` -- so the output has O
elements whatever N is::

    y = Attn(LN(q), LN(z))  (+ q with a query residual);  y = y + MLP(LN(y));  logits = Linear(y)

Queries are learned (one vector per output position, or a single one for classification), Fourier features of
an output grid, or the input elements themselves. Passing ``output_index`` (O',) decodes only those output
positions (subsampled decoding for training, Perceiver IO sec. 3.3 / optical flow and multimodal experiments);
a 2-D ``output_index`` (batch, O') picks different positions per sample (e.g. only the masked bytes of each
sequence, which is exact because every output query is decoded independently).
"""

from __future__ import annotations

import torch
from torch import nn

from paperzoo.nn.norm import LayerNorm
from paperzoo.nn.posenc import FourierPositionEncoding

from .model import PerceiverLayer

__all__ = ["MeanPoolClassifier", "CrossAttentionDecoder", "ClassificationDecoder", "MaskedLMDecoder",
           "build_decoder"]


class MeanPoolClassifier(nn.Module):
    """Perceiver paper's head: average the final latents over the index dimension, LayerNorm, Linear
    (sec. 2: "the output of the final latent Transformer is averaged ... then projected to logits").
    ``(batch, N, D) -> (batch, classes)``."""

    def __init__(self, dim: int, num_classes: int):
        super().__init__()
        self.dim = dim
        self.norm, self.proj = LayerNorm(dim), nn.Linear(dim, num_classes)

    def forward(self, z: torch.Tensor, **_) -> torch.Tensor:
        _check_latents(z, self.dim)
        return self.proj(self.norm(z.mean(dim=1)))


class CrossAttentionDecoder(nn.Module):
    """Perceiver IO's basic decoder. ``forward(z, x=None, x_raw=None, output_index=None) -> (batch, O, out_dim)``.

    ``queries``: ``"learned"`` (``num_outputs`` x ``query_dim`` parameters), ``"fourier"`` (Fourier features of
    ``output_shape`` with ``num_bands`` bands, projected to ``query_dim`` when it is given) or ``"input"`` (the
    adapter's output ``x`` (batch, M, input_dim)). ``final_project=False`` returns the attended queries
    (width ``query_dim``) without the output Linear (HF's ``final_project``).
    """

    def __init__(self, latent_dim: int, out_dim: int | None, queries: str = "learned", num_outputs: int | None = None,
                 query_dim: int | None = None, output_shape: tuple[int, ...] | None = None, num_bands: int = 16,
                 input_dim: int | None = None, num_heads: int = 1, qk_dim: int | None = None, v_dim: int | None = None,
                 widening: int = 1, query_residual: bool = False, final_project: bool = True,
                 activation: str = "gelu", init_std: float = 0.02):
        super().__init__()
        self.latent_dim, self.queries = latent_dim, queries
        self.query = self.fourier = self.fourier_proj = None
        if queries == "learned":
            if not num_outputs:
                raise ValueError("learned output queries need num_outputs")
            query_dim = query_dim or latent_dim
            self.query = nn.Parameter(torch.randn(num_outputs, query_dim) * init_std)
        elif queries == "fourier":
            if not output_shape:
                raise ValueError("Fourier output queries need output_shape (the output grid)")
            self.fourier = FourierPositionEncoding(tuple(output_shape), num_bands)
            if query_dim:
                self.fourier_proj = nn.Linear(self.fourier.out_dim, query_dim)
            query_dim = query_dim or self.fourier.out_dim
        elif queries == "input":
            if not input_dim:
                raise ValueError("queries='input' needs input_dim")
            query_dim = input_dim
        else:
            raise ValueError(f"queries must be 'learned', 'fourier' or 'input', got {queries!r}")
        self.query_dim = query_dim
        qk_dim = qk_dim or latent_dim  # DeepMind/HF: cross_attention_shape_for_attention="kv"
        self.layer = PerceiverLayer(query_dim, num_heads, kv_dim=latent_dim, qk_dim=qk_dim, v_dim=v_dim,
                                    widening=widening, query_residual=query_residual, activation=activation)
        self.final = nn.Linear(query_dim, out_dim) if final_project and out_dim else nn.Identity()

    def output_queries(self, batch: int, x: torch.Tensor | None = None,
                       output_index: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, O or O', query_dim)."""
        _check_output_index(output_index, batch)
        if self.queries == "input":
            if x is None:
                raise ValueError("queries='input' needs the adapter output x")
            if output_index is None:
                return x
            if output_index.ndim == 1:
                return x[:, output_index]
            return x[torch.arange(batch, device=x.device)[:, None], output_index]
        q = self.query if self.query is not None else self.fourier.grid
        if output_index is not None:
            q = q[output_index]  # (O', E) or (batch, O', E)
        if self.fourier_proj is not None:
            q = self.fourier_proj(q)
        return q.expand(batch, -1, -1)

    def forward(self, z: torch.Tensor, x: torch.Tensor | None = None, x_raw: torch.Tensor | None = None,
                output_index: torch.Tensor | None = None) -> torch.Tensor:
        _check_latents(z, self.latent_dim)
        q = self.output_queries(z.shape[0], x, output_index).to(z.dtype)
        return self.final(self.layer(q, z))


class ClassificationDecoder(CrossAttentionDecoder):
    """Perceiver IO classification: one learned query attends to the latents -> ``(batch, num_classes)``."""

    def __init__(self, latent_dim: int, num_classes: int, **kw):
        super().__init__(latent_dim, num_classes, queries="learned", num_outputs=1, **kw)

    def forward(self, z: torch.Tensor, **_) -> torch.Tensor:
        return super().forward(z)[:, 0]


class MaskedLMDecoder(nn.Module):
    """Perceiver IO masked byte prediction: per-position learned queries -> attended ``(batch, O, byte_dim)``, then
    logits through the tied input embedding, ``h E^T + b`` -> ``(batch, O, vocab)`` (HF's
    ``PerceiverEmbeddingDecoder``)."""

    def __init__(self, decoder: CrossAttentionDecoder, embed: nn.Embedding):
        super().__init__()
        self.decoder = decoder
        self.num_outputs = decoder.query.shape[0]  # O = max_len learned output queries
        self.embed = [embed]  # tied, not a submodule (its weight belongs to the adapter)
        self.bias = nn.Parameter(torch.zeros(embed.num_embeddings))

    def forward(self, z: torch.Tensor, output_index: torch.Tensor | None = None, **_) -> torch.Tensor:
        h = self.decoder(z, output_index=output_index)
        return nn.functional.linear(h, self.embed[0].weight, self.bias)


def build_decoder(cfg, adapter: nn.Module) -> nn.Module | None:
    """The output head described by a :class:`~.model.PerceiverConfig`."""
    d = cfg.latent_dim
    kw = dict(num_heads=cfg.decoder_heads, qk_dim=cfg.decoder_qk_dim, v_dim=cfg.decoder_v_dim,
              widening=cfg.decoder_widening, query_residual=cfg.decoder_query_residual, activation=cfg.activation,
              init_std=cfg.init_std)
    if cfg.output == "none":
        return None
    if cfg.output == "mean":
        return MeanPoolClassifier(d, cfg.num_classes)
    if cfg.output == "classify":
        return ClassificationDecoder(d, cfg.num_classes, query_dim=cfg.query_dim, **kw)
    if cfg.output == "mlm":
        dec = CrossAttentionDecoder(d, None, queries="learned", num_outputs=cfg.output_positions,
                                    query_dim=cfg.byte_dim, final_project=False, **kw)
        return MaskedLMDecoder(dec, adapter.embed)
    return CrossAttentionDecoder(d, cfg.out_dim or cfg.num_classes, queries=cfg.queries,
                                 num_outputs=cfg.output_positions, query_dim=cfg.query_dim,
                                 output_shape=cfg.output_shape, num_bands=cfg.num_bands, input_dim=adapter.out_dim,
                                 final_project=cfg.decoder_final_project, **kw)


# ----------------------------------------------------------------------------------------------------- input checks
def _check_latents(z: torch.Tensor, dim: int) -> None:
    if z.ndim != 3 or z.shape[-1] != dim:
        raise ValueError(f"latents must have shape (batch, N, D={dim}), got {tuple(z.shape)}")


def _check_output_index(output_index: torch.Tensor | None, batch: int) -> None:
    if output_index is not None and (output_index.ndim not in (1, 2) or output_index.dtype not in (
            torch.int64, torch.int32) or (output_index.ndim == 2 and output_index.shape[0] != batch)):
        raise ValueError(f"output_index must be an integer tensor (O',) shared by the batch or (batch={batch}, "
                         f"O') per sample, got {output_index.dtype} {tuple(output_index.shape)}")
