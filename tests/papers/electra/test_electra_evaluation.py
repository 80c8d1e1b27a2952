"""ELECTRA's held-out health figures on constructed cases: id-AUC, the context probe, the context verdict."""

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from paperzoo.nn.outputs import BaseModelOutput
from paperzoo.papers.electra.evaluation import (
    CONTEXT_LEARNED,
    context_verdict,
    cross_fitted_odds,
    evaluate_pretrainer,
    replaced_id_odds,
    replaced_token_probe,
)
from paperzoo.papers.electra.model import ElectraConfig, ElectraGenerator
from paperzoo.papers.electra.objective import ElectraPretrainer, ObjectiveConfig

PAD, CLS, SEP = 0, 2, 3
VOCAB = 30


def zipf_windows(n=96, seq=32, seed=0):
    """[CLS] ids [SEP] [PAD]..., ids 5..29 drawn with Zipf weights (a skewed unigram, as text's)."""
    g = torch.Generator().manual_seed(seed)
    w = 1.0 / torch.arange(1, VOCAB - 4, dtype=torch.float64)
    ids = 5 + torch.multinomial(w, n * seq, replacement=True, generator=g).view(n, seq)
    mask = torch.ones(n, seq, dtype=torch.long)
    for i, L in enumerate(torch.randint(seq // 2, seq + 1, (n,), generator=g).tolist()):
        ids[i, 0], ids[i, L - 1] = CLS, SEP
        ids[i, L:], mask[i, L:] = PAD, 0
    return TensorDataset(ids, mask)


class IdScorer(nn.Module):
    """A context-free discriminator body: the score of a token is a fixed function of its id."""

    def __init__(self, scores: torch.Tensor):
        super().__init__()
        self.scores = nn.Parameter(scores.float().clone(), requires_grad=False)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        return BaseModelOutput(last_hidden_state=self.scores[input_ids][..., None])


class Oracle(nn.Module):
    """A discriminator body given the answer: it holds the original windows (read in order, batch after batch) and
    scores 1 where the input differs from them."""

    def __init__(self, originals: torch.Tensor):
        super().__init__()
        self.originals, self.at = originals, 0
        self.w = nn.Parameter(torch.zeros(1), requires_grad=False)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        orig = self.originals[self.at:self.at + len(input_ids)]
        self.at = (self.at + len(input_ids)) % len(self.originals)
        return BaseModelOutput(last_hidden_state=(input_ids != orig).float()[..., None])


class Squeeze(nn.Module):
    def forward(self, h):
        return h.squeeze(-1)


def pretrainer(body: nn.Module, skew: float = 2.0) -> ElectraPretrainer:
    """A real (untrained) generator with a skewed output bias, so that it prefers some ids, and ``body``."""
    torch.manual_seed(0)
    gen = ElectraGenerator(ElectraConfig.preset("tiny", vocab_size=VOCAB, max_len=32))
    with torch.no_grad():
        gen.head.bias.copy_(skew * torch.randn(VOCAB))
    return ElectraPretrainer(gen, body, Squeeze(), ObjectiveConfig())


def test_a_context_free_scorer_gets_probe_one_half():
    data = zipf_windows(n=256)
    torch.manual_seed(1)
    for scores in (torch.randn(VOCAB), -torch.arange(VOCAB, dtype=torch.float)):  # random; rare ids "replaced"
        probe = replaced_token_probe(pretrainer(IdScorer(scores)), data)
        assert 0.1 < probe["probe_replaced_frac"] < 0.2
        assert probe["probe_auc"] == pytest.approx(0.5, abs=0.015)


def test_a_discriminator_given_the_answer_gets_probe_near_one():
    data = zipf_windows()
    probe = replaced_token_probe(pretrainer(Oracle(data.tensors[0])), data)
    # only a draw equal to the original (label 1, input unchanged) escapes it
    assert probe["probe_auc"] > 0.93


def test_probe_is_fixed_and_restores_the_mode():
    data = zipf_windows()
    model = pretrainer(IdScorer(torch.randn(VOCAB))).train()
    assert replaced_token_probe(model, data) == replaced_token_probe(model, data)
    assert model.training
    with pytest.raises(ValueError, match="unigram"):
        replaced_token_probe(model, data, unigram=torch.zeros(VOCAB))


class HalfOdds(nn.Module):
    """A context-free discriminator body whose score is the id's replaced odds estimated on the other half of the
    windows (read in order, batch after batch): the id-AUC's own scorer."""

    def __init__(self, first: torch.Tensor, second: torch.Tensor, cut: int, n: int):
        super().__init__()
        self.first, self.second, self.cut, self.n, self.at = first.float(), second.float(), cut, n, 0
        self.w = nn.Parameter(torch.zeros(1), requires_grad=False)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        rows = (self.at + torch.arange(len(input_ids))) % self.n
        self.at = (self.at + len(input_ids)) % self.n
        table = torch.where((rows < self.cut)[:, None], self.second[input_ids], self.first[input_ids])
        return BaseModelOutput(last_hidden_state=table.log()[..., None])


def test_id_auc_of_a_scorer_equal_to_the_per_id_odds_equals_its_auc():
    data = zipf_windows()
    model = pretrainer(IdScorer(torch.zeros(VOCAB)))
    first, second, cut = cross_fitted_odds(model, data, batch=40)
    assert cut == len(data) // 2 and not torch.equal(first, second)
    model.discriminator_body = HalfOdds(first, second, cut, len(data))
    res = evaluate_pretrainer(model, data, batch=40)  # batches that straddle the halves
    assert 0.6 < res["eval_disc_auc"] < 1.0  # the skewed generator makes ids informative
    assert res["eval_disc_auc"] == res["eval_id_auc"]
    assert res["eval_probe_auc"] == pytest.approx(0.5, abs=0.03)
    model.discriminator_body = IdScorer(torch.randn(VOCAB))  # another context-free scorer does worse
    assert evaluate_pretrainer(model, data)["eval_disc_auc"] < res["eval_id_auc"]


def test_per_id_odds_match_the_replaced_rate_of_sampled_corruptions():
    """q(v) from the generator's softmax = the fraction of tokens shown as v that were replaced, over many
    independent maskings and samples (Monte Carlo), for every id shown often enough."""
    data = zipf_windows(n=64)
    model = pretrainer(IdScorer(torch.zeros(VOCAB)))
    q = replaced_id_odds(model, data)
    ids, mask = data.tensors
    rep, shown = torch.zeros(VOCAB), torch.zeros(VOCAB)
    with torch.no_grad():
        for s in range(60):
            out = model(ids, mask, noise_generator=torch.Generator().manual_seed(s))
            keep = mask.bool()
            rep += torch.bincount(out.corrupt_ids[keep & out.labels], minlength=VOCAB)
            shown += torch.bincount(out.corrupt_ids[keep], minlength=VOCAB)
    often = shown > 400
    assert int(often.sum()) >= 8
    assert (q[often].float() - rep[often] / shown[often]).abs().max() < 0.04
    assert bool(often[CLS])  # never masked, but the generator may propose it: checked like any id


def test_evaluation_of_a_real_pretrainer_reports_the_health_figures():
    from paperzoo.papers.electra.model import build_generator_and_discriminator

    torch.manual_seed(0)
    gen, disc = build_generator_and_discriminator(ElectraConfig.preset("tiny", vocab_size=VOCAB, max_len=32))
    model = ElectraPretrainer(gen, disc.body, disc.head, ObjectiveConfig()).train()
    res = evaluate_pretrainer(model, zipf_windows(n=16))
    for k in ("eval_disc_auc", "eval_id_auc", "eval_probe_auc", "eval_probe_acc", "eval_token_cosine"):
        assert 0.0 <= res[k] <= 1.0, k
    assert model.training  # evaluation leaves the mode as it was
    mlm = ElectraPretrainer(ElectraGenerator(ElectraConfig.preset("tiny", vocab_size=VOCAB, max_len=32)), None,
                            None, ObjectiveConfig(mode="mlm"))
    res = evaluate_pretrainer(mlm, zipf_windows(n=16))
    assert "eval_id_auc" not in res and "eval_token_cosine" in res
    with pytest.raises(ValueError, match="RTD head"):
        replaced_token_probe(mlm, zipf_windows(n=4))


def test_context_verdict_needs_both_intervals():
    auc, ida = [0.80, 0.82, 0.81], [0.70, 0.71, 0.70]
    assert context_verdict(auc, ida, [0.60, 0.62, 0.61]).verdict == "reproduced"
    assert context_verdict(auc, ida, [0.50, 0.49, 0.51]).verdict == "inconclusive"  # probe at chance
    assert context_verdict(ida, auc, [0.60, 0.62, 0.61]).verdict == "not reproduced"  # AUC below its id-AUC
    assert context_verdict([0.8], [0.7], [0.6]).verdict == "inconclusive"  # one seed: no interval
    assert set(CONTEXT_LEARNED) == {"reproduced", "not reproduced", "inconclusive"}
