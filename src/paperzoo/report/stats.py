"""Confidence intervals over seeds: Student t quantiles, mean CIs, Welch and paired comparisons and verdicts.

Quantiles come from ``scipy.stats``; Welch's degrees of freedom are the Welch-Satterthwaite formula (as in
``scipy.stats.ttest_ind(equal_var=False)``). Where the two sides were run in pairs (seed ``s`` of ``a`` and of ``b``
saw the same data order), :func:`compare_paired` gives the interval of the mean per-pair difference (as
``scipy.stats.ttest_rel``): the variance the pair shares cancels.

The verdict rule (:func:`verdict_from`). Let ``d`` be the *improvement* of ``a`` over ``b``:
``mean(a) - mean(b)`` when higher is better, ``mean(b) - mean(a)`` when lower is better, and
``[lo, hi]`` its confidence interval. The claim is "``a`` beats ``b`` by more than ``margin``".

* ``lo > margin``  -> ``"reproduced"`` (the whole interval lies above the margin);
* ``hi < margin``  -> ``"not reproduced"`` (the whole interval lies below it; with ``margin >= 0`` this
  includes every interval that excludes the claimed direction, ``hi < 0``);
* otherwise, or when the interval is undefined (fewer than two values on a side) -> ``"inconclusive"``.

A negative margin states a non-inferiority claim ("``a`` is at most ``-margin`` worse than ``b``"). When
``b`` is a single number (a threshold such as "accuracy >= 0.88"), the interval is the one-sample t
interval of ``mean(a) - b``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import scipy.stats

VERDICTS = ("reproduced", "not reproduced", "inconclusive")


def t_cdf(t: float, df: float) -> float:
    """CDF of Student's t distribution with ``df`` degrees of freedom (``df=inf`` gives the normal)."""
    if not df > 0:
        raise ValueError(f"t_cdf expects df > 0, got {df}")
    if math.isinf(df):
        return float(scipy.stats.norm.cdf(t))
    return float(scipy.stats.t.cdf(t, df))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, e.g. ``t_quantile(0.975, 4) = 2.776``."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile expects 0 < p < 1, got {p}")
    if not df > 0:
        raise ValueError(f"t_quantile expects df > 0, got {df}")
    if math.isinf(df):
        return float(scipy.stats.norm.ppf(p))
    return float(scipy.stats.t.ppf(p, df))


@dataclass(frozen=True)
class CI:
    """A mean with its two-sided confidence interval ``[lo, hi]`` over ``n`` values (``std`` is the sample std)."""

    mean: float
    lo: float
    hi: float
    n: int
    std: float
    confidence: float = 0.95
    note: str = ""

    def __str__(self) -> str:
        if math.isnan(self.lo):
            return f"{self.mean:.4g} (n={self.n}, no CI{': ' + self.note if self.note else ''})"
        return f"{self.mean:.4g} ({self.confidence:.0%} CI {self.lo:.4g} to {self.hi:.4g}, n={self.n})"


def _check_values(values: Iterable[float], what: str) -> list[float]:
    try:
        xs = [float(v) for v in values]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} must be a sequence of numbers, got {values!r}") from e
    if not xs:
        raise ValueError(f"{what} must hold at least one value, got none")
    if not all(math.isfinite(x) for x in xs):
        raise ValueError(f"{what} must be finite numbers, got {xs}")
    return xs


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95, got {confidence}")
    return float(confidence)


def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    n = len(xs)
    mean = math.fsum(xs) / n
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else math.nan
    return mean, var


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> CI:
    """Mean of ``values`` with its Student t confidence interval; one value gives ``lo = hi = nan``."""
    xs = _check_values(values, "values")
    confidence = _check_confidence(confidence)
    n = len(xs)
    mean, var = _mean_var(xs)
    if n == 1:
        return CI(mean, math.nan, math.nan, 1, math.nan, confidence, "one value: no interval (run more seeds)")
    std = math.sqrt(var)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    return CI(mean, mean - half, mean + half, n, std, confidence)


@dataclass(frozen=True)
class Comparison:
    """Difference of means ``mean(a) - mean(b)`` with its t interval ``[lo, hi]`` and ``df`` (Welch's, or the paired
    one from :func:`compare_paired`)."""

    diff: float
    lo: float
    hi: float
    df: float
    a: CI
    b: CI | float
    higher_is_better: bool = True
    margin: float = 0.0
    confidence: float = 0.95
    paired: bool = False

    @property
    def improvement(self) -> tuple[float, float, float]:
        """``(estimate, lo, hi)`` of how much ``a`` beats ``b`` (sign flipped when lower is better)."""
        if self.higher_is_better:
            return self.diff, self.lo, self.hi
        return -self.diff, -self.hi, -self.lo

    @property
    def verdict(self) -> str:
        return verdict_from(self)

    def __str__(self) -> str:
        base = f"{self.b:.4g}" if isinstance(self.b, float) else f"{self.b.mean:.4g} (n={self.b.n})"
        head = f"{self.a.mean:.4g} (n={self.a.n}) vs {base}: difference {self.diff:.4g}"
        if math.isnan(self.lo):
            return f"{head}, no CI (fewer than 2 values) -> {self.verdict}"
        sense = "higher" if self.higher_is_better else "lower"
        return (f"{head} ({self.confidence:.0%} CI {self.lo:.4g} to {self.hi:.4g}, df={self.df:.3g}; "
                f"{sense} is better, margin {self.margin:g}) -> {self.verdict}")


def compare(a: Iterable[float], b: Iterable[float] | float, higher_is_better: bool = True, margin: float = 0.0,
            confidence: float = 0.95) -> Comparison:
    """Compare per-seed values ``a`` (ours) with ``b`` (the baseline's values, or a fixed threshold).

    The interval is Welch's t interval for ``mean(a) - mean(b)`` (unequal variances, Welch-Satterthwaite
    degrees of freedom); when ``b`` is a number, the one-sample t interval of ``mean(a) - b``.
    """
    xa = _check_values(a, "a")
    confidence = _check_confidence(confidence)
    if not math.isfinite(float(margin)):
        raise ValueError(f"margin must be a finite number, got {margin}")
    q = 0.5 + confidence / 2.0
    ca = mean_ci(xa, confidence)
    ma, va = _mean_var(xa)
    if isinstance(b, numbers.Real):
        b = float(b)
        if not math.isfinite(b):
            raise ValueError(f"b must be finite values or a finite threshold, got {b}")
        diff = ma - b
        if len(xa) < 2:
            return Comparison(diff, math.nan, math.nan, math.nan, ca, b, higher_is_better, margin, confidence)
        df = float(len(xa) - 1)
        se = math.sqrt(va / len(xa))
        half = t_quantile(q, df) * se if se > 0 else 0.0
        return Comparison(diff, diff - half, diff + half, df, ca, b, higher_is_better, margin, confidence)
    xb = _check_values(b, "b")
    cb = mean_ci(xb, confidence)
    mb, vb = _mean_var(xb)
    diff = ma - mb
    na, nb = len(xa), len(xb)
    if na < 2 or nb < 2:
        return Comparison(diff, math.nan, math.nan, math.nan, ca, cb, higher_is_better, margin, confidence)
    sa, sb = va / na, vb / nb
    se2 = sa + sb
    if se2 == 0.0:
        return Comparison(diff, diff, diff, math.inf, ca, cb, higher_is_better, margin, confidence)
    df = se2 * se2 / (sa * sa / (na - 1) + sb * sb / (nb - 1))
    half = t_quantile(q, df) * math.sqrt(se2)
    return Comparison(diff, diff - half, diff + half, df, ca, cb, higher_is_better, margin, confidence)


def compare_paired(a: Sequence[float], b: Sequence[float], higher_is_better: bool = True, margin: float = 0.0,
                   confidence: float = 0.95) -> Comparison:
    """Compare ``a`` with ``b`` where ``a[i]`` and ``b[i]`` are one pair (e.g. the same seed and data order).

    The interval is the one-sample t interval of the mean of ``d_i = a_i - b_i`` (``n - 1`` degrees of freedom),
    which equals ``mean(a) - mean(b)``; ``a`` and ``b`` keep their own mean CIs.
    """
    xa, xb = _check_values(a, "a"), _check_values(b, "b")
    if len(xa) != len(xb):
        raise ValueError(f"paired values need one b per a, got {len(xa)} a and {len(xb)} b")
    d = compare([x - y for x, y in zip(xa, xb, strict=True)], 0.0, higher_is_better, margin, confidence)
    return Comparison(d.diff, d.lo, d.hi, d.df, mean_ci(xa, confidence), mean_ci(xb, confidence),
                      higher_is_better, margin, confidence, paired=True)


def verdict_from(comparison: Comparison) -> str:
    """``"reproduced"``, ``"not reproduced"`` or ``"inconclusive"`` by the rule in this module's docstring."""
    if not isinstance(comparison, Comparison):
        raise ValueError(f"verdict_from expects a Comparison (from compare()), got {type(comparison).__name__}")
    _, lo, hi = comparison.improvement
    if math.isnan(lo) or math.isnan(hi):
        return "inconclusive"
    if lo > comparison.margin:
        return "reproduced"
    if hi < comparison.margin:
        return "not reproduced"
    return "inconclusive"


def welch_p(a: Iterable[float], b: Iterable[float]) -> float:
    """Two-sided p-value of Welch's t test for ``mean(a) == mean(b)`` (``scipy.stats.ttest_ind(equal_var=False)``);
    nan with fewer than two values on a side or when both samples are constant (no variance: the test is undefined,
    e.g. two classifiers that always predict the majority class)."""
    xa, xb = _check_values(a, "a"), _check_values(b, "b")
    if len(xa) < 2 or len(xb) < 2:
        return math.nan
    (ma, va), (mb, vb) = _mean_var(xa), _mean_var(xb)
    sa, sb = va / len(xa), vb / len(xb)
    if sa + sb == 0.0:
        return math.nan
    t = (ma - mb) / math.sqrt(sa + sb)
    df = (sa + sb) ** 2 / (sa * sa / (len(xa) - 1) + sb * sb / (len(xb) - 1))
    return 2.0 * (1.0 - t_cdf(abs(t), df))


def paired_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t test for ``mean(a - b) == 0`` (``scipy.stats.ttest_rel``); nan with fewer
    than two pairs or when every pair differs by the same amount (no variance: undefined)."""
    xa, xb = _check_values(a, "a"), _check_values(b, "b")
    if len(xa) != len(xb):
        raise ValueError(f"paired values need one b per a, got {len(xa)} a and {len(xb)} b")
    d = [x - y for x, y in zip(xa, xb, strict=True)]
    if len(d) < 2:
        return math.nan
    m, v = _mean_var(d)
    if v == 0.0:
        return math.nan
    t = m / math.sqrt(v / len(d))
    return 2.0 * (1.0 - t_cdf(abs(t), len(d) - 1))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979), in the input order: the i-th smallest of m is multiplied by
    ``m - i + 1`` (i from 1), made monotone and capped at 1. Rejecting where the adjusted p < alpha controls the
    family-wise error rate at alpha. nan entries are kept as nan and do not count in m."""
    ps = [float(p) for p in pvalues]
    if any(not (math.isnan(p) or 0.0 <= p <= 1.0) for p in ps):
        raise ValueError(f"p-values must be in [0, 1] (or nan), got {ps}")
    idx = sorted((i for i, p in enumerate(ps) if not math.isnan(p)), key=lambda i: ps[i])
    m, out, running = len(idx), list(ps), 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out
