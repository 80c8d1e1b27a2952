"""The registry, the README's paper table and the command line."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from paperzoo import __version__, registry
from paperzoo.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_readme_paper_table_is_the_registry_table():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- papers:start -->\n(.*?)\n?<!-- papers:end -->", readme, re.S)
    assert block, "README lacks the papers block"
    assert block.group(1).strip() == registry.markdown_table().strip(), (
        "README paper table is stale: regenerate it with `paperzoo list --markdown`")


def test_every_paper_is_well_formed():
    names = [p.name for p in registry.papers()]
    assert len(names) == len(set(names))
    for p in registry.papers():
        assert re.fullmatch(r"\d{4}\.\d{4,5}", p.arxiv), p
        for target in list(p.recipes.values()) + list(p.benches.values()):
            assert callable(registry.resolve(target)), target


def test_unknown_paper_lists_valid_names():
    with pytest.raises(KeyError, match="valid names: .*electra"):
        registry.get("no-such-paper")


def test_bad_status_is_refused():
    with pytest.raises(ValueError, match="status"):
        registry.Paper("x", "t", "0000.00000", 2020, status="done")


def test_cli_list_json_has_every_field():
    result = runner.invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["name"] for r in rows} == {p.name for p in registry.papers()}
    for key in ("name", "title", "arxiv", "year", "models", "recipes", "status"):
        assert all(key in r for r in rows)


def test_cli_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


def test_cli_unknown_recipe_lists_valid_ones():
    result = runner.invoke(app, ["reproduce", "no-such-recipe"])
    assert result.exit_code == 2
    assert "unknown recipe 'no-such-recipe'" in result.output and "valid names" in result.output


def test_cli_resume_needs_out():
    result = runner.invoke(app, ["reproduce", "fashion-cnn", "--resume"])
    assert result.exit_code == 2 and "--out" in result.output


def test_every_recipe_has_the_skeleton_signature():
    import inspect

    want = ["preset", "seeds", "out", "resume", "progress", "workers", "precision"]
    for p in registry.papers():
        for name, target in p.recipes.items():
            params = inspect.signature(registry.resolve(target)).parameters
            assert list(params) == want, (name, list(params))
            assert all(params[k].default is not inspect.Parameter.empty for k in want), name


def test_cli_list_fits_80_columns():
    result = runner.invoke(app, ["list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    for p in registry.papers():  # every name on one line, unbroken
        assert any(re.search(rf"\b{re.escape(p.name)}\b", line) for line in lines), p.name


def test_cli_list_wide_and_show():
    wide = runner.invoke(app, ["list", "--wide"], env={"COLUMNS": "200"})
    assert wide.exit_code == 0 and "2003.10555" in wide.output
    one = runner.invoke(app, ["show", "electra"], env={"COLUMNS": "200"})
    assert one.exit_code == 0 and "paperzoo reproduce electra" in one.output and "arXiv 2003.10555" in one.output
    bad = runner.invoke(app, ["show", "nope"])
    assert bad.exit_code == 2 and "valid names" in bad.output


def test_status_is_checked_exactly_when_a_report_is_committed_and_verdicts_come_from_it():
    """A paper's status says what its code is; 'checked' needs a committed report, and the verdict shown beside
    the status is that report's own (never a status word a reader could take for 'the claim holds')."""
    for p in registry.papers():
        found = registry.verdicts(p)
        assert (p.status == "checked") == bool(found), (p.name, p.status, sorted(found))
        for recipe, v in found.items():
            result = json.loads((ROOT / "docs" / "reports" / recipe / "result.json").read_text())
            assert v.verdict == result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
            assert v.label() in registry.verdict_label(p)
    assert "reproduced" not in registry.STATUSES and "verified" not in registry.STATUSES


def test_verdict_of_a_damaged_committed_report_names_it_and_the_remedy(tmp_path):
    p = registry.get("switch")
    (tmp_path / "switch").mkdir()
    (tmp_path / "switch" / "result.json").write_text('{"verdict": ')
    with pytest.raises(ValueError, match=r"switch.*damaged.*paperzoo reproduce switch"):
        registry.verdicts(p, tmp_path)
    assert registry.verdict_label(registry.get("switch"), tmp_path / "none") == "-"


def _report(folder, verdict, preset):
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"verdict": verdict}))
    (folder / "config.json").write_text(json.dumps({"config": {"preset": preset}}))


def test_a_report_of_another_budget_sits_in_a_preset_folder_beside_the_main_one(tmp_path):
    """A longer run's report (``<recipe>/<preset>/``) is listed beside the recipe's main report, each labelled by
    its budget; one filed under another preset's name is refused with the folder it belongs in."""
    p = registry.get("perceiver")
    _report(tmp_path / "perceiver", "not reproduced", "small")
    _report(tmp_path / "perceiver" / "fsdd-long", "reproduced", "fsdd-long")
    found = registry.verdicts(p, tmp_path)
    assert sorted(found) == ["perceiver", "perceiver/fsdd-long"]
    assert {k: (v.recipe, v.verdict, v.preset) for k, v in found.items()} == {
        "perceiver": ("perceiver", "not reproduced", "small"),
        "perceiver/fsdd-long": ("perceiver", "reproduced", "fsdd-long")}
    assert registry.verdict_label(p, tmp_path) == "not reproduced (small); reproduced (fsdd-long)"
    _report(tmp_path / "perceiver" / "long", "reproduced", "fsdd-long")
    with pytest.raises(ValueError, match=r"preset 'fsdd-long'.*perceiver/fsdd-long"):
        registry.verdicts(p, tmp_path)


def test_cli_list_and_show_give_the_verdict_beside_the_status():
    listed = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "verdict" in listed.output
    line = next(ln for ln in listed.output.splitlines() if re.search(r"\bswin\b", ln))
    assert "checked" in line and "not reproduced (small)" in line
    one = runner.invoke(app, ["show", "swin"], env={"COLUMNS": "200"})
    assert "verdict: not reproduced (small)" in one.output and "docs/reports/swin/report.md" in one.output


def test_reproduce_help_lists_every_recipe_with_its_presets_and_flags_without_types():
    result = runner.invoke(app, ["reproduce", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "<bool>" not in result.output and re.search(r"--resume\s+Continue", result.output)
    for p in registry.papers():
        for r in p.recipes:
            line = next(ln for ln in result.output.splitlines() if re.match(rf"\s+{re.escape(r)}\s", ln))
            assert set(registry.recipe_presets(r)) == set(re.split(r"\s*\|\s*", line.split(None, 1)[1].strip()))
    assert "tiny is a smoke test, not a reproduction" in result.output
    with pytest.raises(KeyError, match="valid names"):
        registry.recipe_presets("nope")
