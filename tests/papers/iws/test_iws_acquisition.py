"""Acquisition (LSE's straddle, active search, random) and the final-set rules AS / LSE-a / LSE-ac."""

import numpy as np
import pytest

from paperzoo.papers.iws import acquisition_scores, choose, final_set


def test_lse_picks_the_most_uncertain_lf_near_r():
    cand = np.array([10, 11, 12, 13, 14])
    mu = np.array([0.60, 0.60, 0.95, 0.05, 0.62])
    sigma = np.array([0.05, 0.20, 0.30, 0.30, 0.15])
    # 1.96 sigma - |mu - 0.6| = 0.098, 0.392, 0.238, 0.038, 0.274 -> LF 11: near r and the most uncertain there
    np.testing.assert_allclose(acquisition_scores("lse", mu, sigma), [0.098, 0.392, 0.238, 0.038, 0.274], atol=1e-9)
    rng = np.random.default_rng(0)
    assert choose("lse", cand, mu, sigma, rng) == 11
    assert choose("lse", cand, mu, sigma, rng, r=0.95) == 12  # the level moves the choice
    assert choose("as", cand, mu, sigma, rng) == 12  # active search: the highest mean


def test_random_is_uniform_over_the_candidates():
    cand = np.array([3, 5, 8])
    rng = np.random.default_rng(0)
    picks = [choose("random", cand, None, None, rng) for _ in range(600)]
    assert set(picks) == {3, 5, 8} and min(np.bincount(picks)[[3, 5, 8]]) > 150
    with pytest.raises(ValueError, match="no unqueried LF"):
        choose("random", np.array([], dtype=int), None, None, rng)
    with pytest.raises(ValueError, match="needs mu and sigma"):
        choose("lse", cand, None, None, rng)


def test_final_set_rules():
    answered = np.array([0, 1, 2, 3])
    label = np.array([1.0, 0.0, 0.5, 1.0])  # useful, not useful, don't know, (likely) useful
    unq = np.array([4, 5, 6, 7, 8])
    mu = np.array([0.9, 0.6, 0.59, 0.99, 0.7])
    cov = np.array([0, 0, 0, 0, 0.5, 0.5, 0.9, 0.01, 0.3])
    fam = np.zeros(9, dtype=int)
    assert final_set("as", answered, label, unq, None, cov, fam).tolist() == [0, 3]
    assert final_set("lse-a", answered, label, unq, mu, cov, fam).tolist() == [0, 3, 4, 5, 7, 8]
    # LSE-ac: among mu >= r, by (2 mu - 1) cov: LF4 0.4, LF5 0.1, LF7 0.0098, LF8 0.12 -> top 2: 4, 8
    assert final_set("lse-ac", answered, label, unq, mu, cov, fam, n_predict=2).tolist() == [0, 3, 4, 8]
    # per family (one-vs-rest): the top 1 of each
    fam2 = np.array([0, 0, 0, 0, 0, 1, 0, 1, 1])
    assert final_set("lse-ac", answered, label, unq, mu, cov, fam2, n_predict=1).tolist() == [0, 3, 4, 8]
    with pytest.raises(ValueError, match="needs mu"):
        final_set("lse-a", answered, label, unq, None, cov, fam)
    with pytest.raises(ValueError, match="unknown final set"):
        final_set("all", answered, label, unq, mu, cov, fam)
