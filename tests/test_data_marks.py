"""The data marks (tests/data_plugin.py): without a set its tests skip with one summary line, under CI they fail,
with the set they run, and a test that reads a set without saying so is caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

TESTS = '''
import pytest
from paperzoo import data


@pytest.mark.data("mnist", "fsdd")
def test_needs_two_sets():
    pass


@pytest.mark.data("sms-spam")
def test_needs_sms():
    assert data.is_present("sms-spam")


def test_plain():
    pass
'''


@pytest.fixture
def run(pytester, monkeypatch):
    pytester.makeconftest("from data_plugin import *  # noqa: F401,F403\n")
    pytester.makepyfile(test_inner=TESTS)
    for var in ("CI", "PAPERZOO_REQUIRE_DATA"):
        monkeypatch.delenv(var, raising=False)

    def go(root: Path, **env: str):
        monkeypatch.setenv("PAPERZOO_DATA", str(root))
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
                                           "-p", "no:playwright")  # its per-test soft-assertion scope cannot nest

    return go


def _summary(res) -> list[str]:
    return [line for line in res.outlines if line.startswith("data: ")]


def test_missing_sets_skip_with_one_summary_line(run, tmp_path):
    res = run(tmp_path / "empty")
    res.assert_outcomes(passed=1, skipped=2)
    line, = _summary(res)
    assert "2 test(s) skipped" in line and str(tmp_path / "empty") in line
    assert "fsdd, mnist, sms-spam" in line and "paperzoo data fetch NAME" in line


@pytest.mark.parametrize("env", [{"CI": "true"}, {"PAPERZOO_REQUIRE_DATA": "1"}])
def test_under_ci_missing_sets_fail(run, tmp_path, env):
    res = run(tmp_path / "empty", **env)
    res.assert_outcomes(passed=1, errors=2)
    assert not _summary(res)
    res.stdout.fnmatch_lines(["*data set(s) mnist, fsdd not under*CI/PAPERZOO_REQUIRE_DATA*"])


def test_ci_false_is_not_ci(run, tmp_path):
    run(tmp_path / "empty", CI="false").assert_outcomes(passed=1, skipped=2)


def test_present_sets_run(run, tmp_path):
    (tmp_path / "root" / "sms-spam").mkdir(parents=True)
    (tmp_path / "root" / "sms-spam" / "SMSSpamCollection").write_text("ham\thi\n")
    res = run(tmp_path / "root", CI="1")
    res.assert_outcomes(passed=2, errors=1)  # sms-spam is there; mnist and fsdd are not


def test_an_unmarked_reader_of_a_missing_set_is_skipped_and_counted(run, pytester, tmp_path):
    pytester.makepyfile(test_more='''
from paperzoo import data

def test_reads_imdb():
    data.load_imdb()
''')
    res = run(tmp_path / "empty")
    res.assert_outcomes(passed=1, skipped=3)
    line, = _summary(res)
    assert "1 unmarked" in line and "imdb" in line
    run(tmp_path / "empty", CI="1").assert_outcomes(passed=1, failed=1, errors=2)


@pytest.mark.data("sms-spam")
def test_an_unmarked_reader_of_a_present_set_fails(run, pytester, tmp_path):
    from paperzoo import data

    root = tmp_path / "root"
    (root / "sms-spam").mkdir(parents=True)
    shutil.copyfile(data.data_root() / "sms-spam" / "SMSSpamCollection", root / "sms-spam" / "SMSSpamCollection")
    pytester.makepyfile(test_more='''
from paperzoo import data

def test_reads_sms():
    assert len(data.load_sms_spam()) == 5574

def test_own_folder_is_not_the_data_root(tmp_path):
    import pytest
    with pytest.raises(data.DataNotFoundError):
        data.load_sms_spam(root=tmp_path)
''')
    res = run(root)
    res.assert_outcomes(passed=3, failed=1, skipped=1)
    res.stdout.fnmatch_lines(["*reads data set(s) sms-spam from*without saying so*@pytest.mark.data('sms-spam')*"])


def test_unknown_set_names_are_refused(run, pytester, tmp_path):
    pytester.makepyfile(test_more='''
import pytest

@pytest.mark.data("imagenet")
def test_x():
    pass
''')
    res = run(tmp_path / "empty")
    assert "unknown data set(s) ['imagenet']" in res.stdout.str()


def test_the_data_root_defaults_to_the_shared_folder_beside_the_checkout(monkeypatch):
    import data_plugin

    monkeypatch.delenv("PAPERZOO_DATA", raising=False)
    sibling = data_plugin.REPO.parent / "shared" / "data"
    expected = sibling.resolve() if sibling.is_dir() else Path.home() / ".cache" / "paperzoo"
    assert data_plugin.data_root() == expected
    monkeypatch.setenv("PAPERZOO_DATA", "relative/dir")
    assert data_plugin.data_root() == Path.cwd() / "relative" / "dir"
