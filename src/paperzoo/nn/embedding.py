"""Token embeddings for text encoders: word + absolute position + token type, normalised, optionally factorised.

BERT (Devlin et al., 2019, fig. 2): ``E = LayerNorm(E_word[x] + E_pos[p] + E_type[t])``, then dropout.
ALBERT/ELECTRA factorise the embedding: tables of width ``embedding_dim`` < ``dim``, then a Linear to ``dim``
(ELECTRA's ``embeddings_project``). Positions may instead be concatenated to the token embedding
(``concat_position_dim`` p > 0): ``E = [E_word[x] + E_type[t] ; E_pos[p]]``, word/type tables of width ``e - p``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .posenc import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

__all__ = ["TokenEmbeddings", "check_token_ids"]


class TokenEmbeddings(nn.Module):
    """Embeddings: ``forward(input_ids (batch, seq) or inputs_embeds, token_type_ids) -> (batch, seq, dim)``.

    Args:
        vocab_size, dim: vocabulary size and output width.
        max_len: number of learned positions (``position="learned"``; longer inputs raise ValueError).
        type_vocab_size: number of token types (0: none). Missing ``token_type_ids`` mean type 0, as in BERT.
        embedding_dim: width of the tables (default ``dim``); if different, a Linear ``project`` maps to ``dim``.
        position: "learned" | "sinusoidal" | "none" (then add or inject positions elsewhere).
        norm_eps: LayerNorm epsilon over the summed embeddings (None: no norm).
        dropout: dropout after the norm.
        pad_token_id: row of the word table kept at zero gradient (``nn.Embedding.padding_idx``).
        scale: multiply word embeddings by sqrt(embedding_dim) (Vaswani et al. 2017, sec. 3.4).
        concat_position_dim: 0 adds the position table to the token embedding (BERT); p > 0 concatenates a
            p-wide position table after an ``embedding_dim - p``-wide token embedding instead.

    Ids outside ``[0, vocab_size)`` and token types outside ``[0, type_vocab_size)`` raise ``ValueError``
    (:func:`check_token_ids`), instead of torch's ``IndexError`` on CPU or a device-side assert on GPU.
    """

    def __init__(self, vocab_size: int, dim: int, max_len: int = 512, type_vocab_size: int = 0,
                 embedding_dim: int | None = None, position: str = "learned", norm_eps: float | None = 1e-12,
                 dropout: float = 0.0, pad_token_id: int | None = None, scale: bool = False,
                 concat_position_dim: int = 0):
        super().__init__()
        if position not in ("learned", "sinusoidal", "none"):
            raise ValueError(f"position must be 'learned', 'sinusoidal' or 'none', got {position!r}")
        e = embedding_dim or dim
        p = concat_position_dim
        if type(p) is not int or not 0 <= p < e or (p and position == "none"):
            raise ValueError(f"concat_position_dim must be an int in [0, embedding_dim={e}) and needs a position "
                             f"table, got {p!r} with position={position!r}")
        t = e - p  # width of the token (word + type) part
        self.dim, self.embedding_dim, self.vocab_size, self.concat_position_dim = dim, e, vocab_size, p
        self.word = nn.Embedding(vocab_size, t, padding_idx=pad_token_id)
        pe = p or e
        self.position = {"learned": lambda: LearnedPositionalEmbedding(max_len, pe),
                         "sinusoidal": lambda: SinusoidalPositionalEncoding(pe, max_len),
                         "none": lambda: None}[position]()
        self.token_type = nn.Embedding(type_vocab_size, t) if type_vocab_size > 0 else None
        self.norm = nn.LayerNorm(e, eps=norm_eps) if norm_eps is not None else None
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.project = nn.Linear(e, dim) if e != dim else None
        self.scale = math.sqrt(e) if scale else 1.0

    def forward(self, input_ids: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                inputs_embeds: torch.Tensor | None = None, offset: int = 0) -> torch.Tensor:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids (batch, seq) and inputs_embeds (batch, seq, embedding_dim)")
        if input_ids is not None:
            if input_ids.ndim != 2 or input_ids.dtype not in (torch.long, torch.int32, torch.int16, torch.uint8):
                raise ValueError(f"input_ids must be an integer (batch, seq) tensor, got {input_ids.dtype} "
                                 f"of shape {tuple(input_ids.shape)}")
            check_token_ids(input_ids, self.vocab_size)
            x = self.word(input_ids)
        else:
            width = self.embedding_dim - self.concat_position_dim
            if inputs_embeds.ndim != 3 or inputs_embeds.shape[-1] != width:
                raise ValueError(f"inputs_embeds must have shape (batch, seq, {width}), "
                                 f"got {tuple(inputs_embeds.shape)}")
            x = inputs_embeds
        if self.scale != 1.0:
            x = x * self.scale
        if self.token_type is not None:
            if token_type_ids is None:  # all type 0: add the row, no lookup
                x = x + self.token_type.weight[0]
            else:
                if token_type_ids.shape != x.shape[:2]:
                    raise ValueError(f"token_type_ids must have shape {tuple(x.shape[:2])}, "
                                     f"got {tuple(token_type_ids.shape)}")
                check_token_ids(token_type_ids, self.token_type.num_embeddings, "token_type_ids", "type_vocab_size")
                x = x + self.token_type(token_type_ids)
        elif token_type_ids is not None:
            raise ValueError("token_type_ids given but this embedding has type_vocab_size=0")
        if self.position is not None:
            pos = self.position(x.shape[1], offset).to(x.dtype)  # (seq, p or e)
            if self.concat_position_dim:  # [token ; position], (batch, seq, e)
                x = torch.cat((x, pos.expand(x.shape[0], -1, -1)), dim=-1)
            else:
                x = x + pos
        if self.norm is not None:
            x = self.norm(x)
        x = self.dropout(x)
        return self.project(x) if self.project is not None else x


# ----------------------------------------------------------------------------------------------------- checks


def check_token_ids(ids: torch.Tensor, vocab_size: int, name: str = "input_ids", size_name: str = "vocab_size") -> None:
    """Raise ``ValueError`` unless every entry of the integer tensor ``ids`` is in ``[0, vocab_size)``.

    For every embedding lookup of caller-given ids (the shared :class:`TokenEmbeddings` and papers that embed on their
    own): an out-of-range id otherwise fails deep inside ``nn.Embedding`` with ``IndexError: index out of range in
    self`` on CPU and a device-side assert on GPU. One min/max reduction (one host sync); skipped for empty and meta
    tensors and while ``torch.compile`` or ``torch.jit`` traces (a data-dependent branch there would break the graph).
    """
    if ids.numel() == 0 or ids.device.type == "meta" or torch.compiler.is_compiling() or torch.jit.is_tracing():
        return
    lo, hi = (int(v) for v in torch.aminmax(ids))
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"{name} must be in [0, {vocab_size}) ({size_name}={vocab_size}), got values in "
                         f"[{lo}, {hi}] (min {lo}, max {hi})")
