"""Every committed report renders from its result.json, and what is committed is that rendering (numbers included)."""

import json
import shutil
from pathlib import Path

import pytest

from paperzoo.report.result import _figure, render_report

REPORTS = sorted((Path(__file__).parents[2] / "docs" / "reports").glob("*/result.json"))


@pytest.mark.parametrize("result", REPORTS, ids=lambda p: p.parent.name)
def test_committed_report_is_its_rendering(result, tmp_path):
    copy = tmp_path / result.parent.name
    shutil.copytree(result.parent, copy)
    text = render_report(copy).read_text()
    assert text == (result.parent / "report.md").read_text(), \
        f"docs/reports/{result.parent.name}/report.md is stale: re-render it with paperzoo.report.result.render_report"
    doc = json.loads(result.read_text())
    for name, m in doc["measurements"].items():
        assert _figure(name, m) in text  # every measured figure, with its interval, is in the report


def test_a_damaged_result_names_the_remedy(tmp_path):
    (tmp_path / "result.json").write_text("{not json")
    with pytest.raises(ValueError, match="damaged"):
        render_report(tmp_path)
    with pytest.raises(ValueError, match="no result.json"):
        render_report(tmp_path / "missing")
