"""The precision axis of ``paperzoo bench``: fp32 rows, bf16 rows where bf16 is fast (detected, forced both ways here),
ours re-timed in fp32 inside the bf16 rounds, each row against its precision's peak, skipped passes with a reason."""

import json

import pytest
import torch
from rich.console import Console

from paperzoo import measure
from paperzoo.bench import BENCHES, precision, run_bench
from paperzoo.train import precision as train_precision

pytestmark = pytest.mark.usefixtures("one_thread")
PEAKS = {torch.float32: 100.0, torch.bfloat16: 250.0}


@pytest.fixture
def fast_bf16(monkeypatch):
    """Detection forced: this CPU has (True) or lacks (False) bf16 units; the matmul peaks are fixed per dtype."""
    monkeypatch.setattr(measure, "machine_peak_gflops", lambda dtype=torch.float32, device="cpu": PEAKS[dtype])

    def force(has: bool) -> None:
        monkeypatch.setattr(train_precision, "cpu_bf16_units", lambda: ["avx512_bf16"] if has else [])
    return force


def _matmul_bench(calls):
    """A bench whose sides record the dtype their forward computes in, and whose backward runs outside autocast."""
    w = torch.randn(16, 16, requires_grad=True)
    x = torch.randn(8, 16)

    def side(tag):
        def f():
            with precision.autocast():
                y = x @ w
            calls.append((tag, y.dtype, torch.is_autocast_enabled("cpu")))
            y.float().sum().backward()
        return f

    def bench():
        stats = precision.time_interleaved({"ours": side("ours"), "peer": side("peer")}, warmup=0, repeats=2)
        row = measure_row(stats)
        return [row], {"pass": precision.current().used}

    def measure_row(stats):
        from paperzoo.bench import BenchResult

        return BenchResult.from_stats("mm", "8x16", stats, flops=2 * 8 * 16 * 16)
    return bench


def _quiet(tmp_path):
    return Console(file=open(tmp_path / "log", "w"))


def test_fast_bf16_gives_both_passes_with_their_peaks_and_an_interleaved_fp32_reference(tmp_path, monkeypatch,
                                                                                        fast_bf16):
    fast_bf16(True)
    calls = []
    monkeypatch.setitem(BENCHES, "mm", _matmul_bench(calls))
    rows, meta = run_bench("mm", json_path=tmp_path / "mm.json", console=_quiet(tmp_path))
    fp32, bf16 = rows
    assert (fp32.extra["precision"], bf16.extra["precision"]) == ("fp32", "bf16")
    assert fp32.case == "8x16, fp32" and bf16.case == "8x16, bf16"
    assert fp32.peak_gflops == 100.0 and bf16.peak_gflops == 250.0
    assert bf16.fraction_of_peak == pytest.approx(bf16.ours_gflops / 250.0)
    # the bf16 pass: ours and the peer under bf16 autocast, ours again in fp32, in the same rounds (3 calls a round)
    bf16_calls = calls[4:]
    assert len(bf16_calls) == 6 and [c[0] for c in bf16_calls] == ["ours", "peer", "ours"] * 2
    assert [c[1] for c in bf16_calls[:3]] == [torch.bfloat16, torch.bfloat16, torch.float32]
    assert all(dt == torch.float32 for _, dt, _ in calls[:4])
    assert not any(on for _, _, on in calls), "backward must run outside autocast"
    assert "ours_fp32_ms" in bf16.extra and "ours_fp32_ms" not in fp32.extra
    assert bf16.extra["speedup_vs_ours_fp32"] == pytest.approx(bf16.extra["ours_fp32_ms"] / bf16.ours_ms)
    assert meta["pass"] == "fp32" and meta["precisions"]["bf16"]["meta"] == {"pass": "bf16"}
    assert meta["precisions"]["bf16"]["peak_gflops"] == 250.0 and "avx512_bf16" in meta["precisions"]["bf16"]["reason"]
    doc = json.loads((tmp_path / "mm.json").read_text())
    assert [r["precision"] for r in doc["rows"]] == ["fp32", "bf16"]
    md = (tmp_path / "mm.md").read_text()
    assert "measured matmul peaks: fp32 100.0 GFLOP/s, bf16 250.0 GFLOP/s" in md and "| mm | 8x16, bf16 |" in md


def test_without_fast_bf16_the_bf16_rows_are_skipped_with_the_reason(tmp_path, monkeypatch, fast_bf16):
    fast_bf16(False)
    calls = []
    monkeypatch.setitem(BENCHES, "mm", _matmul_bench(calls))
    rows, meta = run_bench("mm", json_path=tmp_path / "mm.json", console=_quiet(tmp_path))
    assert [r.extra["precision"] for r in rows] == ["fp32"]
    assert "no avx512_bf16 or amx_bf16" in meta["precisions"]["bf16"]["skipped"]
    assert "bf16 skipped (bf16 rows skipped: this CPU has no" in (tmp_path / "mm.md").read_text()
    with pytest.raises(RuntimeError, match="ran in no precision"):
        run_bench("mm", json_path=tmp_path / "b.json", console=_quiet(tmp_path), precision="bf16")


def test_a_bench_can_declare_itself_fp32_only(tmp_path, monkeypatch, fast_bf16):
    fast_bf16(True)

    def bench():
        precision.fp32_only("its inner training loop has no precision setting")
        from paperzoo.bench import BenchResult

        return [BenchResult("x", "c", 1.0)], {}
    monkeypatch.setitem(BENCHES, "fp32only", bench)
    rows, meta = run_bench("fp32only", json_path=tmp_path / "x.json", console=_quiet(tmp_path))
    assert len(rows) == 1 and meta["precisions"]["bf16"] == {"skipped": "its inner training loop has no precision "
                                                                         "setting"}


def test_bad_precision_names_are_refused_before_the_bench_runs():
    with pytest.raises(ValueError, match="'all', 'fp32' or 'bf16'"):
        precision.passes("fp16")
    with pytest.raises(ValueError, match="fp32_ref must name"):
        with precision.using(train_precision.Precision("bf16", "bf16", "test")):
            precision.time_interleaved({"a": lambda: None}, fp32_ref="b")
    assert precision.current().used == "fp32" and precision.dtype() == torch.float32


def test_a_real_bench_in_a_bf16_pass_runs_both_sides_under_autocast():
    """The encoder bench's layer at a tiny size: bf16 rows carry ours re-timed in fp32 and HF's matching output."""
    from paperzoo.bench.encoder import encoder

    with precision.using(train_precision.Precision("bf16", "bf16", "test")):
        rows, meta = encoder(sizes=((2, 16),), repeats=1, parts=("layer",))
    assert [r.name for r in rows] == ["encoder layer fwd", "encoder layer fwd+bwd"]
    assert all(r.extra["ours_fp32_ms"] > 0 and r.peer == "transformers" for r in rows)
    assert meta["max_abs_diff_vs_hf"]["layer 16"] < 0.1  # at most bf16 rounding: the same function
