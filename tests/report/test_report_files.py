import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from paperzoo.report import (
    build_index,
    compare,
    mean_ci,
    new_run_dir,
    plot_bars_with_ci,
    plot_metrics,
    read_metrics,
    write_config,
    write_result,
)


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("PAPERZOO_RUNS", str(root))
    return root


def _metrics(run_dir: Path, seed: int) -> Path:
    path = run_dir / f"seed{seed}" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    lines = [json.dumps({"step": s, "loss": 2.0 / (s + 1) + 0.01 * seed, "lr": 1e-3}) for s in range(10)]
    lines.insert(5, json.dumps({"step": 4, "eval_acc": 0.8 + 0.01 * seed}))
    path.write_text("\n".join(lines) + '\n{"step": 11, "lo')  # a torn last line
    return path


def test_new_run_dir_layout(runs):
    d = new_run_dir("fashion-cnn")
    assert d.parent == runs / "fashion-cnn" and d.is_dir()
    assert re.fullmatch(r"\d{8}-\d{6}", d.name)
    d2 = new_run_dir("fashion-cnn")
    assert d2 != d and d2.is_dir()  # same second: a suffix keeps it fresh
    out = runs.parent / "elsewhere" / "run"
    assert new_run_dir("fashion-cnn", out) == out and out.is_dir()
    with pytest.raises(ValueError, match="paper name"):
        new_run_dir("../etc")


def test_write_config_serialises_and_records_machine(runs):
    @dataclass(frozen=True)
    class Cfg:
        lr: float = 1e-3
        sizes: tuple = (32, 64)
        data: Path = Path("/data/x")
        seeds: tuple = (0, 1, 2)

    d = new_run_dir("demo")
    doc = json.loads(write_config(d, Cfg()).read_text())
    assert doc["config"] == {"lr": 1e-3, "sizes": [32, 64], "data": "/data/x", "seeds": [0, 1, 2]}
    assert doc["seeds"] == [0, 1, 2]
    m = doc["machine"]
    assert m["torch"] and m["cpu_count"] >= 1 and m["torch_threads"] >= 1 and m["platform"]
    doc = json.loads(write_config(new_run_dir("demo"), {"seed": 7, "nan": float("nan")}).read_text())
    assert doc["seeds"] == [7] and doc["config"]["nan"] is None
    with pytest.raises(ValueError, match="dict or a dataclass"):
        write_config(d, [1, 2])


def test_write_config_refuses_a_folder_made_with_another_config(runs):
    d = new_run_dir("demo")
    cfg = {"preset": "small", "train": {"lr": 1e-3, "steps": 100}, "seeds": (0, 1)}
    write_config(d, cfg)
    write_config(d, dict(cfg))  # a resume with the same config (tuples vs lists alike) is fine
    with pytest.raises(ValueError, match=r"train\.lr: 0\.001 -> 0\.0002.*new --out"):
        write_config(d, {**cfg, "train": {"lr": 2e-4, "steps": 100}})
    with pytest.raises(ValueError, match=r"seeds: \[0, 1\] -> \[0, 1, 2\]"):
        write_config(d, {**cfg, "seeds": (0, 1, 2)})
    assert json.loads((d / "config.json").read_text())["config"]["train"]["lr"] == 1e-3  # left as it was


def test_a_field_added_later_at_its_default_does_not_block_resume(runs):
    """A run folder made before a config class grew a field resumes when the field is at its declared default
    (the value that reproduces the old behaviour); any other value is still a different config."""

    @dataclass(frozen=True)
    class Old:
        lr: float = 1e-3

    @dataclass(frozen=True)
    class New:
        lr: float = 1e-3
        condition_dim: int = 0
        extra: tuple = (1, 2)

    @dataclass(frozen=True)
    class Outer:
        model: object
        seeds: int = 1

    d = new_run_dir("demo")
    write_config(d, Outer(Old()), seeds=[0])
    write_config(d, Outer(New()), seeds=[0])  # new fields at their defaults: accepted, and recorded
    assert json.loads((d / "config.json").read_text())["config"]["model"]["condition_dim"] == 0
    e = new_run_dir("demo", runs / "demo" / "other")
    write_config(e, Outer(Old()), seeds=[0])
    with pytest.raises(ValueError, match=r"condition_dim: '<absent>' -> 4"):
        write_config(e, Outer(New(condition_dim=4)), seeds=[0])


def test_write_result_files_report_and_index(runs):
    d = new_run_dir("fashion-cnn")
    write_config(d, {"epochs": 2, "seeds": [0, 1, 2]})
    accs = [0.901, 0.897, 0.905]
    plot = plot_metrics(d, [_metrics(d, s) for s in range(3)], x="step", ys=["loss", "eval_acc"])
    bars = plot_bars_with_ci({"ours": accs, "paper": mean_ci([0.9, 0.91])}, d / "acc.png", reference=0.88)
    cmp = compare(accs, 0.88)
    report = write_result(d, "fashion-cnn", "A small CNN reaches >= 88% test accuracy on Fashion-MNIST",
                          {"test_acc": accs, "train_loss": mean_ci([0.2, 0.25])}, "reproduced",
                          details={"vs 0.88": cmp, "epochs": 2}, notes="Laptop scale.", plots=[plot, bars])
    assert report == d / "report.md"
    res = json.loads((d / "result.json").read_text())
    assert res["verdict"] == "reproduced" and res["claim"].startswith("A small CNN")
    m = res["measurements"]["test_acc"]
    assert m["values"] == accs and m["n"] == 3 and m["lo"] < m["mean"] < m["hi"]
    assert m["confidence"] == 0.95
    assert res["plots"] == ["loss_eval_acc.png", "acc.png"]
    lines = report.read_text().splitlines()
    assert lines[0] == "# fashion-cnn: A small CNN reaches >= 88% test accuracy on Fashion-MNIST"
    assert lines[1].startswith("- **Measured:** test_acc = 0.901 (95% CI ") and "n=3" in lines[1]
    assert "train_loss = 0.225 (95% CI" in lines[1]
    assert lines[2] == "- **Verdict:** reproduced"
    text = report.read_text()
    assert "![acc](acc.png)" in text and "## Config" in text and "Laptop scale." in text
    index = runs.parent / "reports" / "index.html"
    page = index.read_text()
    rel = f"../runs/fashion-cnn/{d.name}"
    assert f'href="{rel}/report.md"' in page and f'src="{rel}/acc.png"' in page
    assert "reproduced" in page and "A small CNN" in page


def test_index_lists_every_run_with_its_verdict(runs):
    for paper, verdict in [("a", "reproduced"), ("b", "not reproduced"), ("b", "inconclusive")]:
        write_result(new_run_dir(paper), paper, f"claim of {paper}", {"x": [1.0, 2.0]}, verdict)
    new_run_dir("c")  # empty folder: not a run
    unfinished = new_run_dir("d")
    write_config(unfinished, {"seed": 0})
    out = build_index(runs, runs.parent / "site" / "index.html")
    page = out.read_text()
    assert page.count("<tr><td>") == 4
    assert "not reproduced" in page and "inconclusive" in page and "no result" in page
    assert "#c0392b" in page and "#1e8449" in page
    assert ">c<" not in page


def test_index_latest_is_the_newest_finished_run_and_unfinished_runs_are_apart(runs):
    done = new_run_dir("a")
    write_config(done, {"seed": 0})
    write_result(done, "a", "claim of a", {"x": [1.0, 2.0]}, "reproduced")
    later = runs / "a" / "99999999-999999"  # a newer start that failed or was interrupted: config.json only
    later.mkdir()
    write_config(later, {"seed": 0})
    page = build_index(runs).read_text()
    summary, finished, unfinished = (page.split("<h2>Latest per paper</h2>")[1].split("<h2>All finished runs</h2>")[0],
                                     *page.split("<h2>All finished runs</h2>")[1].split("<h2>Unfinished runs</h2>"))
    assert "reproduced" in summary and "no result" not in summary and done.name in summary
    assert done.name in finished and later.name not in finished
    assert later.name in unfinished and "no result" in unfinished and done.name not in unfinished


def test_index_shows_runs_written_outside_the_runs_root(runs, tmp_path):
    elsewhere = new_run_dir("a", tmp_path / "mine" / "try-1")
    write_config(elsewhere, {"seed": 0})
    write_result(elsewhere, "a", "claim of a", {"x": [1.0, 2.0]}, "inconclusive")
    page = (runs.parent / "reports" / "index.html").read_text()  # rebuilt by write_result
    assert "try-1" in page and "inconclusive" in page and str(elsewhere) in page
    assert 'href="../mine/try-1/report.md"' in page


def test_write_result_validates(runs):
    d = new_run_dir("x")
    with pytest.raises(ValueError, match="verdict must be one of"):
        write_result(d, "x", "claim", {"a": [1.0]}, "maybe")
    with pytest.raises(ValueError, match="paper"):
        write_result(d, "", "claim", {"a": [1.0]}, "inconclusive")
    with pytest.raises(ValueError, match="claim"):
        write_result(d, "x", " ", {"a": [1.0]}, "inconclusive")
    with pytest.raises(ValueError, match="measurement 'a'"):
        write_result(d, "x", "claim", {"a": "high"}, "inconclusive")
    with pytest.raises(ValueError, match="image files"):
        write_result(d, "x", "claim", {"a": [1.0]}, "inconclusive", plots=[d / "missing.png"])
    # one seed: written, with no interval
    write_result(d, "x", "claim", {"a": [1.0]}, "inconclusive")
    res = json.loads((d / "result.json").read_text())
    assert res["measurements"]["a"]["lo"] is None and "no CI" in (d / "report.md").read_text().splitlines()[1]


def test_write_result_outside_runs_root_copies_plots_and_skips_index(runs, tmp_path):
    d = tmp_path / "custom"  # made without new_run_dir: not recorded, so no index
    d.mkdir()
    img = plot_bars_with_ci({"a": [1.0, 2.0, 1.5]}, tmp_path / "elsewhere.png")
    write_result(d, "x", "claim", {"a": [1.0, 1.1]}, compare([1.0, 1.1], [0.0, 0.1]), plots=[img])
    assert (d / "elsewhere.png").is_file()
    assert json.loads((d / "result.json").read_text())["verdict"] == "reproduced"
    assert not (runs.parent / "reports").exists()


def test_plot_metrics_sources_and_errors(tmp_path):
    recs = [{"step": i, "loss": 1.0 / (i + 1), "seed": i % 2} for i in range(8)]
    p = plot_metrics(tmp_path, recs, ys="loss", group_by="seed", path="by_seed.png")
    assert p == tmp_path / "by_seed.png" and p.stat().st_size > 1000
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs))
    assert len(read_metrics(f)) == 8
    assert plot_metrics(tmp_path, {"run A": f, "run B": recs}, ys=["loss"]).is_file()
    with pytest.raises(ValueError, match="keys found"):
        plot_metrics(tmp_path, recs, ys=["acc"])
    evals = recs + [{"event": "eval", "step": 3, "loss": 0.3}, {"event": "eval", "step": 7, "loss": "nan"}]
    assert plot_metrics(tmp_path, evals, ys=["loss"], where={"event": "eval"}, path="eval.png").is_file()
    with pytest.raises(ValueError, match="keys found"):
        plot_metrics(tmp_path, evals, ys=["loss"], where={"event": "test"})
    with pytest.raises(ValueError, match="metrics.jsonl"):
        plot_metrics(tmp_path, tmp_path / "nope.jsonl")
    assert not math.isnan(mean_ci([1, 2]).lo)


def test_run_dir_is_absolute_so_joined_plot_paths_stay_inside(tmp_path, monkeypatch):
    from paperzoo.report import new_run_dir, plot_metrics

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAPERZOO_RUNS", "runs")  # a relative root
    run_dir = new_run_dir("demo")
    assert run_dir.is_absolute()
    png = plot_metrics(run_dir, [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}], path=run_dir / "loss.png")
    assert png == run_dir / "loss.png" and png.is_file()


def test_index_marks_smoke_runs_and_a_smoke_run_never_hides_a_real_result(runs):
    real = new_run_dir("a")
    write_config(real, {"preset": "small"})
    write_result(real, "a", "claim of a", {"x": [1.0, 2.0]}, "not reproduced")
    smoke = runs / "a" / "99999999-999999"  # newer, but only a smoke test
    smoke.mkdir()
    write_config(smoke, {"preset": "tiny"})
    write_result(smoke, "a", "claim of a", {"x": [1.0, 2.0]}, "reproduced")
    page = build_index(runs).read_text()
    summary = page.split("<h2>Latest per paper</h2>")[1].split("<h2>All finished runs</h2>")[0]
    assert real.name in summary and smoke.name not in summary and "preset small" in summary
    rows = page.split("<h2>All finished runs</h2>")[1]
    smoke_row = next(r for r in rows.split("<tr>") if smoke.name in r)
    assert "smoke test (preset tiny), not a reproduction" in smoke_row
    real_row = next(r for r in rows.split("<tr>") if real.name in r)
    assert "smoke" not in real_row
