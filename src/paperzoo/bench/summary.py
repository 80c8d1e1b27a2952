"""``benchmarks/README.md``: every committed bench summarised, and the speed targets checked, from the JSON alone.

Two tables, both generated from ``benchmarks/*.json`` (the files ``paperzoo bench NAME --commit`` writes; the
README is rewritten by every ``--commit``, and by ``python -m paperzoo.bench.summary``):

* per bench (model): the ratio vs Hugging Face in each precision (geometric mean, and the range over its rows),
  the best fraction of the measured peak of each precision, ours bf16 against ours fp32 (timed in the same rounds),
  the other peers, and the run the figures come from;
* the speed targets of issue 21, each per precision, marked **met**, **not met** or **not measured** (no row of the
  committed files answers it):

  - at identical math, never slower than Hugging Face: every row with ``identical_math`` has ratio >= 1.0;
  - GEMM-bound training steps (rows flagged ``gemm_bound``) at >= 70% of the peak of the precision used;
  - Switch's overhead over a FLOP-matched dense FFN <= 25% at 8 experts (capacity factor 1.0) at d 512 / d_ff 2048
    and d 768 / 3072;
  - at 32 experts, the overhead beyond the memory-traffic floor (``overhead - floor_overhead``, see
    :mod:`paperzoo.bench.switch`) <= 25%, at every width measured.

A row's precision is its ``precision`` field; files written before the precision axis have none and are fp32 unless
their meta says otherwise (``peak_precision``, or ``precision.used``).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["TARGETS", "load", "readme", "summary_table", "targets_table", "write_readme"]

HF = "transformers"
PRECISIONS = ("fp32", "bf16")
HF_RATIO, GEMM_PEAK, SWITCH_OVERHEAD = 1.0, 0.70, 0.25
TARGETS = ("ratio >= 1.0 vs Hugging Face at identical math", "GEMM-bound training steps >= 70% of peak",
           "Switch overhead vs dense <= 25%, 8 experts, d 512 / 2048", "Switch overhead vs dense <= 25%, 8 experts, "
           "d 768 / 3072", "Switch overhead beyond the memory-traffic floor <= 25%, 32 experts")
COMMAND = "python -m paperzoo.bench.summary"


def load(folder: Path) -> dict[str, dict[str, Any]]:
    """``{bench name: {"meta": ..., "rows": [...]}}`` of every bench file in ``folder`` (files of another shape,
    such as a scaling table or the hub's load test, are left out)."""
    docs = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not readable JSON ({e}); regenerate it with `paperzoo bench "
                             f"{path.stem} --commit`") from e
        if isinstance(doc, dict) and isinstance(doc.get("meta"), dict) and isinstance(doc.get("rows"), list):
            docs[str(doc["meta"].get("bench") or path.stem)] = doc
    return docs


def _precision(row: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    if row.get("precision"):
        return str(row["precision"])
    used = meta.get("precision", {}).get("used") if isinstance(meta.get("precision"), dict) else None
    return str(meta.get("peak_precision") or used or "fp32")


def _rows(doc: Mapping[str, Any], precision: str) -> list[dict[str, Any]]:
    return [r for r in doc["rows"] if _precision(r, doc["meta"]) == precision]


def _identical_math(row: Mapping[str, Any]) -> bool:
    """Flagged by the bench; in files from before the flag: an HF peer doing the same FLOPs on the same model."""
    if "identical_math" in row:
        return bool(row["identical_math"])
    return row.get("peer") == HF and row.get("peer_flops") in (None, row.get("flops")) and \
        row.get("variant") != "deployed"


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _ratios(rows: Iterable[Mapping[str, Any]]) -> str:
    xs = [r["ratio"] for r in rows if r.get("ratio")]
    if not xs:
        return "-"
    if len(xs) == 1:
        return f"{xs[0]:.2f}x"
    return f"{_geo(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f}, {len(xs)} rows)"


def _best_peak(rows: Iterable[Mapping[str, Any]]) -> str:
    xs = [r["fraction_of_peak"] for r in rows if r.get("fraction_of_peak")]
    return f"{max(xs):.0%}" if xs else "-"


def _skipped(doc: Mapping[str, Any], precision: str) -> str | None:
    p = (doc["meta"].get("precisions") or {}).get(precision) or {}
    return p.get("skipped")


def summary_table(docs: Mapping[str, Mapping[str, Any]]) -> str:
    """Per bench: ratio vs HF per precision, best % of peak per precision, ours bf16 vs ours fp32, other peers, run."""
    head = ("| bench | vs HF, fp32 | vs HF, bf16 | best % peak, fp32 | best % peak, bf16 | ours bf16 vs ours fp32 | "
            "other peers | run |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, doc in sorted(docs.items()):
        fp32, bf16 = _rows(doc, "fp32"), _rows(doc, "bf16")
        skipped = _skipped(doc, "bf16")
        no_bf16 = "skipped" if skipped else "not measured"
        others = sorted({r["peer"] for r in fp32 + bf16 if r.get("peer") and r["peer"] != HF})
        other = "; ".join(f"{p}: " + ", ".join(f"{prec} {_ratios([r for r in rows if r.get('peer') == p])}"
                                              for prec, rows in (("fp32", fp32), ("bf16", bf16))
                                              if any(r.get("peer") == p for r in rows))
                          for p in others) or "-"
        speed = [r["speedup_vs_ours_fp32"] for r in bf16 if r.get("speedup_vs_ours_fp32")]
        m = doc["meta"]
        run = f"{str(m.get('date', '?'))[:10]}" + (f", {m['git_commit']}" if m.get("git_commit") else "")
        cells = [name, _ratios([r for r in fp32 if r.get("peer") == HF]),
                 _ratios([r for r in bf16 if r.get("peer") == HF]) if bf16 else no_bf16,
                 _best_peak(fp32), _best_peak(bf16) if bf16 else no_bf16,
                 (f"{_geo(speed):.2f}x ({min(speed):.2f}-{max(speed):.2f})" if len(speed) > 1 else
                  f"{speed[0]:.2f}x" if speed else "-" if bf16 else no_bf16), other, run]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    notes = [f"- {n}: bf16 skipped: {_skipped(d, 'bf16')}" for n, d in sorted(docs.items()) if _skipped(d, "bf16")]
    return "\n".join(lines + ([""] + notes if notes else []))


def _status(ok: list[bool]) -> str:
    return "not measured" if not ok else "**met**" if all(ok) else "**not met**"


def _switch_rows(docs: Mapping[str, Mapping[str, Any]], precision: str, experts: int,
                 dims: tuple[int, int] | None) -> list[dict[str, Any]]:
    doc = docs.get("switch")
    if doc is None:
        return []
    return [r for r in _rows(doc, precision) if r.get("peer") == "dense FFN" and r.get("experts") == experts
            and r.get("capacity_factor") == 1.0 and "overhead" in r
            and (dims is None or (r.get("dim"), r.get("ffn_dim")) == dims)]


def _where(r: Mapping[str, Any], bench: str) -> str:
    return f"{bench}: {r['name']} ({r['case']})"


def targets_table(docs: Mapping[str, Mapping[str, Any]]) -> str:
    """The targets, one line per target and precision: status and the figures behind it."""
    lines = ["| target | precision | status | measured |", "|---|---|---|---|"]
    for p in PRECISIONS:
        same = [(b, r) for b, d in sorted(docs.items()) for r in _rows(d, p)
                if r.get("peer") == HF and r.get("ratio") and _identical_math(r)]
        worst = min(same, key=lambda br: br[1]["ratio"], default=None)
        detail = (f"{sum(r['ratio'] >= HF_RATIO for _, r in same)}/{len(same)} rows >= 1.0; lowest "
                  f"{worst[1]['ratio']:.2f}x, {_where(worst[1], worst[0])}" if worst else "-")
        lines.append(f"| {TARGETS[0]} | {p} | {_status([r['ratio'] >= HF_RATIO for _, r in same])} | {detail} |")
    for p in PRECISIONS:
        gemm = [(b, r) for b, d in sorted(docs.items()) for r in _rows(d, p)
                if r.get("gemm_bound") and r.get("fraction_of_peak")]
        worst = min(gemm, key=lambda br: br[1]["fraction_of_peak"], default=None)
        detail = (f"{sum(r['fraction_of_peak'] >= GEMM_PEAK for _, r in gemm)}/{len(gemm)} rows >= 70%; "
                  f"lowest {worst[1]['fraction_of_peak']:.0%}, {_where(worst[1], worst[0])}; highest "
                  f"{max(r['fraction_of_peak'] for _, r in gemm):.0%}" if worst else "-")
        lines.append(f"| {TARGETS[1]} | {p} | {_status([r['fraction_of_peak'] >= GEMM_PEAK for _, r in gemm])} | "
                     f"{detail} |")
    for target, dims in ((TARGETS[2], (512, 2048)), (TARGETS[3], (768, 3072))):
        for p in PRECISIONS:
            rows = _switch_rows(docs, p, 8, dims)
            detail = "; ".join(f"overhead {r['overhead']:+.0%} (floor {r['floor_overhead']:+.0%})"
                               if "floor_overhead" in r else f"overhead {r['overhead']:+.0%}" for r in rows) or "-"
            lines.append(f"| {target} | {p} | {_status([r['overhead'] <= SWITCH_OVERHEAD for r in rows])} | "
                         f"{detail} |")
    for p in PRECISIONS:
        rows = [r for r in _switch_rows(docs, p, 32, None) if "floor_overhead" in r]
        detail = "; ".join(f"d {r.get('dim', '?')}: overhead {r['overhead']:+.0%}, floor {r['floor_overhead']:+.0%}, "
                           f"beyond it {r['overhead'] - r['floor_overhead']:+.0%}" for r in rows) or "-"
        ok = [r["overhead"] - r["floor_overhead"] <= SWITCH_OVERHEAD for r in rows]
        lines.append(f"| {TARGETS[4]} | {p} | {_status(ok)} | {detail} |")
    return "\n".join(lines)


def readme(docs: Mapping[str, Mapping[str, Any]]) -> str:
    """The whole ``benchmarks/README.md``."""
    return "\n".join([
        "# Benchmarks", "",
        f"Generated from the committed `benchmarks/*.json` by `{COMMAND}` (and by every `paperzoo bench NAME "
        "--commit`); do not edit by hand. Each bench's own `.md` has its rows, command, machine and readings.", "",
        "CPU figures are ratios measured in one process, interleaved (ours vs the peer, and in bf16 also ours in "
        "fp32, in the same rounds), and fractions of the matmul peak measured in the precision of the row "
        "(`benchmarks/peak.md`). bf16 rows exist only where the machine computes bf16 fast (AVX512_BF16 or AMX, "
        "detected by `paperzoo.train.precision`); elsewhere they are skipped with the reason.", "",
        "## Per bench", "",
        summary_table(docs), "",
        "Ratio = peer time / our time (> 1: ours is faster): the geometric mean over the bench's rows against that "
        "peer, with the range. Ours bf16 vs ours fp32: our fp32 time / our bf16 time on the same rows.", "",
        "## Speed targets", "",
        targets_table(docs), "",
        "A target is met when every committed row it covers meets it, and not measured when no committed row covers "
        "it (regenerate the benches with `paperzoo bench NAME --commit` on a quiet machine). Identical math: rows "
        "where ours and Hugging Face compute the same function with the same weights (not ELECTRA's masked-only "
        "head, Perceiver's labelled-only decoding or MobileNetV2's folded BatchNorm). GEMM-bound: the training "
        "steps whose time the matrix products dominate (encoder stack, Funnel, Swin-T, the wide VATT; "
        "`benchmarks/ceilings.md`); how close to the peak their kernels themselves run at these shapes, the "
        "bound on any implementation: `benchmarks/peak-ceilings.md` (`python -m paperzoo.bench.ceiling --peak`). "
        "The Switch memory-traffic floor: `paperzoo.bench.switch`.", ""])


def write_readme(folder: Path = Path("benchmarks")) -> Path:
    """Write ``folder/README.md`` from ``folder``'s bench files; returns its path."""
    from paperzoo.report.serial import write_text_atomic

    path = Path(folder) / "README.md"
    write_text_atomic(path, readme(load(folder)))
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("benchmarks"), help="the folder of bench JSON files")
    print(f"wrote {write_readme(ap.parse_args(argv).dir)}")


if __name__ == "__main__":
    main()
