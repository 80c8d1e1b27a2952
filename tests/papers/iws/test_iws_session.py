"""Sessions: the start-up protocol and budget, answers with weights, skip and undo, exact resume from disk, wrong
data sets refused, exports, held-out quality, examples with highlight spans, and the multiclass path."""

import csv
import json

import numpy as np
import pytest
from iws_corpus import sentiment_corpus

from paperzoo.papers.iws import (
    LEVELS,
    EnsembleConfig,
    IWSSession,
    LFConfig,
    MLPConfig,
    SessionConfig,
    simulated_oracle,
)

CLASSES = ("negative", "positive")
FAST = EnsembleConfig(members=6, mlp=MLPConfig(epochs=30))


def _config(**kw):
    return SessionConfig(ensemble=FAST, budget=kw.pop("budget", 12), fingerprint_dim=8, n_predict=5, **kw)


def _session(path=None, **kw):
    texts, labels = sentiment_corpus()
    heldout = sentiment_corpus(40, seed=1)
    s = IWSSession.create(texts, CLASSES, _config(**kw), LFConfig(min_df=5), seed_lfs=[("great", "positive")],
                          dataset="toy", path=path, heldout=heldout)
    return s, texts, labels


def test_start_up_then_acquisition_within_the_budget(one_thread):
    s, texts, labels = _session(budget=9)
    useful = simulated_oracle(s.lfs, labels)
    phases, seen = [], set()
    while (q := s.next_query()) is not None:
        phases.append(q.phase)
        assert q.lf not in seen and q.lf != s.seed_lfs[0]
        seen.add(q.lf)
        s.answer("useful" if useful[q.lf] else "not useful", lf=q.lf)
    assert phases == ["start-up"] * 4 + ["acquisition"] * 5 and s.n_answers == 9 and s.done()
    with pytest.raises(ValueError, match="finished"):
        s.answer("useful")


def test_answers_carry_the_five_level_weights(one_thread):
    s, _, _ = _session()
    for level in LEVELS:
        s.answer(level)
    got = list(s.answers().values())
    assert got == [LEVELS[k] for k in LEVELS]
    assert LEVELS["don't know"] == (0.5, 0.0) and LEVELS["likely useful"] == (1.0, 0.5)
    lf, label, weight = s.known()
    assert weight[label == 0.5].tolist() == [0.0]
    with pytest.raises(ValueError, match="unknown answer"):
        s.answer("maybe")
    with pytest.raises(ValueError, match="not the pending query"):
        s.answer("useful", lf=(s.pending + 1) % s.lfs.n_lfs)


def test_skip_and_undo(one_thread):
    s, _, _ = _session()
    first = s.next_query().lf
    s.skip()
    assert s.n_answers == 0 and first in s.skipped() and s.pending != first
    second = s.pending
    after = s.answer("useful")
    assert s.undo().lf == second and s.n_answers == 0  # the LF of the answer taken back is shown again
    assert s.answer("useful").lf == after.lf  # re-answering leads where it led before
    assert s.undo().lf == second and s.undo().lf == first and s.undo() is None
    assert not s.skipped()


def test_save_after_every_answer_and_exact_resume(tmp_path, one_thread):
    path = tmp_path / "toy.iws.json"
    s, texts, labels = _session(path)
    useful = simulated_oracle(s.lfs, labels)
    for _ in range(7):  # into the acquisition phase
        s.answer("useful" if useful[s.pending] else "likely not useful")
    saved = json.loads(path.read_text())
    assert len(saved["events"]) == 7 and saved["pending"] == s.pending
    r = IWSSession.load(path, texts)
    assert r.next_query().to_dict() == s.next_query().to_dict()
    np.testing.assert_array_equal(r.model()[0], s.model()[0])  # the saved model, not a refit
    for _ in range(4):  # and the sessions keep asking the same LFs
        a, b = s.answer("useful" if useful[s.pending] else "not useful"), r.answer(
            "useful" if useful[r.pending] else "not useful")
        assert a.lf == b.lf
    assert (tmp_path / "toy.iws.json.lfs.npz").is_file() and (tmp_path / "toy.iws.json.model.safetensors").is_file()


def test_a_session_from_another_data_set_is_refused(tmp_path, one_thread):
    path = tmp_path / "toy.iws.json"
    _session(path)
    other, _ = sentiment_corpus(seed=5)
    with pytest.raises(ValueError, match="session on data set 'toy'"):
        IWSSession.load(path, other)
    path.with_name("bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable IWS session"):
        IWSSession.load(path.with_name("bad.json"), other)


def test_query_examples_highlight_the_ngram(one_thread):
    s, texts, _ = _session()
    q = s.next_query()
    assert q.examples and q.description.startswith("contains term")
    for ex in q.examples:
        assert texts[ex.doc][ex.offset:ex.offset + len(ex.snippet)] == ex.snippet
        assert ex.spans and all(ex.snippet[a:b].lower() == q.pattern for a, b in ex.spans)
    assert q.vote == (1 if q.label == 1 else -1) and 0 < q.coverage <= 1


def test_exports_and_held_out_quality(tmp_path, one_thread):
    s, _, labels = _session()
    useful = simulated_oracle(s.lfs, labels)
    for _ in range(10):
        s.answer("useful" if useful[s.pending] else "not useful")
    prog = s.progress(quality=True)
    # two found + the seed: three accurate LFs on ~2/3 of the held-out reviews (the rest get the prior)
    assert prog["queries"] == 10 and prog["heldout"]["lfs"] == 3 and 0.5 < prog["heldout"]["coverage"] < 1
    assert prog["heldout"]["auc"] > 0.7
    lfs_csv = s.export_lfs(tmp_path / "lfs.csv")
    rows = list(csv.DictReader(lfs_csv.open()))
    assert {r["source"] for r in rows} <= {"seed", "answered", "predicted"} and "seed" in {r["source"] for r in rows}
    assert len(rows) == len(s.final_lfs())
    lab = json.loads(s.export_labels(tmp_path / "labels.json").read_text())
    assert len(lab) == s.lfs.n_docs and {"doc", "covered", "label", "p_negative", "p_positive"} <= set(lab[0])
    covered = [r for r in lab if r["covered"]]
    acc = np.mean([(r["label"] == "positive") == bool(labels[r["doc"]]) for r in covered])
    assert acc > 0.8
    with pytest.raises(ValueError, match=r"\.csv or \.json"):
        s.export_lfs(tmp_path / "lfs.txt")


def test_multiclass_one_vs_rest_session(one_thread):
    words = {0: ("apple", "pear", "plum"), 1: ("car", "bus", "train"), 2: ("red", "blue", "green")}
    rng = np.random.default_rng(0)
    texts, labels = [], []
    for i in range(150):
        y = i % 3
        texts.append(" ".join(list(rng.choice(words[y], 2)) + list(rng.choice(["the", "thing", "stuff"], 2))))
        labels.append(y)
    s = IWSSession.create(texts, ("fruit", "vehicle", "colour"), _config(budget=10), LFConfig(min_df=5),
                          seed_lfs=[("apple", "fruit"), ("car", "vehicle"), ("red", "colour")])
    assert s.n_families == 3 and set(s.family.tolist()) == {0, 1, 2}
    useful = simulated_oracle(s.lfs, labels)
    s.simulate(useful, [10], ["as"])
    mu, sigma = s.model()
    assert mu.shape == (s.lfs.n_lfs,) and np.isfinite(mu[s.unqueried()]).all()
    soft = s.soft_labels("lse-ac")
    assert soft.probs.shape == (150, 3)
    assert (soft.probs[soft.covered].argmax(1) == np.array(labels)[soft.covered]).mean() > 0.9
    votes = s.lfs.votes()[s.final_lfs("lse-ac")]
    assert set(votes.tolist()) == {1, 2, 3}  # every family contributes


def _three_class(seed=1, n=150):
    words = {0: ("apple", "pear", "plum"), 1: ("car", "bus", "train"), 2: ("red", "blue", "green")}
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        y = i % 3
        texts.append(" ".join(list(rng.choice(words[y], 2)) + list(rng.choice(["the", "thing", "stuff"], 2))))
        labels.append(y)
    return texts, labels


def _three_class_session(texts, path=None, budget=12):
    return IWSSession.create(texts, ("fruit", "vehicle", "colour"), _config(budget=budget, n_random_init=2),
                             LFConfig(min_df=5), seed_lfs=[("apple", "fruit"), ("car", "vehicle"), ("red", "colour")],
                             path=path)


def test_multiclass_refits_only_the_family_whose_answers_changed(tmp_path, one_thread, monkeypatch):
    """After the start-up each answer refits one family's ensemble (the turn's, whose answer came K answers ago),
    not all K; a family's fit does not depend on when it is asked for (a session that also computes every final
    set after every answer asks the same queries); and a multiclass session resumes exactly from disk."""
    texts, labels = _three_class()
    fits = []
    from paperzoo.papers.iws.expert import ExpertModel

    real = ExpertModel.fit_family
    monkeypatch.setattr(ExpertModel, "fit_family", lambda self, g, *a, **k: (fits.append(g), real(self, g, *a, **k)))
    plain, eager = _three_class_session(texts), _three_class_session(texts, tmp_path / "s.iws.json")
    useful = simulated_oracle(plain.lfs, labels)
    asked = {"plain": [], "eager": []}
    per_answer = []
    for i in range(12):
        for name, s in (("plain", plain), ("eager", eager)):
            q = s.next_query()
            asked[name].append(q.lf)
            before = len(fits)
            s.answer("useful" if useful[q.lf] else "not useful", lf=q.lf)
            if name == "plain" and i >= 6 and not s.done():
                per_answer.append(len(fits) - before)
            if name == "eager":
                s.final_lfs("lse-ac")  # refits every stale family now
        if i == 8:
            eager = IWSSession.load(tmp_path / "s.iws.json", texts)  # resume mid-acquisition
    assert asked["plain"] == asked["eager"]
    assert per_answer and all(n <= 1 for n in per_answer), per_answer
    np.testing.assert_array_equal(plain.final_lfs("lse-ac"), eager.final_lfs("lse-ac"))
    np.testing.assert_allclose(plain.model()[0], eager.model()[0], equal_nan=True)


def test_multiclass_families_take_turns_with_their_own_start_up(one_thread):
    """One-vs-rest: answer n goes to family n mod K and each family gets n_random_init random start-up queries.
    Without turns the argmax over all families starved the families whose model had seen only their (positive) seed
    LF: on AG News two of four families kept one answer each out of 40 and LSE-ac filled them with common words."""
    words = {0: ("apple", "pear", "plum"), 1: ("car", "bus", "train"), 2: ("red", "blue", "green")}
    rng = np.random.default_rng(1)
    texts, labels = [], []
    for i in range(150):
        y = i % 3
        texts.append(" ".join(list(rng.choice(words[y], 2)) + list(rng.choice(["the", "thing", "stuff"], 2))))
        labels.append(y)
    s = IWSSession.create(texts, ("fruit", "vehicle", "colour"), _config(budget=12, n_random_init=2),
                          LFConfig(min_df=5), seed_lfs=[("apple", "fruit"), ("car", "vehicle"), ("red", "colour")])
    assert s.n_startup == 6
    useful = simulated_oracle(s.lfs, labels)
    fams, phases = [], []
    while (q := s.next_query()) is not None:
        fams.append(int(s.family[q.lf]))
        phases.append(q.phase)
        s.answer("useful" if useful[q.lf] else "not useful", lf=q.lf)
    assert fams == [0, 1, 2] * 4 and phases == ["start-up"] * 6 + ["acquisition"] * 6


def test_class_balance_reaches_the_label_model(one_thread):
    s, _, _ = _session(class_balance=(0.5, 0.5))
    assert s.config.class_balance == (0.5, 0.5)
    assert SessionConfig.from_dict(s.config.to_dict()) == s.config  # survives a save (tuples, not lists)
    texts, _ = sentiment_corpus()
    with pytest.raises(ValueError, match="class_balance has 3 entries but the data set has 2 classes"):
        IWSSession.create(texts, CLASSES, _config(class_balance=(0.2, 0.3, 0.5)), LFConfig(min_df=5),
                          seed_lfs=[("great", "positive")])
