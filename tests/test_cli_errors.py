"""Ordinary mistakes on the command line are one-line errors in the CLI's words; a start that fails before any job
leaves no run folder behind.

``reproduce`` runs ``tests/fake_recipe.py`` (registered for the test only) in this process.
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from paperzoo import registry
from paperzoo.cli import app
from paperzoo.context import ENV

HERE = Path(__file__).resolve().parent
runner = CliRunner()


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """The fake recipe registered as ``fake``, runs under ``tmp_path/runs``; yields a helper that invokes the CLI."""
    monkeypatch.syspath_prepend(str(HERE))
    registry.papers()  # load the real ones first, so the fake is only added
    monkeypatch.setitem(registry._PAPERS, "fake-paper", registry.Paper(
        "fake-paper", "A fake paper for tests", "0000.00000", 2020, status="implemented",
        recipes={"fake": "fake_recipe:run"}))
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("FAKE_STEPS", "3")
    monkeypatch.delenv(ENV, raising=False)
    return lambda *args: runner.invoke(app, ["reproduce", "fake", *args], env={"COLUMNS": "80"})


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("event=")]
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and lines and lines[-1].startswith("error: "), result.output
    assert not any(line.startswith("error: ") for line in lines[:-1]), result.output
    return lines[-1]


def test_out_pointing_at_a_file_is_one_line(fake, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    line = _one_error_line(fake("--out", str(f)))
    assert "is an existing file, not a folder" in line and f.read_text() == "mine"


def test_failed_start_leaves_no_run_folder_it_made(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_MISSING_DATA", "1")
    assert "fake data set not found" in _one_error_line(fake())  # default folder runs/fake-paper/<stamp>
    assert not list((tmp_path / "runs" / "fake-paper").iterdir())
    new = tmp_path / "new" / "run"
    _one_error_line(fake("--out", str(new)))
    assert not new.exists()
    mine = tmp_path / "mine"  # a folder the user made: kept, whatever it holds
    mine.mkdir()
    _one_error_line(fake("--out", str(mine)))
    assert mine.is_dir() and (mine / "config.json").is_file()


def test_cli_messages_name_cli_flags_not_the_api(fake, tmp_path):
    out = tmp_path / "run"
    ok = fake("--out", str(out), "--seeds", "1")
    assert ok.exit_code == 0, ok.output
    (out / "a" / "seed-0" / "job.json").unlink()  # unfinished: its checkpoints remain
    line = _one_error_line(fake("--out", str(out), "--seeds", "1"))
    assert "already holds checkpoints; pass --resume to continue, or give a new --out" in line
    assert "fit(resume=True)" not in line
    assert ENV not in __import__("os").environ  # the CLI's context ends with the command


def test_all_checkpoints_corrupt_on_resume_is_one_line(fake, tmp_path):
    out = tmp_path / "run"
    assert fake("--out", str(out), "--seeds", "1").exit_code == 0
    job = out / "a" / "seed-0"
    (job / "job.json").unlink()
    for ckpt in job.glob("ckpt-*.pt"):
        ckpt.write_bytes(b"not a checkpoint")
    line = _one_error_line(fake("--out", str(out), "--seeds", "1", "--resume"))
    assert f"no loadable checkpoint in {job}" in line and "delete these files" in line


def _saved_model(tmp_path: Path, edit=None) -> Path:
    from paperzoo.papers.mobilenetv2.deploy import save_pretrained
    from paperzoo.papers.mobilenetv2.model import MobileNetV2Config, MobileNetV2ForImageClassification

    d = save_pretrained(MobileNetV2ForImageClassification(MobileNetV2Config.preset("tiny")), tmp_path / "model")
    if edit is not None:
        cfg = json.loads((d / "config.json").read_text())
        edit(cfg)
        (d / "config.json").write_text(json.dumps(cfg))
    return d


def test_export_mistakes_are_one_line(tmp_path):
    d = _saved_model(tmp_path)
    out = ["--out", str(tmp_path / "export")]
    result = runner.invoke(app, ["export", str(d), "--image-size", "-5", *out])
    assert "--image-size must be an int >= 8 (pixels), got -5" in _one_error_line(result)
    result = runner.invoke(app, ["export", str(d), "--format", "tflite", *out])
    assert "--format must be 'onnx', 'torchscript' or 'int8'" in _one_error_line(result)
    result = runner.invoke(app, ["export", str(_saved_model(tmp_path, lambda c: c.update(bogus=1))), *out])
    assert "unknown key(s) bogus (valid: " in _one_error_line(result)
    result = runner.invoke(app, ["export", str(_saved_model(tmp_path, lambda c: c.pop("blocks"))), *out])
    assert "missing key(s) blocks" in _one_error_line(result)
    result = runner.invoke(app, ["export", str(_saved_model(tmp_path, lambda c: c.update(num_classes=7))), *out])
    assert "does not fit the model" in _one_error_line(result)
