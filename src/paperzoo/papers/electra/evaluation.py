"""Held-out evaluation of ELECTRA-style pretraining, with the figures that say whether a discriminator uses context.

A replaced-token detector can score a high AUC without reading any context: the generator replaces some ids far
more often than the text shows them (early in training, the ids it over-samples), so knowing "which ids the
generator likes" ranks replaced tokens high. :func:`evaluate_pretrainer` reports, beside the discriminator's AUC:

* ``eval_id_auc``: the AUC of a context-free scorer, ``s(v) = P(a token shown as id v was replaced)`` under the
  current generator (:func:`replaced_id_odds`), on the same positions and labels as ``eval_disc_auc``. Clean
  split (:func:`cross_fitted_odds`): the odds are estimated on one half of the held-out windows, with an
  independent masking and the generator's expected replacement counts (its softmax, not its samples), and score the
  other half, and vice versa; neither the tokens, the masks, the samples nor the labels being scored are used.
* ``eval_probe_auc`` (and ``_acc``): the context probe (:func:`replaced_token_probe`): the same held-out windows
  with 15% of the non-special tokens replaced by draws from the windows' own unigram distribution; replaced and
  original tokens then have the same id distribution, so any context-free scorer has expected AUC 0.5.
* ``eval_token_cosine``: :func:`token_state_cosine` of the encoder (near 1: every token mapped to one vector).

A discriminator has learned context only when its AUC exceeds its id-AUC and the probe exceeds 0.5, each with a
95% interval over seeds (:func:`context_verdict`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import scipy.stats
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from paperzoo.report.verdict import Beats, Paired, Verdict, all_of

if TYPE_CHECKING:
    from .objective import ElectraPretrainer, PretrainOutput

__all__ = ["binary_auc", "pretraining_metrics", "evaluate_pretrainer", "replaced_id_odds", "cross_fitted_odds",
           "replaced_token_probe", "token_state_cosine", "context_verdict", "CONTEXT_LEARNED"]

# what context_verdict's verdicts mean for a discriminator
CONTEXT_LEARNED = {"reproduced": "learned context", "not reproduced": "did not learn context",
                   "inconclusive": "context not shown (an interval spans its margin)"}
_ODDS_SEED, _MASK_SEED, _NOISE_SEED = 8765, 1234, 4321


def binary_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC = P(score of a positive > score of a negative) (ties count 1/2), by ranks; nan if one class is absent."""
    s, y = scores.detach().flatten().double(), labels.detach().flatten().bool()
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = torch.from_numpy(scipy.stats.rankdata(s.cpu().numpy(), method="average"))  # ties: the mean rank
    return float((ranks[y.cpu()].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))  # Mann-Whitney U / (n+ n-)


def pretraining_metrics(out: PretrainOutput, auc: bool = True) -> dict[str, float]:
    """Generator accuracy at masked positions; for the discriminator (over its loss positions): accuracy,
    precision and recall of "replaced" (logit > 0), AUC, the replaced fraction and the all-original baseline's
    accuracy (``1 - replaced fraction``)."""
    m = {"mlm_loss": float(out.mlm_loss), "gen_acc": float(out.gen_correct.float().mean())
         if out.gen_correct is not None and out.gen_correct.numel() else float("nan")}
    for k, v in out.extra.items():
        m[k] = float(v)
    if out.disc_loss is not None:
        m["disc_loss"] = float(out.disc_loss)
    if out.disc_logits is None:
        return m
    sel = out.weights > 0
    pred, y = out.disc_logits[sel] > 0, out.labels[sel]
    tp = float((pred & y).sum())
    m.update(disc_acc=float((pred == y).float().mean()),
             disc_precision=tp / float(pred.sum()) if pred.any() else float("nan"),
             disc_recall=tp / float(y.sum()) if y.any() else float("nan"),
             replaced_frac=float(y.float().mean()), baseline_acc=1.0 - float(y.float().mean()))
    if auc:
        m["disc_auc"] = binary_auc(out.disc_logits[sel], y)
    return m


@torch.no_grad()
def evaluate_pretrainer(model: ElectraPretrainer, data: TensorDataset, batch: int = 64) -> dict[str, float]:
    """Pretraining metrics on held-out windows with a fixed masking and sampling seed (same positions every time),
    and, for a discriminator, ``eval_id_auc``, the context probe ``eval_probe_auc`` / ``eval_probe_acc`` and
    ``eval_token_cosine`` (see the module docstring)."""
    ids, mask = data.tensors
    outs = []
    mg, ng = torch.Generator().manual_seed(_MASK_SEED), torch.Generator().manual_seed(_NOISE_SEED)
    for i in range(0, len(ids), batch):
        x, m = ids[i:i + batch], mask[i:i + batch]
        outs.append(model(x, m, masked=model.mask(x, m, mg), noise_generator=ng))
    keys = ("loss", "mlm_loss", "disc_loss")
    res: dict[str, float] = {}
    for k in keys:
        vals = [getattr(o, k) for o in outs if getattr(o, k) is not None]
        if vals:
            res[f"eval_{k}"] = float(torch.stack([v.float() for v in vals]).mean())
    # pooled token-level metrics
    o = outs[0]
    disc = o.disc_logits is not None
    if len(outs) > 1:
        cat = lambda name: torch.cat([getattr(x, name).flatten() for x in outs])  # noqa: E731
        o = dataclasses.replace(o, gen_correct=cat("gen_correct"),
                                disc_logits=cat("disc_logits") if disc else None,
                                labels=cat("labels") if disc else None,
                                weights=cat("weights") if disc else None,
                                corrupt_ids=cat("corrupt_ids") if disc else None,
                                extra={k: torch.stack([x.extra[k] for x in outs]).mean() for k in o.extra})
    res.update({f"eval_{k}": v for k, v in pretraining_metrics(o).items() if k not in ("mlm_loss", "disc_loss")})
    if disc:
        if len(ids) >= 2:
            first, second, cut = cross_fitted_odds(model, data, batch)  # (vocab,) each, from the other half
            shown = o.corrupt_ids.view(len(ids), -1).cpu()  # (n, seq): window-major, as the batches were pooled
            scores = torch.cat([second[shown[:cut]], first[shown[cut:]]])  # each half scored by the other's odds
            sel = o.weights.view(len(ids), -1).cpu() > 0
            res["eval_id_auc"] = binary_auc(scores[sel], o.labels.view(len(ids), -1).cpu()[sel])
        probe = replaced_token_probe(model, data, batch=batch)
        res.update(eval_probe_auc=probe["probe_auc"], eval_probe_acc=probe["probe_acc"])
    res["eval_token_cosine"] = token_state_cosine(model.encoder(), data)
    return res


@torch.no_grad()
def replaced_id_odds(model: ElectraPretrainer, data: TensorDataset, batch: int = 64, seed: int = _ODDS_SEED,
                     prior: float = 1.0) -> torch.Tensor:
    """Per id ``v``, the probability that a token the discriminator is shown as ``v`` was replaced, under the current
    generator, from the held-out windows ``data`` (ids, attention mask) with an independent masking (``seed``).

    With ``p_t`` the generator's sampling distribution ``softmax(logits / T)`` at masked position ``t`` (original
    ``x_t``), expected counts over the windows::

        R(v) = sum_{t in m} p_t(v) 1[v != x_t]                                  # shown as v, replaced
        O(v) = #{t not in m, x_t = v} + sum_{t in m, x_t = v} p_t(v)            # shown as v, original
        q(v) = (R(v) + prior r) / (R(v) + O(v) + prior),  r = sum R / sum (R + O)

    (``prior`` pseudo-counts at the overall replaced rate ``r`` for ids never shown). Returns ``q`` (vocab,) float64.
    """
    _check_discriminator_mode(model)
    ids, mask = data.tensors
    c = model.config
    vocab = model.generator.body.embeddings.word.num_embeddings
    rep = torch.zeros(vocab, dtype=torch.float64)
    orig = torch.zeros(vocab, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    for i in range(0, len(ids), batch):
        x, am = ids[i:i + batch], mask[i:i + batch]
        mb = model.mask(x, am, g)
        m = mb.is_masked  # (b, seq)
        z = model.generator(mb.input_ids, am, positions=m).logits.float() / c.temperature  # (M, vocab)
        targets = x[m]  # (M,)
        if c.disallow_correct:  # as gumbel_sample's disallow
            z = z.scatter_add(1, targets[:, None], torch.full((len(z), 1), -1000.0, device=z.device))
        p = torch.softmax(z, -1).double().cpu()  # p_t(v)
        p_same = p.gather(1, targets[:, None].cpu()).squeeze(1)  # p_t(x_t): the sample equals the original
        rep += p.sum(0)
        rep.index_add_(0, targets.cpu(), -p_same)  # R(v): minus the mass on the original itself
        kept = am.bool() & ~m
        orig += torch.bincount(x[kept].cpu(), minlength=vocab).double()
        orig.index_add_(0, targets.cpu(), p_same)  # O(v)
    rep.clamp_(min=0.0)
    r = float(rep.sum() / (rep.sum() + orig.sum()).clamp_min(1e-12))
    return (rep + prior * r) / (rep + orig + prior)


def cross_fitted_odds(model: ElectraPretrainer, data: TensorDataset, batch: int = 64
                      ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """:func:`replaced_id_odds` on each half of the windows: ``(q from windows [:cut], q from windows [cut:], cut)``,
    ``cut = n // 2``; the first scores the second half, the second the first."""
    ids, mask = data.tensors
    cut = len(ids) // 2
    return (replaced_id_odds(model, TensorDataset(ids[:cut], mask[:cut]), batch, seed=_ODDS_SEED),
            replaced_id_odds(model, TensorDataset(ids[cut:], mask[cut:]), batch, seed=_ODDS_SEED + 1), cut)


@torch.no_grad()
def replaced_token_probe(model: ElectraPretrainer, data: TensorDataset, unigram: torch.Tensor | None = None,
                         rate: float = 0.15, seed: int = 0, batch: int = 64) -> dict[str, float]:
    """The context probe: the discriminator on a fixed, model-independent corruption of held-out windows.

    Each non-special, non-pad token is selected with probability ``rate`` (seeded) and replaced by a draw from
    ``unigram`` (vocab,) (default: the windows' own non-special id frequencies). Label 1 = selected: a draw equal to
    the original still counts, so that with the windows' own unigram the selected and the other tokens have the
    same id distribution and every context-free scorer has expected AUC 0.5; a detector of changed tokens scores
    ``1 - P(draw = original) / 2`` or more. Accuracy (logit > 0 = replaced) and AUC are over the non-special,
    non-pad tokens (special tokens are never replaced, so counting them would reward a context-free scorer).

    Returns ``probe_acc``, ``probe_auc``, ``probe_replaced_frac`` and ``probe_baseline_acc`` (all-original).
    """
    _check_discriminator_mode(model)
    was = model.training
    model.eval()
    ids, mask = (t.cpu() for t in data.tensors)
    cand = mask.bool() & ~torch.isin(ids, torch.tensor(model.config.special_ids))  # tokens that may be replaced
    if unigram is None:
        unigram = torch.bincount(ids[cand]).double()
    _check_unigram(unigram)
    g = torch.Generator().manual_seed(seed)
    pos = cand & (torch.rand(ids.shape, generator=g) < rate)
    draws = torch.multinomial(unigram.double() / unigram.sum(), int(pos.sum()), replacement=True, generator=g)
    fake = ids.masked_scatter(pos, draws.to(ids.dtype))
    dev = next(model.parameters()).device
    logits = torch.cat([model.rtd_head(model.discriminator_body(input_ids=fake[i:i + batch].to(dev),
                                                           attention_mask=mask[i:i + batch].to(dev)
                                                           ).last_hidden_state).float().cpu()
                        for i in range(0, len(ids), batch)])
    model.train(was)
    s, y = logits[cand], pos[cand]
    return {"probe_acc": float(((s > 0) == y).float().mean()), "probe_auc": binary_auc(s, y),
            "probe_replaced_frac": float(y.float().mean()), "probe_baseline_acc": 1.0 - float(y.float().mean())}


@torch.no_grad()
def token_state_cosine(encoder: nn.Module, data: TensorDataset, examples: int = 64, tokens: int = 1024) -> float:
    """Mean pairwise cosine similarity of ``encoder``'s final hidden states (eval mode; the mode is restored) at
    ``tokens`` real (non-pad) positions of the first ``examples`` windows: near 1 when the encoder maps every token
    to one vector (collapse)."""
    ids, mask = (t[:examples] for t in data.tensors)
    was = encoder.training
    dev = next(encoder.parameters()).device
    h = encoder.eval()(ids.to(dev), attention_mask=mask.to(dev)).last_hidden_state[mask.to(dev).bool()][:tokens]
    encoder.train(was)
    h = F.normalize(h.float(), dim=-1)
    return float((h @ h.T).mean())


def context_verdict(auc: list[float], id_auc: list[float], probe_auc: list[float], name: str = "the discriminator"
                    ) -> Verdict:
    """Whether a discriminator has learned context, from per-seed held-out figures: "reproduced" (= learned
    context, :data:`CONTEXT_LEARNED`) when the paired interval of AUC - id-AUC is above 0 and the probe's interval
    is above 0.5; "not reproduced" when either interval lies at or below; "inconclusive" otherwise."""
    return all_of(Paired().judge(auc, id_auc, f"{name}'s AUC", "its id-AUC"),
                  Beats().judge(probe_auc, 0.5, f"{name}'s context-probe AUC", "0.5"))


# ----------------------------------------------------------------------------------------------------- checks
def _check_discriminator_mode(model) -> None:
    if getattr(model, "rtd_head", None) is None:
        raise ValueError(f"the replaced-token figures need a discriminator with an RTD head (modes 'electra', "
                         f"'electra-15'), got mode {getattr(getattr(model, 'config', None), 'mode', None)!r}")


def _check_unigram(unigram: torch.Tensor) -> None:
    if (not isinstance(unigram, torch.Tensor) or unigram.ndim != 1 or not bool((unigram >= 0).all())
            or not float(unigram.sum()) > 0):
        raise ValueError(f"unigram must be a non-negative (vocab,) tensor with a positive sum, got "
                         f"{getattr(unigram, 'shape', type(unigram).__name__)}")
