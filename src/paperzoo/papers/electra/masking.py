"""Dynamic masking exactly as ELECTRA's official ``pretrain_helpers.mask`` (Clark et al. 2020, sec. 2).

Per sequence ``i`` with ``n_i`` non-pad tokens (``[CLS]``/``[SEP]`` included, as the official ``input_mask``)::

    k_i = clip(round(n_i * p), 1, max_predictions)        # round half to even, in float32 as TF does

``k_i`` positions are drawn uniformly among the *candidates* (non-pad tokens that are not special: ``[CLS]``,
``[SEP]``, ``[MASK]``, ``[PAD]`` are never masked). Of the chosen positions, each becomes ``[MASK]`` with
probability ``mask_token_prob`` (0.85) and keeps its original token otherwise (0.15). There is no random-token
replacement (BERT's 10%): in ELECTRA the generator supplies the replacements.

BERT's rule (Devlin et al. 2019, sec. 3.1 and appendix A.1; ``create_masked_lm_predictions`` of google-research/bert),
for MLM baselines: ``mask_token_prob=0.8, random_token_prob=0.1, vocab_size=V`` (:data:`BERT_MASKING`): of the chosen
positions 80% become ``[MASK]``, 10% a token drawn uniformly from the whole vocabulary ``[0, V)`` (special ids
included and the original possible, as BERT draws from ``vocab_words``), 10% keep their token. Every chosen position
is predicted, whatever its input shows. The positions are chosen exactly as above; the one ``U(0, 1)`` draw per
position decides ``[MASK]`` (``u < 0.8``), random (``u < 0.9``) or kept, so ``random_token_prob=0`` (the default)
draws the same numbers as before.

``replacement=False`` (default) draws the ``k_i`` positions without replacement, so exactly ``k_i`` positions
are masked. ``replacement=True`` follows the official code and the paper's ``m_i ~ unif{1, n}``
(``tf.random.categorical`` draws with replacement): a position drawn twice is masked once, becomes ``[MASK]`` if
any of its draws says so (the official ``scatter_update`` sends "keep" draws to the never-updated position 0),
and weighs twice in the MLM loss (``counts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["MaskedBatch", "mask_tokens", "default_max_predictions", "num_to_predict", "BERT_MASKING"]

BERT_MASKING = dict(mask_token_prob=0.8, random_token_prob=0.1)  # the 80/10/10 rule; the remaining 10% are kept


@dataclass
class MaskedBatch:
    """The result of :func:`mask_tokens`; all tensors are (batch, seq).

    ``input_ids``: the generator's input (``[MASK]`` at 85% of the chosen positions; BERT's rule: 80% ``[MASK]``,
    10% random tokens); ``original_ids``: the
    uncorrupted ids; ``is_masked`` (bool): chosen positions; ``counts`` (int64): how many draws chose each position
    (the MLM loss weight; 0 or 1 without replacement).
    """

    input_ids: torch.Tensor
    original_ids: torch.Tensor
    is_masked: torch.Tensor
    counts: torch.Tensor

    @property
    def num_masked(self) -> int:
        return int(self.is_masked.sum())


def default_max_predictions(seq_len: int, mask_prob: float = 0.15) -> int:
    """The official default ``max_predictions_per_seq = int((mask_prob + 0.005) * max_seq_length)`` (19 for 128)."""
    return max(1, int((mask_prob + 0.005) * seq_len))


def num_to_predict(lengths: torch.Tensor, mask_prob: float, max_predictions: int) -> torch.Tensor:
    """``clip(round(n * p), 1, max_predictions)`` per row of ``lengths`` (batch,), computed in float32 like TF."""
    p = torch.tensor(mask_prob, dtype=torch.float32, device=lengths.device)
    k = torch.round(lengths.to(torch.float32) * p).to(torch.int64)
    return k.clamp(min=1, max=max_predictions)


def _rand(shape: tuple[int, int], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    if generator is None or generator.device == device:
        return torch.rand(shape, generator=generator, device=device)
    return torch.rand(shape, generator=generator).to(device)


def _randint(high: int, shape: tuple[int, int], generator: torch.Generator | None, device: torch.device
             ) -> torch.Tensor:
    if generator is None or generator.device == device:
        return torch.randint(high, shape, generator=generator, device=device)
    return torch.randint(high, shape, generator=generator).to(device)


def mask_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, mask_token_id: int,
                special_ids: Sequence[int], mask_prob: float = 0.15, max_predictions: int | None = None,
                mask_token_prob: float = 0.85, replacement: bool = False,
                generator: torch.Generator | None = None, random_token_prob: float = 0.0,
                vocab_size: int | None = None) -> MaskedBatch:
    """Choose positions to mask and build the generator's input; see the module docstring for the rule.

    Args:
        input_ids: (batch, seq) integer ids. attention_mask: (batch, seq), 1 = token, 0 = padding (None: all 1).
        mask_token_id: id of ``[MASK]``. special_ids: ids never masked (``[CLS]``, ``[SEP]``, ``[MASK]``, ``[PAD]``).
        mask_prob: fraction p of the non-pad tokens to choose. max_predictions: cap on ``k`` (default
            :func:`default_max_predictions` of seq). mask_token_prob: chance a chosen position becomes ``[MASK]``.
        replacement: draw positions with replacement (the official code) instead of without.
        generator: RNG for the draws (default the global torch RNG, so training state checkpoints cover it).
        random_token_prob: chance a chosen position becomes a uniformly random id of ``[0, vocab_size)`` (BERT's
            0.1; ELECTRA's 0); ``mask_token_prob + random_token_prob <= 1``, the rest keep their token.
        vocab_size: the vocabulary the random tokens come from (needed when ``random_token_prob > 0``).
    """
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids, dtype=torch.long)
    _check_inputs(input_ids, attention_mask, mask_prob, mask_token_prob)
    _check_random_tokens(mask_token_prob, random_token_prob, vocab_size)
    b, n = input_ids.shape
    cap = default_max_predictions(n, mask_prob) if max_predictions is None else int(max_predictions)
    _check_max_predictions(cap)
    cap = min(cap, n)
    dev = input_ids.device
    tokens = attention_mask.to(torch.bool)  # (batch, seq) the non-pad tokens, [CLS]/[SEP] included
    cand = tokens.clone()
    for s in set(int(i) for i in special_ids) | {int(mask_token_id)}:
        cand &= input_ids != s
    k = num_to_predict(tokens.sum(1), mask_prob, cap)  # (batch,)
    slot_valid = torch.arange(cap, device=dev)[None, :] < k[:, None]  # (batch, cap): the first k slots are used
    if replacement:
        probs = cand.to(torch.float32)
        has = probs.sum(1) > 0
        probs[~has] = 1.0  # rows without candidates: draws are discarded below
        pos = torch.multinomial(probs, cap, replacement=True, generator=generator)  # (batch, cap)
        slot_valid &= has[:, None]
    else:
        scores = torch.where(cand, _rand((b, n), generator, dev), torch.full((b, n), -1.0, device=dev))
        top = scores.topk(cap, dim=1)  # a uniformly random ordering of the candidates (then non-candidates)
        pos = top.indices
        slot_valid &= top.values >= 0  # fewer candidates than k: mask them all
    w = slot_valid.to(torch.int64)
    counts = torch.zeros(b, n, dtype=torch.int64, device=dev).scatter_add_(1, pos, w)
    u = _rand((b, cap), generator, dev)  # one draw per slot: [MASK], random token (BERT) or kept
    to_mask_token = slot_valid & (u < mask_token_prob)
    mask_hits = torch.zeros(b, n, dtype=torch.int64, device=dev).scatter_add_(1, pos, to_mask_token.to(torch.int64))
    is_masked = counts > 0
    masked_ids = torch.where(mask_hits > 0, torch.full_like(input_ids, mask_token_id), input_ids)
    if random_token_prob > 0:  # a position drawn twice: [MASK] if any draw says so, else random if any says so
        to_random = slot_valid & (u >= mask_token_prob) & (u < mask_token_prob + random_token_prob)
        random_hits = torch.zeros(b, n, dtype=torch.int64, device=dev).scatter_add_(1, pos, to_random.to(torch.int64))
        random_ids = _randint(vocab_size, (b, n), generator, dev).to(input_ids.dtype)
        masked_ids = torch.where((random_hits > 0) & (mask_hits == 0), random_ids, masked_ids)
    return MaskedBatch(masked_ids, input_ids, is_masked, counts)


# ----------------------------------------------------------------------------------------------------- checks
def _check_inputs(input_ids: torch.Tensor, attention_mask: torch.Tensor, mask_prob: float,
                  mask_token_prob: float) -> None:
    if input_ids.ndim != 2 or input_ids.is_floating_point():
        raise ValueError(f"input_ids must be an integer (batch, seq) tensor, got {input_ids.dtype} "
                         f"of shape {tuple(input_ids.shape)}")
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask must have shape {tuple(input_ids.shape)}, got {tuple(attention_mask.shape)}")
    if not 0.0 < mask_prob <= 1.0:
        raise ValueError(f"mask_prob must be in (0, 1], got {mask_prob}")
    if not 0.0 <= mask_token_prob <= 1.0:
        raise ValueError(f"mask_token_prob must be in [0, 1], got {mask_token_prob}")


def _check_random_tokens(mask_token_prob: float, random_token_prob: float, vocab_size: int | None) -> None:
    if not 0.0 <= random_token_prob <= 1.0:
        raise ValueError(f"random_token_prob must be in [0, 1], got {random_token_prob}")
    if mask_token_prob + random_token_prob > 1.0 + 1e-9:
        raise ValueError(f"mask_token_prob + random_token_prob must be <= 1 (the rest keep their token), got "
                         f"{mask_token_prob} + {random_token_prob}")
    if random_token_prob > 0 and (isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1):
        raise ValueError(f"random_token_prob > 0 draws random tokens: vocab_size must be a positive int, "
                         f"got {vocab_size!r}")


def _check_max_predictions(cap: int) -> None:
    if cap < 1:
        raise ValueError(f"max_predictions must be >= 1, got {cap}")
