"""The downloader against a local HTTP server: good, corrupted, interrupted, re-gzipped, unreachable."""

from __future__ import annotations

import contextlib
import gzip
import socket

import pytest

from paperzoo import data
from paperzoo.data import download as dl
from paperzoo.data.download import DownloadError, _GunzipHasher


def _leftovers(folder):
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".part"))


@pytest.mark.data("sst2")
def test_fetch_good(mirror, tmp_path):
    out = data.fetch("sst2", root=tmp_path, base_url=f"{mirror}/good", progress=False)
    assert out == tmp_path / "sst2"
    assert all(ok for _, ok, _ in data.verify("sst2", root=tmp_path))
    assert data.is_present("sst2", root=tmp_path) and not _leftovers(tmp_path)
    assert len(data.load_sst2("test", root=tmp_path)) == 872


@pytest.mark.data("sms-spam")
def test_fetch_good_with_progress_bar(mirror, tmp_path, capsys):
    data.fetch("sms-spam", root=tmp_path, base_url=f"{mirror}/good", progress=True)
    assert all(ok for _, ok, _ in data.verify("sms-spam", root=tmp_path))


@pytest.mark.data("sms-spam")
def test_fetch_corrupt_keeps_nothing(mirror, tmp_path):
    with pytest.raises(DownloadError, match="checksum mismatch.*nothing was kept"):
        data.fetch("sms-spam", root=tmp_path, base_url=f"{mirror}/corrupt", progress=False)
    assert not (tmp_path / "sms-spam" / "SMSSpamCollection").exists()
    assert not _leftovers(tmp_path)
    assert not data.is_present("sms-spam", root=tmp_path)


@pytest.mark.data("tinyshakespeare")
@pytest.mark.parametrize("mode", ["truncate", "truncate-nolength"])
def test_fetch_interrupted_keeps_nothing(mirror, tmp_path, mode):
    with pytest.raises(DownloadError, match="incomplete|checksum mismatch|failed"):
        data.fetch("tinyshakespeare", root=tmp_path, base_url=f"{mirror}/{mode}", progress=False)
    assert not (tmp_path / "tinyshakespeare" / "input.txt").exists()
    assert not _leftovers(tmp_path)


@pytest.mark.data("tinyshakespeare")
def test_bad_download_never_replaces_existing_file(mirror, tmp_path):
    dest = tmp_path / "input.txt"
    dest.write_text("previous content")
    info = data.DATASETS["tinyshakespeare"].files["input.txt"]
    with pytest.raises(DownloadError):
        dl.download_file(f"{mirror}/corrupt/tinyshakespeare/input.txt", dest, info.sha256, progress=False)
    assert dest.read_text() == "previous content" and not _leftovers(tmp_path)


@pytest.mark.data("youtube-spam")
def test_fetch_repairs_a_bad_file_and_keeps_good_ones(mirror, tmp_path, shared):
    d = tmp_path / "youtube-spam"
    d.mkdir()
    good = d / "Youtube01-Psy.csv"
    good.write_bytes((shared / "youtube-spam" / "Youtube01-Psy.csv").read_bytes())
    mtime = good.stat().st_mtime_ns
    (d / "Youtube02-KatyPerry.csv").write_text("broken")
    data.fetch("youtube-spam", root=tmp_path, base_url=f"{mirror}/good", progress=False)
    assert all(ok for _, ok, _ in data.verify("youtube-spam", root=tmp_path))
    assert good.stat().st_mtime_ns == mtime  # a verified file is not downloaded again


@pytest.mark.data("tinyshakespeare")
def test_interrupt_by_ctrl_c_removes_temp(mirror, tmp_path, monkeypatch):
    @contextlib.contextmanager
    def interrupting(enabled, label, total):
        def advance(n):
            raise KeyboardInterrupt

        yield advance

    monkeypatch.setattr(dl, "_progress", interrupting)
    info = data.DATASETS["tinyshakespeare"].files["input.txt"]
    with pytest.raises(KeyboardInterrupt):
        dl.download_file(f"{mirror}/good/tinyshakespeare/input.txt", tmp_path / "input.txt", info.sha256)
    assert not list(tmp_path.iterdir())


@pytest.mark.data("mnist")
def test_regzipped_file_accepted_by_content(mirror, tmp_path):
    info = data.DATASETS["mnist"].files["t10k-labels-idx1-ubyte.gz"]
    url = f"{mirror}/regzip/mnist/t10k-labels-idx1-ubyte.gz"
    dest = dl.download_file(url, tmp_path / "t10k-labels-idx1-ubyte.gz", info.sha256, info.gunzip_sha256,
                            progress=False)
    assert data.sha256_file(dest) != info.sha256  # other gzip wrapper ...
    assert data.read_idx(dest, ndim=1).shape == (10000,)  # ... same content
    with pytest.raises(DownloadError, match="checksum mismatch"):  # without the content digest: refused
        dl.download_file(url, tmp_path / "x.gz", info.sha256, None, progress=False)


@pytest.mark.data("tinyshakespeare")
def test_fetch_with_per_file_urls(mirror, tmp_path):
    urls = {"input.txt": f"{mirror}/good/tinyshakespeare/input.txt"}
    data.fetch("tinyshakespeare", root=tmp_path, urls=urls, progress=False)
    assert len(data.load_tinyshakespeare("all", root=tmp_path)) == 1115394


@pytest.mark.data("tiny-nerf")
def test_unreachable_original_fails_clearly_but_mirrors_work(mirror, tmp_path):
    with pytest.raises(DownloadError, match="download of https://drive.usercontent.google.com/.*failed"):
        data.fetch("tiny-nerf", root=tmp_path, progress=False)  # the public original: no network in tests
    assert not (tmp_path / "tiny-nerf").exists() or not list((tmp_path / "tiny-nerf").iterdir())
    data.fetch("tiny-nerf", root=tmp_path, base_url=f"{mirror}/good", progress=False)
    assert data.load_tiny_nerf(root=tmp_path).images.shape == (100, 100, 100, 3)


@pytest.mark.data("wikitext-2-partial")
def test_mirror_from_environment(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERZOO_MIRROR", f"{mirror}/good")
    assert data.fetch("wikitext-2-partial", root=tmp_path, progress=False) == tmp_path / "wikitext-2-partial"
    assert all(ok for _, ok, _ in data.verify("wikitext-2-partial", root=tmp_path))


def test_unreachable_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DownloadError, match="failed"):
        data.fetch("sms-spam", root=tmp_path, base_url=f"http://127.0.0.1:{port}", progress=False, timeout=5)
    assert not _leftovers(tmp_path)


@pytest.mark.data("sms-spam")
def test_missing_file_on_server_is_an_error(mirror, tmp_path):
    with pytest.raises(DownloadError, match="404"):
        data.fetch("sms-spam", root=tmp_path, base_url=f"{mirror}/nope", progress=False)


@pytest.mark.data("sms-spam")
def test_require_with_download(mirror, tmp_path, monkeypatch):
    real_fetch = dl.fetch
    monkeypatch.setattr(dl, "fetch", lambda name, root=None: real_fetch(name, root, False, f"{mirror}/good"))
    assert data.require("sms-spam", download=True, root=tmp_path) == tmp_path / "sms-spam"
    (tmp_path / "sms-spam" / "SMSSpamCollection").write_text("ham\tdamaged\n")  # a damaged file is fetched again
    assert data.require("sms-spam", download=True, root=tmp_path) == tmp_path / "sms-spam"
    assert all(ok for _, ok, _ in data.verify("sms-spam", root=tmp_path))
    monkeypatch.undo()  # the real fetch: the public original is unreachable from the tests
    with pytest.raises(data.DataNotFoundError, match="Download failed"):
        data.require("cifar10-jpeg", download=True, root=tmp_path)


def test_gunzip_hasher_streams_multi_member_and_rejects_partial():
    import hashlib

    raw1, raw2 = b"abc" * 1000, b"xyz" * 777
    blob = gzip.compress(raw1) + gzip.compress(raw2)
    h = _GunzipHasher()
    for i in range(0, len(blob), 7):
        h.update(blob[i:i + 7])
    assert h.hexdigest() == hashlib.sha256(raw1 + raw2).hexdigest()
    partial = _GunzipHasher()
    partial.update(blob[: len(blob) // 3])
    assert partial.hexdigest() is None
    bad = _GunzipHasher()
    bad.update(b"not gzip at all")
    assert bad.hexdigest() is None


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="valid names"):
        data.fetch("imagenet", root=tmp_path)
    with pytest.raises(ValueError, match="urls has files not in"):
        data.fetch("sms-spam", root=tmp_path, urls={"other.txt": "http://127.0.0.1:1/x"})
    with pytest.raises(ValueError, match="64-character"):
        dl.download_file("http://127.0.0.1:1/x", tmp_path / "x", "abc")
