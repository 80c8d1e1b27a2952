"""The paper-style table of a grid run, its comparison with Narang et al.'s Table 1, and the verdict.

Per variant and column: the mean over seeds with its 95% t interval; against the baseline, the difference of means
with its paired t interval and two-sided paired p-value over the seeds both ran, Holm-corrected over the variants of
that column (family-wise error 5%). Paired, because the grid is: seed ``s`` gives every variant the same batch order,
so the part of a seed's loss that comes from its data order is shared by the pair and cancels. The baseline's own
seed-to-seed spread comes first. Against the paper: for the rows the paper reports,
whether our difference has the paper's sign, and the Spearman rank correlation of our differences with the paper's,
per column.
"""

from __future__ import annotations

import math
from pathlib import Path

import scipy.stats

from paperzoo.report.stats import compare_paired, holm, mean_ci, paired_p
from paperzoo.report.verdict import Verdict

from .grid import PAPER_BASELINE, PAPER_EARLY_LOSS_STD, PAPER_SIGNS, PAPER_TABLE, Grid

CLAIM = ("Most transformer modifications do not meaningfully improve on the baseline; the ones that help are "
         "GLU-family activations and RMSNorm (and changes that add parameters, such as Switch), while ReZero, "
         "Fixup and block sharing hurt (Narang et al. 2021, Table 1: vanilla 1.838 final loss / 71.66 SuperGLUE, "
         "SwiGLU 1.789 / 76.00, RMSNorm 1.821 / 75.45, ReZero 1.939 / 61.69, Fixup 2.067 / 58.56).")
ALPHA = 0.05
# column -> (result key, lower is better, paper column)
COLUMNS = {"early loss": ("early_loss", True, "early loss"), "final loss": ("final_loss", True, "final loss"),
           "WikiText-2 valid ppl": ("wiki_valid_ppl", True, None), "WikiText-2 test ppl": ("wiki_test_ppl", True, None),
           "downstream": ("downstream", False, "downstream"), "steps/s": ("steps_per_s", False, None)}
HELPERS = ("swiglu", "geglu", "reglu", "rmsnorm")  # what the paper says helps


class Table:
    """``results``: variant -> per-seed job results (baseline first); ``grid``: the grid they came from."""

    def __init__(self, results: dict[str, list[dict]], grid: Grid, tasks: tuple[str, ...]):
        self.results, self.grid, self.tasks = results, grid, tasks
        self.baseline = grid.baseline
        self.columns = dict(COLUMNS)
        for t in tasks:
            self.columns[t] = (f"task {t}", False, None)
        self.others = [v for v in results if v != self.baseline]
        self.stats = {col: self._column(col) for col in self.columns}

    def values(self, variant: str, col: str) -> list[float]:
        return list(self.by_seed(variant, col).values())

    def by_seed(self, variant: str, col: str) -> dict[int, float]:
        key = self.columns[col][0]
        return {r["seed"]: r[key] for r in self.results[variant] if r.get(key) is not None}

    def _column(self, col: str) -> dict[str, dict]:
        """Per variant: mean CI, difference to the baseline (paired over common seeds), p, Holm p, significant."""
        lower = self.columns[col][1]
        base = self.by_seed(self.baseline, col)
        out = {self.baseline: {"ci": mean_ci(base.values())}}
        ps = []
        for v in self.others:
            vals = self.by_seed(v, col)
            seeds = sorted(vals.keys() & base.keys())
            if not seeds:
                raise ValueError(f"variant {v!r} shares no seed with the baseline {self.baseline!r} in {col!r}: "
                                 f"{sorted(vals)} vs {sorted(base)}")
            a, b = [vals[s] for s in seeds], [base[s] for s in seeds]
            out[v] = {"ci": mean_ci(vals.values()), "diff": compare_paired(a, b, higher_is_better=not lower),
                      "p": paired_p(a, b), "seeds": seeds}
            ps.append(out[v]["p"])
        for v, ph in zip(self.others, holm(ps), strict=True):
            better = out[v]["diff"].diff < 0 if lower else out[v]["diff"].diff > 0
            out[v].update(p_holm=ph, significant=not math.isnan(ph) and ph < ALPHA, better=better)
        return out

    # ------------------------------------------------------------------------------------------- the paper
    def paper_pairs(self, col: str) -> list[tuple[str, float, float]]:
        """(variant, paper difference to vanilla, our difference to the baseline) for rows with paper numbers."""
        pairs = []
        base_row = PAPER_TABLE[PAPER_BASELINE]
        for v in self.others:
            row = self.grid.variants[v].paper
            if row in PAPER_TABLE and PAPER_TABLE[row].get(col) is not None and base_row.get(col) is not None:
                pairs.append((v, PAPER_TABLE[row][col] - base_row[col], self.stats[col][v]["diff"].diff))
        return pairs

    def sign_agreement(self, col: str) -> tuple[int, int, list[str]]:
        """(agreeing, compared, the variants compared): numeric rows (a paper difference of 0 counts as agreeing with
        our difference when ours is not significant) and the rows the paper states in words (PAPER_SIGNS)."""
        agree, n, names = 0, 0, []
        for v, paper, ours in self.paper_pairs(col):
            n += 1
            names.append(v)
            if paper == 0:
                agree += not self.stats[col][v]["significant"]
            else:
                agree += (paper > 0) == (ours > 0)
        for v in self.others:
            sign = PAPER_SIGNS.get(self.grid.variants[v].paper or "", {}).get(col)
            if sign is not None:
                n += 1
                names.append(v)
                agree += (sign > 0) == (self.stats[col][v]["diff"].diff > 0)
        return agree, n, names

    def spearman(self, col: str) -> tuple[float, int]:
        pairs = self.paper_pairs(col)
        xs, ys = [p for _, p, _ in pairs], [o for _, _, o in pairs]
        if len(pairs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:  # undefined for a constant side
            return math.nan, len(pairs)
        rho = scipy.stats.spearmanr(xs, ys).statistic
        return float(rho), len(pairs)

    # ------------------------------------------------------------------------------------------- the verdict
    def verdict(self) -> Verdict:
        """Reproduced: fewer than half the modifications improve the final loss significantly (Holm) AND every GLU
        variant / RMSNorm of the grid does. Not reproduced: half or more improve significantly, or any of those is
        significantly worse, or none of them is better even in its point estimate. Otherwise inconclusive."""
        s = self.stats["final loss"]
        helped = [v for v in self.others if s[v]["significant"] and s[v]["better"]]
        helpers = [v for v in HELPERS if v in s]
        help_ok = [v for v in helpers if s[v]["significant"] and s[v]["better"]]
        help_bad = [v for v in helpers if s[v]["significant"] and not s[v]["better"]]
        most_not = len(helped) < len(self.others) / 2
        parts = (f"{len(helped)} of {len(self.others)} modifications lower the final held-out loss significantly "
                 f"(Holm, 5%): {', '.join(helped) or 'none'}; of the paper's helpers "
                 f"{', '.join(helpers) or '(none run)'}, significantly better: {', '.join(help_ok) or 'none'}; "
                 f"significantly worse: {', '.join(help_bad) or 'none'}")
        if not helpers:
            return Verdict("inconclusive", parts + " (no GLU variant or RMSNorm in the grid)")
        if not most_not or help_bad or not any(s[v]["better"] for v in helpers):
            return Verdict("not reproduced", parts)
        if len(help_ok) == len(helpers):
            return Verdict("reproduced", parts)
        return Verdict("inconclusive", parts)

    # ------------------------------------------------------------------------------------------- outputs
    def measurements(self) -> dict:
        out = {f"baseline ({self.baseline}) final loss": self.values(self.baseline, "final loss"),
               f"baseline ({self.baseline}) early loss": self.values(self.baseline, "early loss"),
               f"baseline ({self.baseline}) downstream": self.values(self.baseline, "downstream")}
        for v in self.others:
            out[f"final loss {v} - {self.baseline}"] = self.stats["final loss"][v]["diff"]
            out[f"downstream {v} - {self.baseline}"] = self.stats["downstream"][v]["diff"]
        return out

    def _cell(self, col: str, v: str, digits: int = 3) -> str:
        st = self.stats[col][v]
        ci = st["ci"]
        cell = f"{ci.mean:.{digits}f}"
        if not math.isnan(ci.lo):
            cell += f" ±{(ci.hi - ci.lo) / 2:.{digits}f}"
        if "diff" in st:
            mark = "**" if st["significant"] else ""
            cell += f" ({mark}{st['diff'].diff:+.{digits}f}{mark}, p_Holm {st['p_holm']:.2g})"
        return cell

    def markdown(self, preset) -> str:
        b = self.baseline
        first = self.results[b][0]
        lines = [f"Budget: {first['tokens']:,} tokens per variant ({first['steps']} steps), {len(self.results[b])} "
                 f"seeds per variant, objective `{preset.objective}`. Cells: mean ±half-width of the 95% t interval "
                 "over seeds (difference to the baseline over the seeds both ran, **bold** where the Holm-corrected "
                 "paired-t p < 0.05 over the variants of that column; a seed gives every variant the same batch "
                 "order, so the test pairs by seed). Losses are held-out IMDB LM losses per token; early = at 1/8 of "
                 "the budget. Downstream = mean score x100 over " + ", ".join(self.tasks) + ".", "",
                 "**Baseline seed-to-seed spread first** (std over seeds): " + "; ".join(
                     f"{col} {self.stats[col][b]['ci'].std:.4g}" for col in self.columns)
                 + f" (the paper's only reported spread: early loss std {PAPER_EARLY_LOSS_STD}).", ""]
        head = ["variant", "params", "FLOPs/token", "steps/s", "early loss", "final loss", "WikiText-2 valid ppl",
                "WikiText-2 test ppl", "downstream", *self.tasks]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for v in self.results:
            r = self.results[v][0]
            cells = [v, f"{r['params'] / 1e6:.3f}M", f"{r['flops_per_token'] / 1e6:.2f}M",
                     self._cell("steps/s", v, 2), self._cell("early loss", v), self._cell("final loss", v),
                     self._cell("WikiText-2 valid ppl", v, 1), self._cell("WikiText-2 test ppl", v, 1),
                     self._cell("downstream", v, 2), *(self._cell(t, v, 1) for t in self.tasks)]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Against the paper (Table 1; differences to vanilla vs ours to the baseline):", "",
                  "| column | sign agreement | Spearman rho (n) | rows |", "|---|---|---|---|"]
        for col in ("early loss", "final loss", "downstream"):
            agree, n, names = self.sign_agreement(col)
            rho, k = self.spearman(col)
            lines.append(f"| {col} | {agree}/{n} | {'n/a' if math.isnan(rho) else f'{rho:+.2f}'} ({k}) | "
                         f"{', '.join(names) or '-'} |")
        lines += ["", "| variant | paper row | paper final loss diff | ours | paper downstream diff | ours |",
                  "|---|---|---|---|---|---|"]
        for v in self.others:
            row = self.grid.variants[v].paper
            if row is None:
                continue
            pv = PAPER_TABLE.get(row, {})
            base = PAPER_TABLE[PAPER_BASELINE]

            def pd(col, pv=pv, row=row, base=base):
                if pv.get(col) is not None:
                    return f"{pv[col] - base[col]:+.3f}"
                sign = PAPER_SIGNS.get(row, {}).get(col)
                return {1: "higher (in words)", -1: "lower (in words)"}.get(sign, "n/a")

            lines.append(f"| {v} | {row} | {pd('final loss')} | {self.stats['final loss'][v]['diff'].diff:+.3f} | "
                         f"{pd('downstream')} | {self.stats['downstream'][v]['diff'].diff:+.2f} |")
        return "\n".join(lines)


def plot_deltas(table: Table, path: Path) -> Path:
    """Difference to the baseline with its 95% paired interval per variant: final loss and downstream."""
    from matplotlib.figure import Figure

    cols = ("final loss", "downstream")
    fig = Figure(figsize=(10, 0.35 * len(table.others) + 1.8), layout="constrained")
    axes = fig.subplots(1, len(cols), sharey=True)
    ys = list(range(len(table.others)))
    for ax, col in zip(axes, cols, strict=True):
        ds = [table.stats[col][v]["diff"] for v in table.others]
        est = [d.diff for d in ds]
        lo = [0 if math.isnan(d.lo) else d.diff - d.lo for d in ds]
        hi = [0 if math.isnan(d.hi) else d.hi - d.diff for d in ds]
        colors = ["#c0392b" if table.stats[col][v]["significant"] else "#2b5d8a" for v in table.others]
        ax.errorbar(est, ys, xerr=[lo, hi], fmt="none", ecolor="#777777", capsize=3)
        ax.scatter(est, ys, c=colors, zorder=3)
        ax.axvline(0, color="#222222", linewidth=0.8)
        ax.set_title(f"{col}: variant - {table.baseline} ({'lower' if table.columns[col][1] else 'higher'} is "
                     "better; red: Holm p < 0.05)", fontsize="small")
        ax.grid(alpha=0.3)
    axes[0].set_yticks(ys, table.others)
    axes[0].invert_yaxis()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def plot_vs_paper(table: Table, path: Path) -> Path:
    """Our difference to the baseline against the paper's difference to vanilla, per column with paper numbers."""
    from matplotlib.figure import Figure

    cols = ("final loss", "downstream")
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    axes = fig.subplots(1, len(cols))
    for ax, col in zip(axes, cols, strict=True):
        pairs = table.paper_pairs(col)
        for v, paper, ours in pairs:
            d = table.stats[col][v]["diff"]
            err = 0 if math.isnan(d.lo) else (d.hi - d.lo) / 2
            ax.errorbar([paper], [ours], yerr=[err], fmt="o", capsize=3, color="#2b5d8a")
            ax.annotate(v, (paper, ours), fontsize="x-small", xytext=(3, 3), textcoords="offset points")
        ax.axhline(0, color="#222222", linewidth=0.8)
        ax.axvline(0, color="#222222", linewidth=0.8)
        rho, n = table.spearman(col)
        ax.set_title(f"{col}: Spearman rho {rho:+.2f} (n={n})" if not math.isnan(rho) else f"{col} (n={n})",
                     fontsize="small")
        ax.set_xlabel("paper: row - vanilla (T5-base, C4 / SuperGLUE)")
        ax.set_ylabel(f"ours: variant - {table.baseline} (95% CI)")
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    return path
