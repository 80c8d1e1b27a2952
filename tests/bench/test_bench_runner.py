import json

import pytest
from rich.console import Console

from paperzoo.bench import BENCHES, BenchResult, Stats, all_benches, print_table, run_bench, write_json
from paperzoo.bench.__main__ import main
from paperzoo.bench.core import peak
from paperzoo.bench.runner import BenchOptionError


def _fake_bench():
    stats = {"ours": Stats(0.002, 0.0019, 0.003, 0.0022, 5), "torch": Stats(0.004, 0.0038, 0.005, 0.0041, 5)}
    rows = [BenchResult.from_stats("mm", "64x64", stats, flops=2 * 64**3),
            {"name": "mm", "case": "no peer", "ours_ms": 1.0, "flops": 10**6, "ratio": 99, "batch": 4}]
    return rows, {"peak_gflops": 100.0, "notes": "fake"}


def test_bench_result_derived_figures():
    r = BenchResult("x", "c", ours_ms=2.0, peer_ms=5.0, flops=4 * 10**9, peak_gflops=4000.0)
    assert r.ratio == 2.5 and r.ours_gflops == pytest.approx(2000.0) and r.peer_gflops == pytest.approx(800.0)
    assert r.fraction_of_peak == pytest.approx(0.5)
    d = r.as_dict()
    assert d["ratio"] == 2.5 and d["fraction_of_peak"] == pytest.approx(0.5)
    alone = BenchResult("x", "c", ours_ms=1.0)
    assert alone.ratio is None and alone.fraction_of_peak is None
    with pytest.raises(ValueError, match="ours_ms"):
        BenchResult("x", "c", ours_ms=0.0)
    with pytest.raises(ValueError, match="missing"):
        BenchResult.from_dict({"name": "x"})


def test_unknown_bench_lists_valid_names():
    with pytest.raises(KeyError, match="valid names: .*peak"):
        run_bench("no-such-bench")
    assert "peak" in all_benches()


def test_run_bench_writes_json_and_markdown(tmp_path, monkeypatch):
    monkeypatch.setitem(BENCHES, "fake", _fake_bench)
    console = Console(record=True, width=200)
    out = tmp_path / "out" / "fake.json"
    rows, meta = run_bench("fake", json_path=out, command="paperzoo bench fake --json out/fake.json",
                           console=console, precision="fp32")
    doc = json.loads(out.read_text())
    assert doc["meta"]["command"] == "paperzoo bench fake --json out/fake.json"
    assert doc["meta"]["peak_gflops"] == 100.0 and doc["meta"]["notes"] == "fake"
    m = doc["meta"]["machine"]
    assert m["cpu"] and m["torch"] and m["torch_threads"] >= 1 and doc["meta"]["date"]
    r0, r1 = doc["rows"]
    assert r0["peer"] == "torch" and r0["ratio"] == pytest.approx(2.0)
    assert r0["ours_gflops"] == pytest.approx(2 * 64**3 / 0.002 / 1e9)
    assert r0["fraction_of_peak"] == pytest.approx(r0["ours_gflops"] / 100.0)
    assert r1["ratio"] is None and r1["batch"] == 4 and r1["fraction_of_peak"] == pytest.approx(0.01)
    md = out.with_suffix(".md").read_text()
    assert "`paperzoo bench fake --json out/fake.json`" in md and "| mm | 64x64, fp32 |" in md and "2.00x" in md
    assert "2.00x" in console.export_text()


def test_run_bench_default_path_and_bad_return(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setitem(BENCHES, "fake", _fake_bench)
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "fake.md").write_text("committed, with hand-written readings")
    console = Console(record=True, width=300, file=open(tmp_path / "log", "w"))
    run_bench("fake", console=console)
    assert (tmp_path / "benchmarks" / "fake.md").read_text() == "committed, with hand-written readings"
    assert not (tmp_path / "benchmarks" / "fake.json").exists()
    (written,) = (tmp_path / "runs" / "bench" / "fake").glob("*/fake.json")
    assert written.with_suffix(".md").is_file() and f"wrote {written}" in console.export_text()
    monkeypatch.setitem(BENCHES, "bad", lambda: 42)
    with pytest.raises(ValueError, match="must return"):
        run_bench("bad", json_path=tmp_path / "bad.json")


def test_commit_writes_benchmarks_and_keeps_the_readings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(BENCHES, "fake", _fake_bench)
    quiet = Console(file=open(tmp_path / "log", "w"))
    with pytest.raises(BenchOptionError, match="no benchmarks/ folder"):
        run_bench("fake", commit=True, console=quiet)
    with pytest.raises(BenchOptionError, match="not both"):
        run_bench("fake", json_path=tmp_path / "x.json", commit=True, console=quiet)
    (tmp_path / "benchmarks").mkdir()
    run_bench("fake", commit=True, command="paperzoo bench fake --commit", console=quiet, precision="fp32")
    md = tmp_path / "benchmarks" / "fake.md"
    md.write_text(md.read_text() + "\n**Reading.** Ours is 2x faster because of X.\n")
    run_bench("fake", commit=True, command="paperzoo bench fake --commit", console=quiet, precision="fp32")
    text = md.read_text()
    assert text.count("| mm | 64x64, fp32 |") == 1 and text.count("**Reading.** Ours is 2x faster") == 1
    assert "_Readings below were written for the run of " in text
    run_bench("fake", commit=True, command="paperzoo bench fake --commit", console=quiet,
              precision="fp32")  # and again: one header
    assert md.read_text().count("_Readings below") == 1 and md.read_text().count("**Reading.**") == 1


def test_cli_bench_flags(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from paperzoo.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setitem(BENCHES, "fake", _fake_bench)
    result = CliRunner().invoke(app, ["bench", "fake"], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "the committed benchmarks/ are untouched" in result.output, result.output
    assert not (tmp_path / "benchmarks").exists()
    result = CliRunner().invoke(app, ["bench", "fake", "--commit"], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "error: --commit writes benchmarks/fake.json" in result.output, result.output


def test_module_entry_point(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(BENCHES, "fake", _fake_bench)
    assert main(["fake", "--json", str(tmp_path / "f.json")]) == 0
    assert (tmp_path / "f.md").is_file()
    assert main(["nope"]) == 2 and "valid names" in capsys.readouterr().err
    assert main(["fake", "--commit", "--json", str(tmp_path / "g.json")]) == 2 and "not both" in capsys.readouterr().err
    assert main([]) == 0 and "peak" in capsys.readouterr().out


def test_peak_bench_small_sizes(tmp_path):
    rows, meta = peak(sizes=(32,), repeats=1)
    assert {r.extra["threads"] for r in rows} >= {1}
    assert meta["peak_gflops"] == pytest.approx(max(r.ours_gflops for r in rows))
    assert all(r.ratio is None and r.fraction_of_peak > 0 for r in rows)
    json_path, md_path = write_json(tmp_path / "peak.json", rows, {"bench": "peak", **meta})
    assert json.loads(json_path.read_text())["rows"][0]["n"] == 32 and "n/a" in md_path.read_text()
    print_table(rows, console=Console(file=open(tmp_path / "log", "w")))
