"""Label models: from the final LFs' votes to soft labels of the training documents.

* ``snorkel`` (default, as the official code): Snorkel's ``LabelModel`` (matrix-completion estimate of LF
  accuracies), seeded. Snorkel's convention differs from IWS's: Snorkel abstains with -1 and labels classes
  0..K-1; IWS abstains with 0 and votes +1/-1 (binary) or k + 1. :func:`to_snorkel` maps one to the other. Snorkel
  needs at least 3 LFs (snorkel#1426): below that the soft majority vote is used, with a warning.
* ``majority``: the official ``uniform`` option, p(y = k) proportional to exp(number of votes for k).
* ``dawid-skene``: EM over per-LF confusion matrices (abstain as an extra response), majority-vote initialised.

Documents on which no selected LF votes are not covered: they are left out of the fit and of the end model's
training (the official ``filteridx``); their row of the returned probabilities is the class prior.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

LABEL_MODELS = ("snorkel", "majority", "dawid-skene")


@dataclass
class SoftLabels:
    """``probs`` (docs, classes) soft labels, ``covered`` (docs,) bool, and the label model actually used."""

    probs: np.ndarray
    covered: np.ndarray
    model: str


def to_snorkel(votes: np.ndarray | sp.spmatrix, n_classes: int) -> np.ndarray:
    """Dense (docs, LFs) int64 in Snorkel's convention from IWS votes: 0 -> -1 (abstain); binary +1 -> 1, -1 -> 0;
    K > 2 classes: k + 1 -> k."""
    v = np.asarray(votes.todense()) if sp.issparse(votes) else np.asarray(votes)
    v = v.astype(np.int64)
    if n_classes == 2:
        bad = ~np.isin(v, (-1, 0, 1))
        out = np.where(v == 0, -1, np.where(v > 0, 1, 0))
    else:
        bad = (v < 0) | (v > n_classes)
        out = v - 1
    if bad.any():
        raise ValueError(f"IWS votes for {n_classes} classes must lie in "
                         f"{'{-1, 0, +1}' if n_classes == 2 else f'0..{n_classes}'}; got {np.unique(v[bad])[:5]}")
    return out


def from_snorkel(labels: np.ndarray, n_classes: int) -> np.ndarray:
    """The inverse of :func:`to_snorkel` (Snorkel's -1 abstain and class ids to IWS votes)."""
    labels = np.asarray(labels, dtype=np.int64)
    if n_classes == 2:
        return np.where(labels < 0, 0, np.where(labels == 1, 1, -1)).astype(np.int8)
    return np.where(labels < 0, 0, labels + 1).astype(np.int8)


def vote_counts(votes: sp.spmatrix, n_classes: int) -> np.ndarray:
    """(docs, classes) how many LFs vote for each class (IWS-convention sparse votes)."""
    v = sp.csr_matrix(votes)
    rows = np.repeat(np.arange(v.shape[0]), np.diff(v.indptr))
    cls = (v.data > 0).astype(np.int64) if n_classes == 2 else v.data.astype(np.int64) - 1
    return np.bincount(rows * n_classes + cls, minlength=v.shape[0] * n_classes).reshape(-1, n_classes).astype(
        np.float64)


def majority_vote(votes: sp.spmatrix, n_classes: int) -> np.ndarray:
    """(docs, classes) soft majority vote: softmax of the vote counts (the official ``uniform`` label model)."""
    c = np.clip(vote_counts(votes, n_classes), 0, 700)
    e = np.exp(c - c.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def dawid_skene(votes: sp.spmatrix, n_classes: int, iters: int = 50, smoothing: float = 0.01,
                tol: float = 1e-6) -> np.ndarray:
    """(docs, classes) posteriors of the Dawid-Skene model fitted by EM on the covered documents.

    Each LF j has a confusion matrix pi_j[y, o] over its responses o in {abstain, class 0..K-1}; the E step is

        log q(y | i) = log prior_y + sum_j log pi_j[y, abst] + sum_{j votes o on i} (log pi_j[y, o] - log pi_j[y, abst])

    computed sparsely (only the votes are touched), the M step counts expected responses.
    """
    v = sp.csr_matrix(votes)
    n, m = v.shape
    k = n_classes
    cls = (v.data > 0).astype(np.int64) if k == 2 else v.data.astype(np.int64) - 1
    rows = np.repeat(np.arange(n), np.diff(v.indptr))
    onehot = sp.csr_matrix((np.ones(len(cls)), (rows, v.indices * k + cls)), shape=(n, m * k))  # (docs, LF x class)
    q = majority_vote(v, k)
    for _ in range(iters):
        prior = q.mean(0) + 1e-12
        voted = (onehot.T @ q).reshape(m, k, k)  # [j, o, y]: expected votes o of LF j on documents of class y
        total = q.sum(0)  # expected documents per class
        abstain = total[None, :] - voted.sum(1)  # [j, y]
        denom = total[None, :] + smoothing * (k + 1)
        log_vote = np.log((voted + smoothing) / denom[:, None, :])  # [j, o, y]
        log_abst = np.log((np.clip(abstain, 0, None) + smoothing) / denom)  # [j, y]
        delta = (log_vote - log_abst[:, None, :]).reshape(m * k, k)
        logq = np.log(prior)[None, :] + log_abst.sum(0)[None, :] + onehot @ delta
        new = np.exp(logq - logq.max(1, keepdims=True))
        new /= new.sum(1, keepdims=True)
        done = np.abs(new - q).max() < tol
        q = new
        if done:
            break
    return q


def fit_label_model(votes: sp.spmatrix, n_classes: int, model: str = "snorkel", seed: int = 0,
                    snorkel_epochs: int = 100, class_balance: np.ndarray | None = None) -> SoftLabels:
    """Soft labels from ``votes`` (docs, LFs) in IWS convention with the label model ``model``.

    ``class_balance`` (classes,): the prior p(y) the expert states, given to Snorkel (None: Snorkel assumes uniform
    classes, which on a skewed set such as SMS spam, 13% spam, labels ~45% of the covered documents spam); majority
    vote ignores it and Dawid-Skene estimates its own prior."""
    if class_balance is not None:
        class_balance = _check_balance(class_balance, n_classes)
    if model not in LABEL_MODELS:
        raise ValueError(f"unknown label model {model!r}; valid: {LABEL_MODELS}")
    v = sp.csr_matrix(votes)
    if v.ndim != 2:
        raise ValueError(f"votes must be a (docs, LFs) matrix, got shape {v.shape}")
    covered = np.diff(v.indptr) > 0
    probs = np.full((v.shape[0], n_classes), 1.0 / n_classes)
    if not covered.any():
        return SoftLabels(probs, covered, "none")
    used = model
    if model == "snorkel" and v.shape[1] < 3:
        warnings.warn(f"Snorkel's LabelModel needs at least 3 LFs, got {v.shape[1]}: using the majority vote",
                      stacklevel=2)
        used = "majority"
    vc = v[covered]
    if used == "majority":
        p = majority_vote(vc, n_classes)
    elif used == "dawid-skene":
        p = dawid_skene(vc, n_classes)
    else:
        from snorkel.labeling.model import LabelModel

        lm = LabelModel(cardinality=n_classes, verbose=False)
        lab = to_snorkel(vc, n_classes)
        lm.fit(lab, n_epochs=snorkel_epochs, seed=seed, progress_bar=False, class_balance=class_balance)
        p = lm.predict_proba(lab)
        bad = ~np.isfinite(p).all(1)
        if bad.any():  # the official code fills NaN posteriors with the median of the others
            p[bad] = np.median(p[~bad], axis=0) if (~bad).any() else 1.0 / n_classes
    probs[covered] = p
    probs[~covered] = probs[covered].mean(0)
    return SoftLabels(probs, covered, used)


def _check_balance(balance: np.ndarray, n_classes: int) -> np.ndarray:
    b = np.asarray(balance, dtype=np.float64)
    if b.shape != (n_classes,) or (b <= 0).any() or abs(b.sum() - 1) > 1e-6:
        raise ValueError(f"class_balance must be {n_classes} positive probabilities summing to 1, got {b.tolist()}")
    return b
