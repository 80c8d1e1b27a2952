"""`paperzoo data use PATH`: the data folder saved per Python environment, below PAPERZOO_DATA, above the default."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from paperzoo.cli import app
from paperzoo.data import store

runner = CliRunner()


@pytest.fixture
def saved(tmp_path, monkeypatch):
    f = tmp_path / "env" / "etc" / "paperzoo" / "data-root"
    monkeypatch.setattr(store, "saved_root_file", lambda: f)
    monkeypatch.delenv("PAPERZOO_DATA", raising=False)
    return f


def test_saved_folder_is_used_when_the_variable_is_unset_and_the_variable_still_wins(saved, tmp_path, monkeypatch):
    assert store.data_root() == Path.home() / ".cache" / "paperzoo"
    folder = tmp_path / "sets"
    folder.mkdir()
    result = runner.invoke(app, ["data", "use", str(folder)])
    assert result.exit_code == 0, result.output
    assert saved.read_text().strip() == str(folder.resolve())
    assert store.data_root() == folder.resolve() and "paperzoo data use" in store.data_root_source()
    assert str(folder.resolve()) in runner.invoke(app, ["data", "use"]).output
    monkeypatch.setenv("PAPERZOO_DATA", str(tmp_path / "other"))
    assert store.data_root() == tmp_path / "other" and store.data_root_source() == "PAPERZOO_DATA"
    monkeypatch.delenv("PAPERZOO_DATA")
    assert runner.invoke(app, ["data", "use", "--forget"]).exit_code == 0
    assert not saved.exists() and store.data_root() == Path.home() / ".cache" / "paperzoo"


def test_a_missing_folder_is_refused_in_one_line(saved, tmp_path):
    result = runner.invoke(app, ["data", "use", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output and "Traceback" not in result.output
    assert not saved.exists()


def test_not_found_message_says_where_the_root_came_from(saved, tmp_path):
    (tmp_path / "sets").mkdir()
    store.save_root(tmp_path / "sets")
    msg = store.not_found_message("mnist")
    assert str(tmp_path / "sets") in msg and "paperzoo data use" in msg
