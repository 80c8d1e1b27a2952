"""Label models: Snorkel's convention mapping, its >= 3 LF requirement, majority vote and Dawid-Skene."""

import numpy as np
import pytest
import scipy.sparse as sp

from paperzoo.papers.iws import dawid_skene, fit_label_model, from_snorkel, majority_vote, to_snorkel


def test_convention_mapping_binary_and_multiclass():
    iws = np.array([[1, 0, -1], [0, 0, 1]])
    assert to_snorkel(iws, 2).tolist() == [[1, -1, 0], [-1, -1, 1]]
    assert from_snorkel(to_snorkel(iws, 2), 2).tolist() == iws.tolist()
    multi = sp.csr_matrix(np.array([[3, 0, 1], [0, 2, 0]]))
    assert to_snorkel(multi, 3).tolist() == [[2, -1, 0], [-1, 1, -1]]
    assert from_snorkel(to_snorkel(multi, 3), 3).tolist() == multi.toarray().tolist()
    with pytest.raises(ValueError, match="must lie in"):
        to_snorkel(np.array([[2]]), 2)
    with pytest.raises(ValueError, match="must lie in"):
        to_snorkel(np.array([[4]]), 3)


def _synthetic(n=3000, accs=(0.9, 0.85, 0.8, 0.55, 0.6), cover=0.6, seed=0, k=2):
    rng = np.random.default_rng(seed)
    y = rng.integers(k, size=n)
    cols = []
    for j, a in enumerate(accs):  # LF j votes its own class c_j: right when y == c_j with accuracy a
        c = j % k
        fires = rng.random(n) < cover
        right = rng.random(n) < a
        fires &= np.where(y == c, right, ~right)  # votes c mostly on class-c documents
        cols.append(np.where(fires, (1 if c == 1 else -1) if k == 2 else c + 1, 0))
    return sp.csr_matrix(np.stack(cols, 1)), y


def test_label_models_recover_the_labels():
    votes, y = _synthetic()
    for model in ("snorkel", "majority", "dawid-skene"):
        soft = fit_label_model(votes, 2, model, seed=0)
        c = soft.covered
        acc = (soft.probs[c].argmax(1) == y[c]).mean()
        assert soft.model == model and acc > 0.75, (model, acc)
        np.testing.assert_allclose(soft.probs.sum(1), 1, atol=1e-6)
    assert not fit_label_model(sp.csr_matrix((4, 3), dtype=np.int8), 2).covered.any()


def test_majority_vote_is_the_softmax_of_vote_counts():
    votes = sp.csr_matrix(np.array([[1, 1, -1], [-1, 0, 0]]))
    p = majority_vote(votes, 2)
    np.testing.assert_allclose(p[0], [np.exp(1) / (np.exp(1) + np.exp(2)), np.exp(2) / (np.exp(1) + np.exp(2))])
    np.testing.assert_allclose(p[1], [np.e / (np.e + 1), 1 / (np.e + 1)])


def test_dawid_skene_downweights_a_bad_lf():
    # three reliable LFs voting class 1 and a noisy one voting class 0 everywhere it fires
    votes, y = _synthetic(accs=(0.95, 0.3, 0.9, 0.6), cover=0.7, seed=1)
    ds = dawid_skene(votes, 2)
    mv = majority_vote(votes, 2)
    cov = np.diff(votes.indptr) > 0
    assert (ds[cov].argmax(1) == y[cov]).mean() >= (mv[cov].argmax(1) == y[cov]).mean()


def test_snorkel_needs_three_lfs_else_majority_vote_with_a_warning():
    votes, _ = _synthetic(accs=(0.9, 0.8))
    with pytest.warns(UserWarning, match="at least 3 LFs"):
        soft = fit_label_model(votes, 2, "snorkel")
    assert soft.model == "majority"
    with pytest.raises(ValueError, match="unknown label model"):
        fit_label_model(votes, 2, "flyingcube")


def test_multiclass_label_models():
    votes, y = _synthetic(accs=(0.9, 0.85, 0.8, 0.9, 0.85, 0.8), k=3, cover=0.5)
    for model in ("snorkel", "majority", "dawid-skene"):
        soft = fit_label_model(votes, 3, model, seed=0)
        assert soft.probs.shape == (len(y), 3)
        assert (soft.probs[soft.covered].argmax(1) == y[soft.covered]).mean() > 0.7, model


def test_class_balance_moves_snorkel_toward_the_stated_prior():
    """A 10%-positive set whose LFs are weak: told the balance, Snorkel labels far fewer covered documents positive
    (uniform prior: about half), closer to the truth; a balance of the wrong length or not summing to 1 is refused."""
    rng = np.random.default_rng(0)
    n = 4000
    y = (rng.random(n) < 0.1).astype(int)
    cols = []
    for j in range(6):  # each LF votes its class c with accuracy 0.7 on a random 40% of the documents
        c = j % 2
        fires = rng.random(n) < 0.4
        vote = np.where(rng.random(n) < 0.7, y, 1 - y)
        cols.append(np.where(fires & (vote == c), 1 if c else -1, 0))
    votes = sp.csr_matrix(np.stack(cols, 1))
    uniform = fit_label_model(votes, 2, "snorkel", seed=0)
    told = fit_label_model(votes, 2, "snorkel", seed=0, class_balance=np.array([0.9, 0.1]))
    c = told.covered
    pos_u, pos_t = (uniform.probs[c].argmax(1) == 1).mean(), (told.probs[c].argmax(1) == 1).mean()
    assert pos_t < pos_u - 0.1 and abs(pos_t - y[c].mean()) < abs(pos_u - y[c].mean()), (pos_u, pos_t)
    assert (told.probs[c].argmax(1) == y[c]).mean() > (uniform.probs[c].argmax(1) == y[c]).mean()
    for bad in ([0.5, 0.3], [0.2, 0.3, 0.5], [1.0, 0.0]):
        with pytest.raises(ValueError, match="class_balance must be 2 positive probabilities"):
            fit_label_model(votes, 2, "snorkel", class_balance=np.array(bad))
