"""Which LF to show next (paper Sec. 4.1) and which LFs end up in the label model (Sec. 4.2).

Acquisition over the unqueried LFs, from the ensemble's mean mu_j and spread sigma_j of p(useful):

* LSE (level set estimation, the straddle rule): argmax_j  z sigma_j - |mu_j - r|   (z = 1.96, r = 0.6);
  ``r`` is a threshold on the predicted probability that an LF is useful, not an accuracy;
* AS (active search): argmax_j mu_j;
* random: uniform over the unqueried LFs.

Final LF sets, from the answers so far (label 1 = useful; seed LFs count as answered useful):

* AS:     the validated LFs only;
* LSE-a:  validated + every unqueried LF with mu_j >= r;
* LSE-ac: validated + the top ``n_predict`` unqueried LFs with mu_j >= r ranked by (2 mu_j - 1) * coverage_j.

With K > 2 classes each class family is its own one-vs-rest problem: LSE-ac takes its top ``n_predict`` per family.
"""

from __future__ import annotations

import numpy as np

ACQUISITIONS = ("lse", "as", "random")
FINAL_SETS = ("as", "lse-a", "lse-ac")


def acquisition_scores(kind: str, mu: np.ndarray, sigma: np.ndarray, r: float = 0.6, z: float = 1.96) -> np.ndarray:
    """(n,) the score each unqueried LF gets (the next query is the argmax); ``random`` has no scores."""
    if kind == "lse":
        return z * sigma - np.abs(mu - r)  # the straddle: uncertain LFs near the level r
    if kind == "as":
        return mu
    raise ValueError(f"acquisition scores exist for 'lse' and 'as', got {kind!r} (valid: {ACQUISITIONS})")


def choose(kind: str, candidates: np.ndarray, mu: np.ndarray | None, sigma: np.ndarray | None,
           rng: np.random.Generator, r: float = 0.6, z: float = 1.96) -> int:
    """The LF to query next among ``candidates`` (indices of unqueried LFs); ``mu``/``sigma`` are over candidates."""
    if len(candidates) == 0:
        raise ValueError("no unqueried LF is left to choose from")
    if kind == "random":
        return int(candidates[rng.integers(len(candidates))])
    if kind not in ACQUISITIONS:
        raise ValueError(f"unknown acquisition {kind!r}; valid: {ACQUISITIONS}")
    if mu is None or sigma is None or mu.shape != candidates.shape or sigma.shape != candidates.shape:
        raise ValueError(f"{kind} needs mu and sigma of shape {candidates.shape}")
    return int(candidates[int(np.argmax(acquisition_scores(kind, mu, sigma, r, z)))])


def final_set(rule: str, answered: np.ndarray, label: np.ndarray, unqueried: np.ndarray, mu: np.ndarray | None,
              coverage: np.ndarray, family: np.ndarray, r: float = 0.6, n_predict: int = 100) -> np.ndarray:
    """Sorted LF indices of the final set ``rule`` ("as", "lse-a", "lse-ac").

    ``answered``/``label``: the LFs with an answer and its label (1 useful; 0.5 "don't know" and 0 are not
    validated). ``unqueried``: LF indices without an answer, ``mu`` (their predicted p(useful), needed for LSE
    rules). ``coverage``, ``family``: (LFs,) per LF.
    """
    if rule not in FINAL_SETS:
        raise ValueError(f"unknown final set {rule!r}; valid: {FINAL_SETS}")
    validated = np.asarray(answered)[np.asarray(label) == 1]
    if rule == "as":
        return np.unique(validated)
    if mu is None or mu.shape != unqueried.shape:
        raise ValueError(f"final set {rule!r} needs mu over the {len(unqueried)} unqueried LFs")
    good = mu >= r
    if rule == "lse-a":
        return np.unique(np.concatenate([validated, unqueried[good]]))
    idx, score = unqueried[good], (2 * mu[good] - 1) * coverage[unqueried[good]]
    fam = family[idx]
    # top n_predict per family by (2 mu - 1) coverage: sort by (family, -score), keep each family's first n_predict
    order = np.lexsort((-score, fam))
    fam_sorted = fam[order]
    first = np.searchsorted(fam_sorted, fam_sorted, side="left")
    rank = np.arange(len(order)) - first
    return np.unique(np.concatenate([validated, idx[order[rank < n_predict]]]))
