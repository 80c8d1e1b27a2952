import math

import pytest

from paperzoo.report import CI, compare, mean_ci, t_cdf, t_quantile, verdict_from


@pytest.mark.parametrize(("df", "expected"), [(1, 12.706), (2, 4.303), (4, 2.776), (29, 2.045), (120, 1.980)])
def test_t_quantile_975_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-4)


def test_t_quantile_other_levels_and_symmetry():
    assert t_quantile(0.995, 10) == pytest.approx(3.169, abs=5e-4)
    assert t_quantile(0.95, 5) == pytest.approx(2.015, abs=5e-4)
    assert t_quantile(0.025, 4) == pytest.approx(-t_quantile(0.975, 4))
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959964, abs=1e-5)
    # df=1 is the Cauchy distribution: closed form tan(pi (p - 1/2))
    for p in (0.6, 0.9, 0.99):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)


def test_t_cdf_inverts_quantile():
    for df in (1, 3, 7.5, 40):
        for p in (0.01, 0.3, 0.8, 0.999):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-10)


def test_committed_intervals_unchanged():
    """Every committed report's per-seed intervals, recomputed with scipy's quantiles, equal the committed ones (which
    the hand-written incomplete beta function computed) to 1e-9."""
    import json
    from pathlib import Path

    checked = 0
    for path in sorted(Path(__file__).parents[2].glob("docs/reports/*/result.json")):
        for name, m in json.loads(path.read_text())["measurements"].items():
            if m.get("values") and len(m["values"]) > 1:
                ci = mean_ci(m["values"], m["confidence"])
                assert (ci.lo, ci.hi) == pytest.approx((m["lo"], m["hi"]), abs=1e-9), (path.parent.name, name)
                checked += 1
    assert checked > 50


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (0.9, 0), (0.9, -1)])
def test_t_quantile_rejects_bad_input(p, df):
    with pytest.raises(ValueError, match="expects"):
        t_quantile(p, df)


def test_mean_ci_by_hand():
    xs = [0.90, 0.92, 0.88, 0.91]
    mean = sum(xs) / 4
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / 3)
    half = 3.182446 * std / 2  # t_{0.975,3} * s / sqrt(4)
    ci = mean_ci(xs)
    assert ci.n == 4 and ci.mean == pytest.approx(0.9025)
    assert ci.std == pytest.approx(std)
    assert ci.lo == pytest.approx(mean - half, rel=1e-6) and ci.hi == pytest.approx(mean + half, rel=1e-6)
    assert "95% CI" in str(ci)


def test_mean_ci_single_value_has_no_interval():
    ci = mean_ci([0.5])
    assert ci.mean == 0.5 and ci.n == 1
    assert math.isnan(ci.lo) and math.isnan(ci.hi) and ci.note


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], ["a"]])
def test_mean_ci_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="values"):
        mean_ci(bad)


def test_mean_ci_rejects_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1, 2], confidence=95)


def test_compare_welch_by_hand():
    a, b = [1.0, 1.2, 1.1], [0.5, 0.9, 0.7, 0.6]
    c = compare(a, b)
    va, vb = 0.01, ((0.5 - 0.675) ** 2 + (0.9 - 0.675) ** 2 + 0.025**2 + 0.075**2) / 3
    se2 = va / 3 + vb / 4
    df = se2**2 / ((va / 3) ** 2 / 2 + (vb / 4) ** 2 / 3)
    assert c.diff == pytest.approx(1.1 - 0.675)
    assert c.df == pytest.approx(df)
    assert c.hi - c.diff == pytest.approx(t_quantile(0.975, df) * math.sqrt(se2))
    assert isinstance(c.a, CI) and c.b.n == 4


def test_verdicts_in_each_direction():
    hi, lo = [0.91, 0.92, 0.90], [0.80, 0.81, 0.79]
    assert verdict_from(compare(hi, lo)) == "reproduced"
    assert verdict_from(compare(lo, hi)) == "not reproduced"
    # lower is better (e.g. perplexity): a lower than b reproduces
    assert verdict_from(compare(lo, hi, higher_is_better=False)) == "reproduced"
    assert verdict_from(compare(hi, lo, higher_is_better=False)) == "not reproduced"
    # overlapping noise: inconclusive
    assert verdict_from(compare([0.5, 0.7, 0.6], [0.55, 0.65, 0.6])) == "inconclusive"
    # a margin larger than the gap: the CI lies below the margin
    assert verdict_from(compare(hi, lo, margin=0.5)) == "not reproduced"
    # a gap inside the margin: straddles it
    assert verdict_from(compare(hi, lo, margin=0.11)) == "inconclusive"
    # one seed on a side: no interval
    assert verdict_from(compare([0.9], lo)) == "inconclusive"
    assert compare(hi, lo).verdict == "reproduced"


def test_compare_against_threshold():
    accs = [0.895, 0.901, 0.899]
    assert verdict_from(compare(accs, 0.88)) == "reproduced"
    assert verdict_from(compare(accs, 0.95)) == "not reproduced"
    assert verdict_from(compare([0.88, 0.881, 0.879], 0.88)) == "inconclusive"
    assert compare(accs, 0.88).df == 2


def test_compare_zero_variance_and_bad_input():
    c = compare([1.0, 1.0], [0.0, 0.0])
    assert c.lo == c.hi == 1.0 and verdict_from(c) == "reproduced"
    with pytest.raises(ValueError, match="b"):
        compare([1.0, 2.0], [])
    with pytest.raises(ValueError, match="Comparison"):
        verdict_from("reproduced")


def test_welch_p_matches_scipy_and_holm_adjusts_in_order():
    import math

    import scipy.stats

    from paperzoo.report.stats import holm, welch_p

    a, b = [1.0, 1.3, 0.9, 1.2], [0.4, 0.8, 0.5]
    assert math.isclose(welch_p(a, b), scipy.stats.ttest_ind(a, b, equal_var=False).pvalue, rel_tol=1e-9)
    assert math.isnan(welch_p([1.0], b))
    assert math.isnan(welch_p([1.0, 1.0], [2.0, 2.0]))  # no variance on either side: undefined, never "significant"
    # Holm (1979): sorted 0.01, 0.02, 0.04 of m = 3 -> 0.03, 0.04, 0.04 (monotone), back in input order
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    out = holm([float("nan"), 0.01, 0.03])
    assert math.isnan(out[0]) and out[1:] == pytest.approx([0.02, 0.03])  # nan does not count in m
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_paired_comparison_matches_scipy_ttest_rel():
    import scipy.stats

    from paperzoo.report.stats import compare_paired, paired_p

    a, b = [1.0, 1.3, 0.9, 1.2], [0.8, 1.25, 0.6, 1.1]
    d = [x - y for x, y in zip(a, b, strict=True)]
    c = compare_paired(a, b)
    ref = scipy.stats.ttest_rel(a, b)
    lo, hi = ref.confidence_interval(0.95)
    assert (c.lo, c.hi) == (pytest.approx(lo), pytest.approx(hi)) and c.df == 3
    assert c.paired and not compare(a, b).paired
    assert c.diff == pytest.approx(sum(d) / 4) and c.a.n == 4 and c.b.mean == pytest.approx(sum(b) / 4)
    assert paired_p(a, b) == pytest.approx(ref.pvalue, rel=1e-9)
    assert math.isnan(paired_p([1.0], [0.0])) and math.isnan(paired_p([1.0, 2.0], [0.5, 1.5]))
    with pytest.raises(ValueError, match="one b per a"):
        compare_paired(a, b[:3])
    with pytest.raises(ValueError, match="one b per a"):
        paired_p(a, b[:3])
