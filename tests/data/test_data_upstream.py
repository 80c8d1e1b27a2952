"""Every set from its public source: the repacked sets are rebuilt from constructed originals in the upstream formats
(offline), the rebuilt layouts are what the readers read and match the reference copy's format (byte for byte
where the content allows), ``fetch`` runs the whole way against a local server, and the mirror/permission/verify
details hold."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import pickle
import tarfile
import wave
import zipfile

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from paperzoo import data
from paperzoo.cli import app
from paperzoo.data import catalog, cifar, fsdd, nerf, text, upstream
from paperzoo.data.download import DownloadError
from paperzoo.data.store import BUILD_RECORD, check_file


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def _pin(monkeypatch, serve, filename: str, body: bytes, pinned: bool = True) -> None:
    """Serve ``body`` as the public original ``filename`` (pinned to its digest, or unpinned like the NeRF zip)."""
    serve.files[filename] = body
    monkeypatch.setitem(catalog._ARCHIVES, filename, catalog.Archive(
        filename, serve.url(filename), _sha(body) if pinned else None, len(body) if pinned else None, "test"))


def _gunzipped_members(path) -> list[tarfile.TarInfo]:
    with tarfile.open(path, "r:gz") as tar:
        return tar.getmembers()


# --------------------------------------------------------------------------------------------- CIFAR-10
def _cifar_images(n: int, seed: int) -> np.ndarray:
    """Smooth uint8 (n, 32, 32, 3) images (JPEG keeps them within a few levels)."""
    g = np.random.default_rng(seed)
    y, x = np.mgrid[0:32, 0:32] / 31.0
    base = g.uniform(30, 220, (n, 1, 1, 3)) + g.uniform(-30, 30, (n, 1, 1, 3)) * x[..., None] \
        + g.uniform(-30, 30, (n, 1, 1, 3)) * y[..., None]
    return base.clip(0, 255).astype(np.uint8)


def _cifar_archive(per_batch: int = 4) -> tuple[bytes, dict]:
    """A cifar-10-python.tar.gz in the upstream format: Python-2 style pickled dicts with bytes keys, data (N, 3072)
    in channel-major order. Returns the archive and, per split, the images and labels in batch order."""
    members, truth = {}, {"train": ([], []), "test": ([], [])}
    names = [(f"data_batch_{i}", "train") for i in range(1, 6)] + [("test_batch", "test")]
    for k, (name, split) in enumerate(names):
        images = _cifar_images(per_batch, k)
        labels = [(k + i * 3) % 10 for i in range(per_batch)]
        batch = {b"batch_label": name.encode(), b"labels": labels,
                 b"data": images.transpose(0, 3, 1, 2).reshape(per_batch, 3072).copy(),
                 b"filenames": [f"img_{k}_{i}.png".encode() for i in range(per_batch)]}
        members[f"cifar-10-batches-py/{name}"] = pickle.dumps(batch, protocol=2)
        truth[split][0].append(images)
        truth[split][1].extend(labels)
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps({b"label_names": [c.encode() for c in cifar.CLASSES]})
    members["cifar-10-batches-py/readme.html"] = b"<html></html>"
    return _tar_gz(members), {s: (np.concatenate(i), np.array(lab)) for s, (i, lab) in truth.items()}


def test_cifar_rebuild_reads_back_in_class_then_batch_order(tmp_path):
    (tmp_path / "a.tar.gz").write_bytes(_cifar_archive()[0])
    archive, truth = tmp_path / "a.tar.gz", _cifar_archive()[1]
    assert cifar.build_cifar10_jpeg(archive, tmp_path) == [cifar.TAR_NAME]
    first = (tmp_path / cifar.TAR_NAME).read_bytes()
    for split in ("train", "test"):
        images, labels = cifar.decode_cifar_tar(tmp_path / cifar.TAR_NAME, split)
        src, src_labels = truth[split]
        order = np.concatenate([np.flatnonzero(src_labels == c) for c in range(10)])  # class, then batch order
        assert labels.tolist() == src_labels[order].tolist()
        diff = np.abs(images.astype(int) - src[order].transpose(0, 3, 1, 2).astype(int))
        assert diff.mean() < 3 and diff.max() < 40  # JPEG quality 75 of smooth images
    cifar.build_cifar10_jpeg(archive, tmp_path)
    assert (tmp_path / cifar.TAR_NAME).read_bytes() == first  # deterministic


def test_cifar_batches_are_unpickled_without_running_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "owned"),))

    members = {f"cifar-10-batches-py/data_batch_{i}": pickle.dumps(Evil()) for i in range(1, 6)}
    members["cifar-10-batches-py/test_batch"] = pickle.dumps(Evil())
    (tmp_path / "a.tar.gz").write_bytes(_tar_gz(members))
    with pytest.raises(pickle.UnpicklingError, match="refusing to unpickle"):
        cifar.build_cifar10_jpeg(tmp_path / "a.tar.gz", tmp_path)
    assert not (tmp_path / "owned").exists()
    (tmp_path / "b.tar.gz").write_bytes(_tar_gz({"cifar-10-batches-py/readme.html": b""}))
    with pytest.raises(ValueError, match="not the CIFAR-10 python archive: no data_batch_1"):
        cifar.build_cifar10_jpeg(tmp_path / "b.tar.gz", tmp_path)


def _jpeg_layout(b: bytes) -> tuple:
    im = Image.open(io.BytesIO(b))
    from PIL import JpegImagePlugin

    markers, i = [], 2
    while b[i] == 0xFF and b[i + 1] != 0xDA:
        markers.append((b[i + 1], int.from_bytes(b[i + 2:i + 4], "big")))
        i += 2 + int.from_bytes(b[i + 2:i + 4], "big")
    return (im.mode, im.size, JpegImagePlugin.get_sampling(im), {k: list(v) for k, v in im.quantization.items()},
            tuple(markers))


def _header(m: tarfile.TarInfo) -> tuple:
    return (m.type, m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname)


@pytest.mark.data("cifar10-jpeg")
def test_cifar_rebuild_has_the_reference_format(shared, tmp_path):
    (tmp_path / "a.tar.gz").write_bytes(_cifar_archive()[0])
    cifar.build_cifar10_jpeg(tmp_path / "a.tar.gz", tmp_path)
    ours = tmp_path / cifar.TAR_NAME
    ref = shared / "cifar10-jpeg" / cifar.TAR_NAME
    assert ours.read_bytes()[:10] == ref.read_bytes()[:10]  # gzip header: no name, no time, level 6, Unix
    with tarfile.open(ref, "r:gz") as tar:
        ref_members = [tar.next() for _ in range(4)]  # train, train/airplane, train/airplane/0000.jpg, 0001.jpg
        ref_jpeg = tar.extractfile(ref_members[2]).read()
    with tarfile.open(ours, "r:gz") as tar:
        members = tar.getmembers()
        our_jpeg = tar.extractfile(next(m for m in members if m.isfile())).read()
    assert [m.name for m in members[:2]] == [m.name for m in ref_members[:2]] == ["train", "train/airplane"]
    assert [_header(m) for m in members[:3]] == [_header(m) for m in ref_members[:3]]
    assert members[2].name == ref_members[2].name == "train/airplane/0000.jpg"
    dirs = [m.name for m in members if m.isdir()]
    assert dirs == ["train", *[f"train/{c}" for c in cifar.CLASSES], "test", *[f"test/{c}" for c in cifar.CLASSES]]
    assert _jpeg_layout(our_jpeg) == _jpeg_layout(ref_jpeg)  # JFIF, q75 tables, 4:2:0, same markers


# --------------------------------------------------------------------------------------------- FSDD
def _wav(samples: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(samples.astype("<i2").tobytes())
    return buf.getvalue()


def _fsdd_zip(clips: dict[str, tuple[bytes, bool]], modes: bool = True) -> bytes:
    """GitHub's archive layout: one top folder, ``recordings/*.wav``, unix modes as git archive writes them."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("free-spoken-digit-dataset-1.0.10/README.md", b"# FSDD\n")
        for name, (body, executable) in clips.items():
            info = zipfile.ZipInfo(f"free-spoken-digit-dataset-1.0.10/recordings/{name}")
            if modes:
                info.create_system, info.external_attr = 3, (0o100755 if executable else 0o100644) << 16
            z.writestr(info, body)
    return buf.getvalue()


def test_fsdd_rebuild_reads_back(tmp_path):
    g = np.random.default_rng(0)
    clips = {f"{d}_{s}_{i}.wav": (_wav(g.integers(-3000, 3000, 400 + 10 * i)), s == "theo")
             for d in (0, 7) for s in ("jackson", "theo") for i in (0, 4, 5, 12)}
    (tmp_path / "a.zip").write_bytes(_fsdd_zip(clips))
    assert fsdd.build_fsdd_tar(tmp_path / "a.zip", tmp_path) == [fsdd.TAR_NAME]
    members = _gunzipped_members(tmp_path / fsdd.TAR_NAME)
    assert [m.name for m in members] == ["recordings", *sorted(f"recordings/{n}" for n in clips)]
    assert {m.name.split("/")[-1]: m.mode for m in members[1:]} == {
        n: 0o775 if ex else 0o664 for n, (_, ex) in clips.items()}
    test = fsdd.read_fsdd_tar(tmp_path / fsdd.TAR_NAME, "test")
    assert len(test) == 8 and set(test.indices) == {0, 4} and test.labels.tolist() == [0] * 4 + [7] * 4
    train = fsdd.read_fsdd_tar(tmp_path / fsdd.TAR_NAME, "train")
    assert len(train) == 8 and train.waveforms[0].dtype == torch.float32
    first = sorted(clips)[0]
    with wave.open(io.BytesIO(clips[first][0])) as w:
        expected = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768.0
    assert np.allclose(fsdd.read_fsdd_tar(tmp_path / fsdd.TAR_NAME, "all").waveforms[0].numpy(), expected)
    bad = dict(clips, **{"README.wav": clips[first]})
    (tmp_path / "b.zip").write_bytes(_fsdd_zip(bad))
    with pytest.raises(ValueError, match="expected recordings/<digit>_<speaker>_<index>.wav"):
        fsdd.build_fsdd_tar(tmp_path / "b.zip", tmp_path)


def _reference_clips(shared, count: int | None) -> tuple[dict[str, tuple[bytes, bool]], bytes]:
    ref = shared / "fsdd" / fsdd.TAR_NAME
    with tarfile.open(ref, "r:gz") as tar:
        clips = {m.name.split("/")[1]: (tar.extractfile(m).read(), bool(m.mode & 0o100)) for m in tar if m.isfile()}
    names = sorted(clips)[:count] if count else sorted(clips)
    return {n: clips[n] for n in names}, gzip.decompress(ref.read_bytes())


@pytest.mark.data("fsdd")
@pytest.mark.parametrize("modes", [True, False])  # an archive without unix modes falls back to git's known ones
def test_fsdd_rebuild_reproduces_the_reference_bytes(shared, tmp_path, modes):
    clips, ref = _reference_clips(shared, 60)  # the first 60 clips: 0_george_*, 0_jackson_0..9
    (tmp_path / "a.zip").write_bytes(_fsdd_zip(clips, modes=modes))
    fsdd.build_fsdd_tar(tmp_path / "a.zip", tmp_path)
    ours = gzip.decompress((tmp_path / fsdd.TAR_NAME).read_bytes())
    body = 512 + sum(512 + -(-len(b) // 512) * 512 for b, _ in clips.values())  # the folder, then each clip
    assert ours[:body] == ref[:body]


@pytest.mark.slow
@pytest.mark.data("fsdd")
def test_fsdd_full_rebuild_passes_the_catalog_check(shared, tmp_path):
    clips, _ = _reference_clips(shared, None)
    (tmp_path / "a.zip").write_bytes(_fsdd_zip(clips))
    fsdd.build_fsdd_tar(tmp_path / "a.zip", tmp_path)
    ok, why = check_file(tmp_path / fsdd.TAR_NAME, data.DATASETS["fsdd"].files[fsdd.TAR_NAME])
    assert ok and "decompressed content" in why


# --------------------------------------------------------------------------------------------- IMDB
def _acl_tar(reviews: list[tuple[str, str, int, int, str]], extra: dict | None = None) -> bytes:
    """aclImdb_v1.tar.gz layout: aclImdb/<split>/<pos|neg>/<id>_<rating>.txt plus files the rebuild ignores."""
    members = {"aclImdb/README": b"Large Movie Review Dataset v1.0\n", "aclImdb/imdb.vocab": b"the\n",
               "aclImdb/train/unsup/0_0.txt": b"unlabelled", "aclImdb/train/urls_pos.txt": b"http://x\n"}
    members.update({f"aclImdb/{s}/{p}/{i}_{r}.txt": t.encode() for s, p, i, r, t in reviews})
    members.update(extra or {})
    return _tar_gz(members)


def test_imdb_rebuild_reads_back(tmp_path):
    reviews = [("test", "neg", 3, 2, "awful, truly"), ("train", "pos", 16, 9, 'A "great" film,<br /><br />really'),
               ("train", "neg", 2, 1, "bad"), ("train", "pos", 2, 10, "fine"), ("test", "pos", 0, 8, "ok   "),
               ("train", "pos", 10, 7, "café")]
    (tmp_path / "a.tar.gz").write_bytes(_acl_tar(reviews))
    assert text.build_imdb_csv(tmp_path / "a.tar.gz", tmp_path) == [text.IMDB_CSV]
    rows = list(csv.DictReader(io.StringIO(gzip.decompress((tmp_path / text.IMDB_CSV).read_bytes()).decode(),
                                           newline="")))
    assert [(r["orig_split"], r["label"], r["id"]) for r in rows] == [
        ("train", "1", "2"), ("train", "1", "10"), ("train", "1", "16"), ("train", "-1", "2"), ("test", "1", "0"),
        ("test", "-1", "3")]  # train pos, train neg, test pos, test neg; ids numerically
    assert [r["repo_split"] for r in rows] == ["train", "train", "val", "train", "test", "test"]  # id 16 is val
    assert rows[2]["text"] == 'A "great" film,<br /><br />really' and rows[2]["rating"] == "9"
    assert rows[4]["text"] == "ok   " and rows[1]["text"] == "café"  # verbatim
    train = data.read_imdb_csv(tmp_path / text.IMDB_CSV, "train")
    assert train.labels == [1, 1, 1, 0] and data.read_imdb_csv(tmp_path / text.IMDB_CSV, "test").texts[0] == "ok   "
    (tmp_path / "b.tar.gz").write_bytes(_acl_tar([], {"aclImdb/train/pos/1_9.txt": b"\xff\xfe bad"}))
    with pytest.raises(ValueError, match="1_9.txt is not UTF-8"):
        text.build_imdb_csv(tmp_path / "b.tar.gz", tmp_path)


def _reference_imdb(shared) -> tuple[list[dict], bytes]:
    raw = gzip.decompress((shared / "imdb" / text.IMDB_CSV).read_bytes())
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8"), newline=""))), raw


def _as_reviews(rows) -> list[tuple[str, str, int, int, str]]:
    return [(r["orig_split"], "pos" if r["label"] == "1" else "neg", int(r["id"]), int(r["rating"]), r["text"])
            for r in rows]


@pytest.mark.data("imdb")
def test_imdb_rebuild_reproduces_the_reference_bytes(shared, tmp_path):
    rows, raw = _reference_imdb(shared)
    (tmp_path / "a.tar.gz").write_bytes(_acl_tar(_as_reviews(rows[:60])))  # train pos ids 0..59, 16 of them val
    text.build_imdb_csv(tmp_path / "a.tar.gz", tmp_path)
    ours = gzip.decompress((tmp_path / text.IMDB_CSV).read_bytes())
    assert ours == b"\r\n".join(raw.split(b"\r\n")[:61]) + b"\r\n"  # the header and the first 60 rows


@pytest.mark.slow
@pytest.mark.data("imdb")
def test_imdb_full_rebuild_passes_the_catalog_check(shared, tmp_path):
    rows, _ = _reference_imdb(shared)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:  # uncompressed: the builder reads either
        for s, p, i, r, t in _as_reviews(rows):
            body = t.encode()
            info = tarfile.TarInfo(f"aclImdb/{s}/{p}/{i}_{r}.txt")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    (tmp_path / "a.tar").write_bytes(buf.getvalue())
    text.build_imdb_csv(tmp_path / "a.tar", tmp_path)
    ok, why = check_file(tmp_path / text.IMDB_CSV, data.DATASETS["imdb"].files[text.IMDB_CSV])
    assert ok and "decompressed content" in why


# --------------------------------------------------------------------------------------------- NeRF
def _views(n: int, side: int, seed: int = 0) -> list[np.ndarray]:
    g = np.random.default_rng(seed)
    return [g.integers(0, 256, (side, side, 4), dtype=np.uint8) for _ in range(n)]


def _nerf_zip(views: list[np.ndarray], transforms: bytes | None = None) -> bytes:
    """nerf_synthetic.zip layout: nerf_synthetic/lego/transforms_train.json and train/r_<i>.png (RGBA)."""
    meta = {"camera_angle_x": 0.6911112070083618,
            "frames": [{"file_path": f"./train/r_{i}", "rotation": 0.0,
                        "transform_matrix": (np.eye(4) + i).tolist()} for i in range(len(views))]}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("nerf_synthetic/lego/transforms_train.json", transforms or json.dumps(meta, indent=4).encode())
        z.writestr("nerf_synthetic/chair/transforms_train.json", b"{}")
        for i, v in enumerate(views):
            png = io.BytesIO()
            Image.fromarray(v, "RGBA").save(png, "PNG")
            z.writestr(f"nerf_synthetic/lego/train/r_{i}.png", png.getvalue())
    return buf.getvalue()


def test_lego_and_tiny_nerf_rebuild_read_back(tmp_path):
    views = _views(3, 8)
    (tmp_path / "n.zip").write_bytes(_nerf_zip(views))
    out = tmp_path / "lego"
    out.mkdir()
    assert nerf.build_lego(tmp_path / "n.zip", out, side=2) == ["transforms_train.json", *[f"train/r_{i}.png"
                                                                                           for i in range(3)]]
    scene = data.load_blender(out)
    assert scene.images.shape == (3, 2, 2, 4) and torch.equal(scene.poses[1], torch.eye(4) + 1)
    assert scene.focal == pytest.approx(data.focal_from_fov(0.6911112070083618, 2))
    box = views[0].astype(float).reshape(2, 4, 2, 4, 4).mean(axis=(1, 3))  # premultiplied box filter, as Pillow does
    assert np.abs(scene.images[0, ..., 3].numpy() * 255 - box[..., 3]).max() <= 1
    nerf.build_tiny_nerf(tmp_path / "n.zip", tmp_path, side=2)
    tiny = np.load(tmp_path / nerf.TINY_NAME)
    assert tiny["images"].shape == (3, 2, 2, 3) and tiny["images"].dtype == np.float32
    rgba = views[2].astype(float)
    on_black = (rgba[..., :3] * rgba[..., 3:] / 255).reshape(2, 4, 2, 4, 3).mean(axis=(1, 3))
    assert np.allclose(tiny["images"][2], np.round(on_black) / 255)
    assert tiny["poses"].dtype == np.float32 and float(tiny["focal"]) == data.focal_from_fov(0.6911112070083618, 2)
    with pytest.raises(ValueError, match="divisible by 3"):
        nerf.build_lego(tmp_path / "n.zip", out, side=3)
    (tmp_path / "x.zip").write_bytes(_tar_gz({}))
    with pytest.raises(zipfile.BadZipFile):
        nerf.build_lego(tmp_path / "x.zip", out)


def _png_layout(b: bytes) -> tuple:
    chunks, i = [], 8
    while i < len(b):
        n = int.from_bytes(b[i:i + 4], "big")
        chunks.append(b[i + 4:i + 8])
        i += 12 + n
    return b[:8], b[24:29], tuple(dict.fromkeys(chunks))  # signature, IHDR depth/colour/compression/filter/interlace


@pytest.mark.data("nerf-synthetic-lego-200", "tiny-nerf")
def test_nerf_rebuilds_have_the_reference_format(shared, tmp_path):
    (tmp_path / "n.zip").write_bytes(_nerf_zip(_views(2, 8)))
    nerf.build_lego(tmp_path / "n.zip", tmp_path, side=4)
    nerf.build_tiny_nerf(tmp_path / "n.zip", tmp_path, side=4)
    ref_png = (shared / "nerf-synthetic-lego-200" / "train" / "r_0.png").read_bytes()
    assert _png_layout((tmp_path / "train" / "r_0.png").read_bytes()) == _png_layout(ref_png)
    ours, ref = np.load(tmp_path / nerf.TINY_NAME), np.load(shared / "tiny-nerf" / nerf.TINY_NAME)
    assert ours.files == ref.files and [ours[k].dtype for k in ours.files] == [ref[k].dtype for k in ref.files]
    assert [ours[k].shape[1:] for k in ("poses",)] == [ref["poses"].shape[1:]] and ours["focal"].shape == ()
    with zipfile.ZipFile(tmp_path / nerf.TINY_NAME) as a, zipfile.ZipFile(shared / "tiny-nerf" / nerf.TINY_NAME) as b:
        assert [(i.filename, i.compress_type) for i in a.infolist()] == [(i.filename, i.compress_type)
                                                                        for i in b.infolist()]


# --------------------------------------------------------------------------------------------- fetch, end to end
def test_fetch_rebuilds_cifar_from_the_public_original(serve, tmp_path, monkeypatch):
    body, _ = _cifar_archive()
    _pin(monkeypatch, serve, "cifar-10-python.tar.gz", body)
    monkeypatch.setenv("PAPERZOO_DATA", str(tmp_path / "data"))
    res = CliRunner().invoke(app, ["data", "fetch", "cifar10-jpeg"])
    assert res.exit_code == 0, res.output
    d = tmp_path / "data" / "cifar10-jpeg"
    tar = d / cifar.TAR_NAME
    assert tar.stat().st_mode & 0o044 == 0o044 and serve.hits == {"cifar-10-python.tar.gz": 1}
    record = json.loads((d / BUILD_RECORD).read_text())
    assert record["archive"]["sha256"] == _sha(body) and record["files"] == {cifar.TAR_NAME: data.sha256_file(tar)}
    (rel, ok, why), = data.verify("cifar10-jpeg")
    assert ok and "recorded when it was rebuilt" in why
    ds = data.load_cifar10("test", cache=tmp_path / "cache")
    assert len(ds) == 4 and ds.images.shape == (4, 3, 32, 32)
    raw = bytearray(tar.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    tar.write_bytes(bytes(raw))
    with pytest.raises(data.DataIntegrityError, match=f"{cifar.TAR_NAME}.*paperzoo data fetch cifar10-jpeg"):
        data.load_cifar10("test", cache=tmp_path / "cache")
    data.fetch("cifar10-jpeg", progress=False)  # repaired from the kept archive: no second download
    assert serve.hits == {"cifar-10-python.tar.gz": 1} and all(ok for _, ok, _ in data.verify("cifar10-jpeg"))
    assert (data.user_cache_dir() / "downloads" / "cifar-10-python.tar.gz").read_bytes() == body


def test_a_pinned_original_with_other_bytes_is_refused(serve, tmp_path, monkeypatch):
    body, _ = _cifar_archive()
    _pin(monkeypatch, serve, "cifar-10-python.tar.gz", body)
    serve.files["cifar-10-python.tar.gz"] = body[:-1] + bytes([body[-1] ^ 1])
    with pytest.raises(DownloadError, match="checksum mismatch.*nothing was kept"):
        data.fetch("cifar10-jpeg", root=tmp_path, progress=False)
    assert not (tmp_path / "cifar10-jpeg" / cifar.TAR_NAME).exists()
    assert not list((data.user_cache_dir() / "downloads").glob("cifar-10-python*"))


def test_an_unpinned_original_is_recorded_at_first_fetch_and_held_to_it(serve, tmp_path, monkeypatch):
    _pin(monkeypatch, serve, "nerf_synthetic.zip", b"<html>Google Drive - quota exceeded</html>", pinned=False)
    with pytest.raises(DownloadError, match="could not rebuild 'tiny-nerf'.*BadZipFile.*it was not kept"):
        data.fetch("tiny-nerf", root=tmp_path, progress=False)
    assert not list((data.user_cache_dir() / "downloads").iterdir())  # neither kept nor recorded
    body = _nerf_zip(_views(3, 100))
    serve.files["nerf_synthetic.zip"] = body
    data.fetch("tiny-nerf", root=tmp_path, progress=False)
    scene = data.load_tiny_nerf(root=tmp_path)
    assert scene.images.shape == (3, 100, 100, 3) and scene.focal == pytest.approx(138.889, rel=1e-4)
    record = data.user_cache_dir() / "downloads" / "nerf_synthetic.zip.sha256"
    assert record.read_text().split()[:2] == [_sha(body), str(len(body))]
    (data.user_cache_dir() / "downloads" / "nerf_synthetic.zip").unlink()
    (tmp_path / "tiny-nerf" / nerf.TINY_NAME).unlink()
    serve.files["nerf_synthetic.zip"] = _nerf_zip(_views(3, 100, seed=1))  # upstream changed
    with pytest.raises(DownloadError, match="recorded when it first rebuilt a set"):
        data.fetch("tiny-nerf", root=tmp_path, progress=False)


def test_a_rebuild_that_misses_the_reference_content_keeps_nothing(serve, tmp_path, monkeypatch):
    _pin(monkeypatch, serve, "aclImdb_v1.tar.gz", _acl_tar([("train", "pos", 0, 9, "not the real review")]))
    with pytest.raises(DownloadError, match="does not reproduce the reference content"):
        data.fetch("imdb", root=tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / "imdb").iterdir()) == []  # no csv, no record, no staging folder


@pytest.mark.slow
@pytest.mark.data("nerf-synthetic-lego-200")
def test_fetch_rebuilds_both_nerf_sets_from_one_download(shared, serve, tmp_path, monkeypatch):
    transforms = (shared / "nerf-synthetic-lego-200" / "transforms_train.json").read_bytes()
    views = [np.broadcast_to(np.array([i, 255 - i, 7, 200], np.uint8), (800, 800, 4)) for i in range(100)]
    _pin(monkeypatch, serve, "nerf_synthetic.zip", _nerf_zip(views, transforms), pinned=False)
    data.fetch("nerf-synthetic-lego-200", root=tmp_path, progress=False)
    data.fetch("tiny-nerf", root=tmp_path, progress=False)
    assert serve.hits == {"nerf_synthetic.zip": 1}
    assert all(ok for _, ok, _ in data.verify("nerf-synthetic-lego-200", root=tmp_path))
    scene = data.load_blender(root=tmp_path)
    assert scene.images.shape == (100, 200, 200, 4) and scene.focal == pytest.approx(277.7777, rel=1e-5)
    assert data.load_tiny_nerf(root=tmp_path).images.shape == (100, 100, 100, 3)


# --------------------------------------------------------------------------------------------- mirror, modes, verify
@pytest.mark.data("sms-spam", "sst2")
def test_mirror_may_be_a_plain_folder(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERZOO_MIRROR", str(shared))
    assert data.fetch("sms-spam", root=tmp_path / "a", progress=False) == tmp_path / "a" / "sms-spam"
    monkeypatch.chdir(shared.parent)
    monkeypatch.setenv("PAPERZOO_MIRROR", shared.name)  # relative to the working folder
    data.fetch("sst2", root=tmp_path / "b", progress=False)
    data.fetch("sst2", root=tmp_path / "c", base_url=shared.as_uri(), progress=False)  # file:// as well
    for root, name in ((tmp_path / "a", "sms-spam"), (tmp_path / "b", "sst2"), (tmp_path / "c", "sst2")):
        assert all(ok for _, ok, _ in data.verify(name, root=root))


@pytest.mark.data("sms-spam")
def test_fetched_files_are_readable(shared, tmp_path):
    old = os.umask(0o022)
    try:
        data.fetch("sms-spam", root=tmp_path, base_url=str(shared), progress=False)
    finally:
        os.umask(old)
    assert (tmp_path / "sms-spam" / "SMSSpamCollection").stat().st_mode & 0o777 == 0o644


def test_cli_verify_says_when_there_is_nothing_to_verify(tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.setenv("PAPERZOO_DATA", str(tmp_path / "nowhere"))
    res = runner.invoke(app, ["data", "verify"])
    assert res.exit_code != 0 and "does not exist" in res.output and str(tmp_path / "nowhere") in res.output
    res = runner.invoke(app, ["data", "verify", "mnist"])
    assert res.exit_code != 0 and "does not exist" in res.output
    (tmp_path / "nowhere").mkdir()
    res = runner.invoke(app, ["data", "verify", "mnist"])
    assert res.exit_code != 0 and f"{tmp_path / 'nowhere' / 'mnist'} does not exist" in res.output
    assert "paperzoo data fetch mnist" in res.output
    res = runner.invoke(app, ["data", "verify"])
    assert res.exit_code != 0 and "no data set under" in res.output


def test_every_repacked_set_names_its_builder_and_archive():
    for name, info in data.DATASETS.items():
        if info.build is not None:
            assert name in upstream.BUILDERS and info.build.archive in data.ARCHIVES
    pinned = {a.filename for a in data.ARCHIVES.values() if a.sha256}
    assert pinned == {"cifar-10-python.tar.gz", "free-spoken-digit-dataset-1.0.10.zip", "aclImdb_v1.tar.gz"}
