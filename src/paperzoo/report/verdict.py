"""Declarative verdict rules: each judges measurements and returns the verdict with the sentence that explains it.

    Beats(higher_is_better=True).judge(ours, baseline, "ELECTRA", "MLM")   # Welch interval above 0
    NonInferior(0.5).judge(ours, baseline)                                 # at most 0.5 worse
    Paired(higher_is_better=False).judge(switch_ppl, dense_ppl)            # per-seed differences
    Beats().judge(accuracies, 0.88, "accuracy", "88%")                     # against a fixed threshold
    AtMost(1.2).judge(slope, "time slope")                                 # a single value, no interval
    AtLeast(1.6).judge(slope, "time slope")
    all_of(v1, v2)                                                         # a claim made of parts

The interval rule itself is :func:`paperzoo.report.stats.verdict_from`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from paperzoo.report.stats import Comparison, compare

SMOKE_NOTE = "preset tiny is a smoke test: it checks that the recipe runs and learns; its verdict carries no evidence"


@dataclass(frozen=True)
class Verdict:
    """A verdict with the sentence that explains it, and the comparison it came from (if any)."""

    verdict: str
    reason: str
    comparison: Comparison | None = None

    def __str__(self) -> str:
        return f"{self.verdict}: {self.reason}"


def _g(x: float) -> str:
    return f"{x:.4g}"


def _interval_reason(c: Comparison, what: str) -> str:
    est, lo, hi = c.improvement
    if math.isnan(lo):
        return f"{what} is {_g(est)}, with no interval (fewer than two values on a side): {c.verdict}"
    where = ("above" if lo > c.margin else "below" if hi < c.margin else "across")
    return (f"{what} is {_g(est)} ({c.confidence:.0%} CI {_g(lo)} to {_g(hi)}), an interval {where} "
            f"{_g(c.margin)}: {c.verdict}")


@dataclass(frozen=True)
class Beats:
    """Claim: ``a`` beats ``b`` by more than ``margin`` (a Welch interval of the improvement above ``margin``).

    ``margin < 0`` is a non-inferiority claim (see :class:`NonInferior`). ``b`` may be per-seed values or a fixed
    number (a threshold: the one-sample interval).
    """

    higher_is_better: bool = True
    margin: float = 0.0
    confidence: float = 0.95

    def judge(self, a: Iterable[float], b: Iterable[float] | float, a_name: str = "ours",
              b_name: str = "baseline") -> Verdict:
        c = compare(a, b, self.higher_is_better, self.margin, self.confidence)
        sense = "higher" if self.higher_is_better else "lower"
        what = f"the improvement of {a_name} over {b_name} ({sense} is better)"
        return Verdict(c.verdict, _interval_reason(c, what), c)


def NonInferior(margin: float, higher_is_better: bool = True, confidence: float = 0.95) -> Beats:  # noqa: N802
    """Claim: ``a`` is at most ``margin`` worse than ``b`` (``margin > 0``)."""
    if not margin > 0:
        raise ValueError(f"NonInferior: margin must be > 0 (how much worse is still acceptable), got {margin}")
    return Beats(higher_is_better, -float(margin), confidence)


@dataclass(frozen=True)
class Paired:
    """Claim: per seed, ``a`` beats ``b`` (the one-sample interval of the paired differences above ``margin``)."""

    higher_is_better: bool = True
    margin: float = 0.0
    confidence: float = 0.95

    def judge(self, a: Sequence[float], b: Sequence[float], a_name: str = "ours",
              b_name: str = "baseline") -> Verdict:
        if len(a) != len(b):
            raise ValueError(f"Paired: a and b must hold one value per seed each, got {len(a)} and {len(b)}")
        diffs = [x - y if self.higher_is_better else y - x for x, y in zip(a, b, strict=True)]
        c = compare(diffs, 0.0, True, self.margin, self.confidence)
        sense = "higher" if self.higher_is_better else "lower"
        what = f"the paired per-seed improvement of {a_name} over {b_name} ({sense} is better)"
        return Verdict(c.verdict, _interval_reason(c, what), c)


@dataclass(frozen=True)
class AtMost:
    """Claim: a single measured value (e.g. a log-log slope) is at most ``limit``; no interval."""

    limit: float

    def judge(self, value: float, name: str = "value") -> Verdict:
        ok = value <= self.limit
        return Verdict("reproduced" if ok else "not reproduced",
                       f"{name} is {_g(value)}, {'at most' if ok else 'above'} {_g(self.limit)}")


@dataclass(frozen=True)
class AtLeast:
    """Claim: a single measured value (e.g. a log-log slope) is at least ``limit``; no interval."""

    limit: float

    def judge(self, value: float, name: str = "value") -> Verdict:
        ok = value >= self.limit
        return Verdict("reproduced" if ok else "not reproduced",
                       f"{name} is {_g(value)}, {'at least' if ok else 'below'} {_g(self.limit)}")


def all_of(*verdicts: Verdict) -> Verdict:
    """A claim made of parts: reproduced when every part is, not reproduced when any part is not."""
    if not verdicts:
        raise ValueError("all_of needs at least one verdict")
    kinds = {v.verdict for v in verdicts}
    v = ("not reproduced" if "not reproduced" in kinds else "reproduced" if kinds == {"reproduced"}
         else "inconclusive")
    return Verdict(v, "; ".join(x.reason for x in verdicts))


def smoke(verdict: Verdict, preset: str) -> Verdict:
    """``tiny`` runs are smoke tests: their verdict is kept but its sentence says it carries no evidence."""
    if preset != "tiny":
        return verdict
    return dataclasses.replace(verdict, reason=f"{verdict.reason} ({SMOKE_NOTE})")
