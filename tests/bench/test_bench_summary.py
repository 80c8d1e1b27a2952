"""``benchmarks/README.md``: the per-bench summary and the checked speed targets, rendered from bench JSON files."""

import json
from pathlib import Path

import pytest

from paperzoo.bench.summary import load, readme, summary_table, targets_table, write_readme

ROOT = Path(__file__).resolve().parents[2]


def _row(name, case, precision, ours_ms, peer_ms=None, peer="transformers", frac=None, **extra):
    return {"name": name, "case": f"{case}, {precision}", "ours_ms": ours_ms, "peer_ms": peer_ms, "peer": peer,
            "ratio": peer_ms / ours_ms if peer_ms else None, "fraction_of_peak": frac, "precision": precision,
            **extra}


def _write(folder, name, rows, **meta):
    (folder / f"{name}.json").write_text(json.dumps({"meta": {"bench": name, "date": "2026-12-01T20:00:00+00:00",
                                                              "git_commit": "abc1234", **meta}, "rows": rows}))


@pytest.fixture
def fixture_dir(tmp_path):
    _write(tmp_path, "encoder", [
        _row("stack fwd+bwd", "8x128", "fp32", 100.0, 104.0, frac=0.72, identical_math=True, gemm_bound=True),
        _row("stack fwd+bwd", "8x128", "bf16", 50.0, 45.0, frac=0.55, identical_math=True, gemm_bound=True,
             speedup_vs_ours_fp32=2.0),
        _row("layer fwd", "8x128", "fp32", 10.0, 11.0, frac=0.3, identical_math=True),
        _row("layer fwd", "8x128", "bf16", 5.0, 5.5, frac=0.2, identical_math=True, speedup_vs_ours_fp32=1.5)],
        precisions={"fp32": {"peak_gflops": 160.0}, "bf16": {"peak_gflops": 400.0}})
    _write(tmp_path, "electra", [  # HF does more work: a ratio vs HF, but no identical-math row
        _row("joint step", "8x128", "fp32", 10.0, 5.0, peer_flops=2, flops=1)],
        precisions={"fp32": {}, "bf16": {"skipped": "bf16 rows skipped: this CPU has no avx512_bf16 or amx_bf16"}})
    sw = []
    for p, (o8, o32) in (("fp32", (1.20, 3.0)), ("bf16", (1.40, 3.0))):
        for d, f in ((512, 2048), (768, 3072)):
            sw.append(_row("switch vs dense, 8 experts, cf 1.0", f"d {d}", p, 100 * o8, 100.0, "dense FFN", experts=8,
                           capacity_factor=1.0, dim=d, ffn_dim=f, overhead=o8 - 1, floor_overhead=0.05))
        sw.append(_row("switch vs dense, 32 experts, cf 1.0", "d 256", p, 100 * o32, 100.0, "dense FFN",
                       experts=32, capacity_factor=1.0, dim=256, ffn_dim=1024, overhead=o32 - 1,
                       floor_overhead=1.9 if p == "fp32" else 1.6))
    _write(tmp_path, "switch", sw)
    (tmp_path / "hub.json").write_text("[]")  # another shape: left out
    return tmp_path


def _line(table, *cells):
    return next(ln for ln in table.splitlines() if all(c in ln for c in cells))


def test_summary_has_ratio_vs_hf_and_peak_per_precision(fixture_dir):
    docs = load(fixture_dir)
    assert sorted(docs) == ["electra", "encoder", "switch"]
    table = summary_table(docs)
    enc = _line(table, "| encoder |")
    # fp32: geo-mean of 1.04 and 1.10; bf16: of 0.90 and 1.10; best % peak; ours bf16 vs fp32: geo-mean of 2 and 1.5
    assert "| 1.07x (1.04-1.10, 2 rows) | 0.99x (0.90-1.10, 2 rows) | 72% | 55% | 1.73x (1.50-2.00) |" in enc
    assert "2026-12-01, abc1234" in enc
    assert "| 0.50x | skipped | - | skipped | skipped |" in _line(table, "| electra |")
    assert "dense FFN: fp32 " in _line(table, "| switch |")
    assert "electra: bf16 skipped: bf16 rows skipped: this CPU has no avx512_bf16" in table


def test_targets_are_met_not_met_or_not_measured_from_the_rows(fixture_dir):
    t = targets_table(load(fixture_dir))
    assert "| fp32 | **met** | 2/2 rows >= 1.0; lowest 1.04x, encoder: stack fwd+bwd" in _line(t, "identical math",
                                                                                                 "| fp32 |")
    assert "| bf16 | **not met** | 1/2 rows >= 1.0; lowest 0.90x" in _line(t, "identical math", "| bf16 |")
    assert "| fp32 | **met** | 1/1 rows >= 70%" in _line(t, "GEMM-bound", "| fp32 |")
    assert "| bf16 | **not met** | 0/1 rows >= 70%; lowest 55%" in _line(t, "GEMM-bound", "| bf16 |")
    assert "| fp32 | **met** | overhead +20% (floor +5%) |" in _line(t, "d 512 / 2048", "| fp32 |")
    assert "| bf16 | **not met** | overhead +40%" in _line(t, "d 768 / 3072", "| bf16 |")
    # 32 experts: +200% overhead against a +190% floor is +10% beyond it (met); against +160%, +40% (not met)
    assert "| fp32 | **met** | d 256: overhead +200%, floor +190%, beyond it +10% |" in _line(t, "32 experts",
                                                                                            "| fp32 |")
    assert "**not met**" in _line(t, "32 experts", "| bf16 |")
    empty = targets_table({})
    assert empty.count("not measured") == 10 and "**met**" not in empty


def test_write_readme_renders_the_folder(fixture_dir):
    path = write_readme(fixture_dir)
    text = path.read_text()
    assert path == fixture_dir / "README.md" and text == readme(load(fixture_dir))
    assert "## Per bench" in text and "## Speed targets" in text and "do not edit by hand" in text


def test_committed_readme_is_generated_from_the_committed_json():
    want = readme(load(ROOT / "benchmarks"))
    got = (ROOT / "benchmarks" / "README.md").read_text()
    assert got == want, "benchmarks/README.md is stale: regenerate it with `python -m paperzoo.bench.summary`"
