"""Readers verify what they read: a damaged file fails with its name, both digests and the remedy, once hashed the
verdict is remembered (per path, size, mtime), and the CLI turns data errors into one red line."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from paperzoo import data
from paperzoo.cli import app
from paperzoo.data import store
from paperzoo.data.catalog import FileInfo

REPO = Path(__file__).resolve().parents[2]
FASHION = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
           "t10k-labels-idx1-ubyte.gz")


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_a_wrong_text_file_fails_naming_file_digests_and_remedy(tmp_path):
    (tmp_path / "tinyshakespeare").mkdir()
    path = tmp_path / "tinyshakespeare" / "input.txt"
    body = b"First Citizen:\nBefore we proceed any further, hear me speak.\n" * 700
    path.write_bytes(body)
    with pytest.raises(data.DataIntegrityError) as e:
        data.load_tinyshakespeare("train", root=tmp_path)
    msg = str(e.value)
    assert str(path) in msg and _sha(body) in msg
    assert data.DATASETS["tinyshakespeare"].files["input.txt"].sha256 in msg
    assert "paperzoo data fetch tinyshakespeare" in msg and e.value.name == "tinyshakespeare"


@pytest.mark.data("tinyshakespeare")
def test_the_truncated_real_file_is_refused_not_split(shared, tmp_path):
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare" / "input.txt").write_bytes((shared / "tinyshakespeare" / "input.txt").read_bytes()
                                                             [:50000])  # head -c 50000 input.txt
    with pytest.raises(data.DataIntegrityError, match="50000 bytes.*paperzoo data fetch tinyshakespeare"):
        data.load_tinyshakespeare("val", root=tmp_path)


def _fashion_root(root: Path, damage: str) -> Path:
    d = root / "fashion-mnist"
    d.mkdir(parents=True)
    for rel in FASHION:
        whole = gzip.compress(bytes(range(256)) * 64)
        (d / rel).write_bytes(whole[: len(whole) // 3] if damage == "truncated" else b"not gzip at all " * 64)
    return d


@pytest.mark.parametrize("damage", ["truncated", "not-gzip"])  # EOFError ("Aborted!") and BadGzipFile (traceback)
def test_cli_reproduce_on_damaged_data_prints_one_red_line(tmp_path, monkeypatch, damage):
    d = _fashion_root(tmp_path / "data", damage)
    monkeypatch.setenv("PAPERZOO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    res = CliRunner().invoke(app, ["reproduce", "fashion-cnn", "--out", str(tmp_path / "run")])
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 2, res.output
    assert "Aborted" not in res.output and "Traceback" not in res.output
    assert len(lines) == 1 and lines[0].startswith("error: data file "), res.output
    assert str(d / "train-images-idx3-ubyte.gz") in lines[0] and "paperzoo data fetch fashion-mnist" in lines[0]


@pytest.mark.parametrize("exc", [EOFError("Compressed file ended before the end-of-stream marker was reached"),
                                 gzip.BadGzipFile("Not a gzipped file (b'no')")])
def test_cli_turns_an_unverified_damaged_read_into_one_line(monkeypatch, exc):
    from paperzoo import registry

    def run(**kw):
        raise exc

    monkeypatch.setattr(registry, "resolve", lambda target: run)
    res = CliRunner().invoke(app, ["reproduce", "fashion-cnn"])
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 2 and "Aborted" not in res.output, res.output
    assert len(lines) == 1 and "damaged or truncated" in lines[0] and "paperzoo data verify" in lines[0]


def test_long_errors_stay_on_one_line_and_keep_brackets(monkeypatch):
    from paperzoo import registry

    def run(**kw):
        raise ValueError("x" * 300 + " [not markup] [/red] end")

    monkeypatch.setattr(registry, "resolve", lambda target: run)
    res = CliRunner().invoke(app, ["reproduce", "fashion-cnn"])
    assert res.output.count("\n") == 1 and "[not markup] [/red] end" in res.output, res.output


def _counting(monkeypatch) -> list:
    calls = []
    real = store.sha256_file

    def counted(path):
        calls.append(Path(path))
        return real(path)

    monkeypatch.setattr(store, "sha256_file", counted)
    return calls


def test_a_verdict_is_remembered_and_any_change_invalidates_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls = _counting(monkeypatch)
    path = tmp_path / "f.txt"
    path.write_bytes(b"hello world\n")
    info = FileInfo(sha256=_sha(b"hello world\n"), url=None)
    assert store.check_file(path, info, cached=True)[0] and len(calls) == 1
    assert store.check_file(path, info, cached=True)[0] and len(calls) == 2  # changed just now: not remembered yet
    time.sleep(store.RACY_S * 1.5)
    assert store.check_file(path, info, cached=True)[0] and len(calls) == 3
    assert store.check_file(path, info, cached=True) == (True, "ok (verified before)") and len(calls) == 3
    entries = list((tmp_path / "xdg" / "paperzoo" / "verified").iterdir())
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o044 == 0o044  # readable, not mkstemp's 0600
    assert json.loads(entries[0].read_text())["sha256"] == info.sha256
    st = path.stat()
    path.write_bytes(b"hello World\n")  # same size: the mtime/ctime change is what tells
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # even with the old mtime put back (ctime still moves)
    assert store.check_file(path, info, cached=True)[0] is False and len(calls) == 4
    assert store.check_file(path, info, cached=True)[0] is False and len(calls) == 5  # bad verdicts are not kept
    assert store.check_file(path, FileInfo(sha256=_sha(b"hello World\n"), url=None), cached=True)[0]
    assert not store.check_file(path, info, cached=False)[0]  # an explicit check always hashes
    assert len(calls) == 7


def test_an_unwritable_cache_only_costs_the_rehash(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    calls = _counting(monkeypatch)
    path = tmp_path / "f.txt"
    path.write_bytes(b"abc")
    time.sleep(store.RACY_S * 1.5)
    info = FileInfo(sha256=_sha(b"abc"), url=None)
    assert store.check_file(path, info, cached=True)[0] and store.check_file(path, info, cached=True)[0]
    assert len(calls) == 2


def test_user_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert data.user_cache_dir() == tmp_path / "paperzoo"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored, as the XDG spec says
    assert data.user_cache_dir() == Path.home() / ".cache" / "paperzoo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert data.user_cache_dir() == Path.home() / ".cache" / "paperzoo"


def test_concurrent_checks_write_one_whole_entry(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(1 << 20))
    time.sleep(store.RACY_S * 1.5)
    info = FileInfo(sha256=store.sha256_file(path), url=None)
    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(lambda _: store.check_file(path, info, cached=True)[0], range(32)))
    entries = list((tmp_path / "xdg" / "paperzoo" / "verified").iterdir())
    assert len(entries) == 1 and json.loads(entries[0].read_text())["sha256"] == info.sha256


@pytest.mark.slow
def test_concurrent_processes_share_the_cache_safely(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(os.urandom(1 << 20))
    code = ("import sys; from pathlib import Path; from paperzoo.data import store; from paperzoo.data.catalog "
            "import FileInfo; info = FileInfo(sha256=sys.argv[2], url=None); "
            "print(all(store.check_file(Path(sys.argv[1]), info, cached=True)[0] for _ in range(20)))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(REPO / "src"),
           "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), store.sha256_file(path)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outs == ["True"] * 3 and all(p.returncode == 0 for p in procs)
    entries = list((tmp_path / "xdg" / "paperzoo" / "verified").iterdir())
    assert [e.suffix for e in entries] == [".json"]  # one entry, no temp file left behind
    assert json.loads(entries[0].read_text())["path"] == os.path.realpath(path)


@pytest.mark.data("sms-spam", "fashion-mnist")
def test_readers_hash_each_file_once(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    calls = _counting(monkeypatch)
    data.load_sms_spam()
    data.load_sms_spam("test")
    assert calls == [shared / "sms-spam" / "SMSSpamCollection"]
    data.load_fashion_mnist("test")  # hashes only the two files it reads
    assert sorted(p.name for p in calls[1:]) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


@pytest.mark.data("sms-spam")
def test_a_copy_damaged_later_is_caught_and_fetch_repairs_it(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "sms-spam").mkdir()
    copy = tmp_path / "sms-spam" / "SMSSpamCollection"
    shutil.copyfile(shared / "sms-spam" / "SMSSpamCollection", copy)
    assert len(data.load_sms_spam(root=tmp_path)) == 5574
    with open(copy, "r+b") as f:  # one flipped byte in the middle
        f.seek(1000)
        b = f.read(1)
        f.seek(1000)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(data.DataIntegrityError, match="SMSSpamCollection.*paperzoo data fetch sms-spam"):
        data.load_sms_spam(root=tmp_path)
    data.fetch("sms-spam", root=tmp_path, base_url=str(shared), progress=False)
    assert len(data.load_sms_spam(root=tmp_path)) == 5574
