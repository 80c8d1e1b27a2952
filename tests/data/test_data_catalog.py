"""The catalog matches the shared folder, `verify` passes on it, and the CLI's data commands work."""

from __future__ import annotations

import gzip
import re

import pytest
from typer.testing import CliRunner

from paperzoo import data
from paperzoo.cli import app
from paperzoo.data.store import check_file

SMALL = ("sms-spam", "sst2", "agnews-partial", "youtube-spam", "wikitext-2-partial", "tinyshakespeare",
         "nlpdatasets-senteval", "tiny-nerf", "nerf-synthetic-lego-200")
ALL = tuple(data.DATASETS)


@pytest.mark.data(*ALL)
def test_catalog_names_match_shared_folders(shared):
    folders = {p.name for p in shared.iterdir() if p.is_dir()}
    assert set(data.DATASETS) <= folders
    assert folders - set(data.DATASETS) <= {"derived", "verified", "downloads"}  # the user cache may share the root


@pytest.mark.data(*ALL)
def test_catalog_files_match_sha256sums(shared):
    if not (shared / "SHA256SUMS").is_file():
        pytest.skip(f"{shared} is not the reference folder (no SHA256SUMS)")
    listed = {}
    for line in (shared / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split(maxsplit=1)
        listed[path.strip().removeprefix("./")] = digest
    ours = {f"{n}/{rel}": f.sha256 for n, info in data.DATASETS.items() for rel, f in info.files.items()}
    assert ours == listed


def test_catalog_entries_are_complete():
    for name, info in data.DATASETS.items():
        assert info.name == name and info.description and info.license and info.homepage.startswith("https://")
        for rel, f in info.files.items():
            assert re.fullmatch(r"[0-9a-f]{64}", f.sha256), rel
            assert f.url is None or f.url.startswith("https://raw.githubusercontent.com/"), f.url
            if f.url is None and f.required:
                assert f.note, f"{name}/{rel}: a file without public source must say where it came from"
    assert all(info.fetchable for info in data.DATASETS.values())  # every set from its public source
    assert data.DATASETS["cifar10-jpeg"].build.archive == "cifar-10-python.tar.gz"
    assert data.DATASETS["sst2"].build is None
    assert data.DATASETS["mnist"].files["train-images-idx3-ubyte.gz"].gunzip_sha256
    for name, info in data.DATASETS.items():
        for rel, f in info.files.items():
            if f.url is None and f.required:
                assert info.build is not None and rel in info.build.files, f"{name}/{rel} has no source"
    for a in data.ARCHIVES.values():
        assert a.url.startswith("https://") and a.source
        assert (a.sha256 is None) == (a.size is None) and (a.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", a.sha256))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.data(n)) for n in SMALL])
def test_verify_small_sets(shared, name):
    results = data.verify(name)
    assert results and all(ok for _, ok, _ in results), results
    assert data.is_present(name)


@pytest.mark.slow
@pytest.mark.data(*ALL)
def test_verify_every_set(shared):
    for name in data.DATASETS:
        results = data.verify(name)
        assert all(ok for _, ok, _ in results), (name, [r for r in results if not r[1]])


@pytest.mark.data("mnist")
def test_verify_accepts_regzipped_content_and_rejects_changes(shared, tmp_path):
    info = data.DATASETS["mnist"].files["t10k-labels-idx1-ubyte.gz"]
    raw = gzip.decompress((shared / "mnist" / "t10k-labels-idx1-ubyte.gz").read_bytes())
    same = tmp_path / "same.gz"
    same.write_bytes(gzip.compress(raw, compresslevel=1, mtime=1))
    ok, why = check_file(same, info)
    assert ok and "decompressed" in why
    changed = tmp_path / "changed.gz"
    changed.write_bytes(gzip.compress(raw[:-1] + bytes([(raw[-1] + 1) % 256]), mtime=1))
    assert check_file(changed, info)[0] is False
    assert check_file(tmp_path / "absent.gz", info) == (False, "missing")


def test_verify_reports_missing_and_bad_files(tmp_path):
    (tmp_path / "sms-spam").mkdir()
    (tmp_path / "sms-spam" / "SMSSpamCollection").write_text("ham\thello\n")
    (rel, ok, why), = data.verify("sms-spam", root=tmp_path)
    assert rel == "SMSSpamCollection" and not ok and "mismatch" in why
    assert data.is_present("sms-spam", root=tmp_path)  # present (exists) but fails verification
    sst2 = {rel: (ok, why) for rel, ok, why in data.verify("sst2", root=tmp_path)}
    assert sst2["alps_train.tsv"] == (False, "missing")
    assert sst2["alps_data_README.md"] == (True, "missing (optional)")
    assert not data.is_present("sst2", root=tmp_path)


@pytest.mark.data("sst2")
def test_cli_data_list_and_verify(shared):
    runner = CliRunner()
    res = runner.invoke(app, ["data", "list"])
    assert res.exit_code == 0, res.output
    assert "tinyshakespeare" in res.output and str(shared)[:20] in res.output
    res = runner.invoke(app, ["data", "verify", "sst2"])
    assert res.exit_code == 0, res.output
    assert "verified 1 data set" in res.output and "FAIL" not in res.output
    res = runner.invoke(app, ["data", "verify", "no-such-set"])
    assert res.exit_code != 0 and "valid names" in res.output


def test_cli_verify_fails_on_bad_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERZOO_DATA", str(tmp_path))
    (tmp_path / "sms-spam").mkdir()
    (tmp_path / "sms-spam" / "SMSSpamCollection").write_text("ham\thello\n")
    res = CliRunner().invoke(app, ["data", "verify"])
    assert res.exit_code != 0 and "FAIL" in res.output and "1 file(s) failed" in res.output


@pytest.mark.slow
@pytest.mark.data(*ALL)
def test_cli_data_verify_all(shared):
    res = CliRunner().invoke(app, ["data", "verify"])
    assert res.exit_code == 0, res.output
    assert f"verified {len(data.DATASETS)} data set(s)" in res.output
