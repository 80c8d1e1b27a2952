"""Image, audio and NeRF readers: shapes, dtypes, labels and split sizes as documented."""

from __future__ import annotations

import itertools
import json
import math
import time

import pytest
import torch

from paperzoo import data
from paperzoo.data.cifar import CLASSES, TAR_NAME, iter_cifar_tar


@pytest.mark.parametrize("loader", [pytest.param(data.load_mnist, marks=pytest.mark.data("mnist")),
                                    pytest.param(data.load_fashion_mnist, marks=pytest.mark.data("fashion-mnist"))])
@pytest.mark.parametrize("split,n", [("train", 60000), ("test", 10000)])
def test_idx_readers(shared, loader, split, n):
    ds = loader(split)
    assert ds.images.shape == (n, 1, 28, 28) and ds.images.dtype == torch.uint8
    assert ds.labels.shape == (n,) and ds.labels.dtype == torch.int64
    assert torch.equal(ds.labels.bincount(minlength=10).sum(), torch.tensor(n)) and len(ds.classes) == 10
    image, label = ds[0]
    assert image.shape == (1, 28, 28) and label.dtype == torch.int64


@pytest.mark.data("mnist", "fashion-mnist")
def test_known_first_labels(shared):
    assert data.load_mnist("test").labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    labels = data.read_idx(shared / "fashion-mnist" / "train-labels-idx1-ubyte.gz", ndim=1)
    assert labels[:4].tolist() == [9, 0, 0, 3] and data.load_fashion_mnist("test").classes[9] == "Ankle boot"
    assert torch.from_numpy(labels).long().bincount().tolist() == [6000] * 10


@pytest.mark.data("fashion-mnist")
def test_fashion_mnist_loads_fast(shared):
    data.load_fashion_mnist("test")  # warm the page cache
    t = time.perf_counter()
    data.load_fashion_mnist("train")
    assert time.perf_counter() - t < 3.0  # about 0.7 s on an idle 2-core machine


@pytest.mark.data("cifar10-jpeg")
def test_cifar_tar_reader_first_members(shared):
    items = list(itertools.islice(iter_cifar_tar(shared / "cifar10-jpeg" / TAR_NAME, "train"), 5))
    assert len(items) == 5
    for label, number, image in items:
        assert 0 <= label < 10 and number >= 0
        assert image.shape == (32, 32, 3) and image.dtype.name == "uint8"
    assert items[0][:2] == (0, 0)  # train/airplane/0000.jpg comes first


@pytest.mark.slow
@pytest.mark.data("cifar10-jpeg")
def test_cifar10_full_decode_and_cache(shared, tmp_path):
    for split, n in (("test", 10000), ("train", 50000)):
        ds = data.load_cifar10(split, cache=tmp_path)
        assert ds.images.shape == (n, 3, 32, 32) and ds.images.dtype == torch.uint8
        assert ds.labels.bincount().tolist() == [n // 10] * 10 and ds.classes == CLASSES
    cached = sorted(p.name for p in tmp_path.rglob("*.npy"))
    assert cached == ["test_images.npy", "test_labels.npy", "train_images.npy", "train_labels.npy"]
    t = time.perf_counter()
    again = data.load_cifar10("test", cache=tmp_path)
    assert time.perf_counter() - t < 5.0 and torch.equal(again.images, data.load_cifar10("test", cache=tmp_path).images)


@pytest.mark.data("cifar10-jpeg")
def test_cifar_cache_is_keyed_by_source_and_unwritable_cache_only_warns(shared, tmp_path, monkeypatch):
    from paperzoo.data import cifar

    def tiny(path, split):
        return (torch.zeros(2, 3, 32, 32, dtype=torch.uint8).numpy(), torch.tensor([0, 9]).numpy())

    monkeypatch.setattr(cifar, "decode_cifar_tar", tiny)
    ds = data.load_cifar10("test", cache=tmp_path)
    assert ds.labels.tolist() == [0, 9]
    key = data.sha256_file(shared / "cifar10-jpeg" / TAR_NAME)
    assert (tmp_path / "cifar10-jpeg" / key / "test_images.npy").is_file()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.warns(UserWarning, match="could not cache"):
        assert len(data.load_cifar10("train", cache=blocker)) == 2


@pytest.mark.data("fsdd")
@pytest.mark.parametrize("split,n,indices", [("train", 2700, range(5, 50)), ("test", 300, range(5))])
def test_fsdd(shared, split, n, indices):
    ds = data.load_fsdd(split)
    assert len(ds) == n and ds.sample_rate == 8000
    assert ds.labels.dtype == torch.int64 and ds.labels.bincount().tolist() == [n // 10] * 10
    assert sorted(set(ds.speakers)) == ["george", "jackson", "lucas", "nicolas", "theo", "yweweler"]
    assert set(ds.indices) == set(indices)
    for w in ds.waveforms[:50]:
        assert w.dtype == torch.float32 and w.dim() == 1 and float(w.abs().max()) <= 1.0
    wave, label = ds[0]
    assert wave.dim() == 1 and int(label) == int(ds.labels[0])


def test_pad_or_crop():
    waves = [torch.ones(3), torch.arange(6, dtype=torch.float32)]
    out = data.pad_or_crop(waves, 4)
    assert out.shape == (2, 4) and out.dtype == torch.float32
    assert out[0].tolist() == [1, 1, 1, 0] and out[1].tolist() == [0, 1, 2, 3]
    centred = data.pad_or_crop(waves, 4, center=True)
    assert centred[1].tolist() == [1, 2, 3, 4]
    assert data.pad_or_crop(torch.ones(5), 2).shape == (1, 2)
    with pytest.raises(ValueError, match="1-D float tensor"):
        data.pad_or_crop([torch.ones(2, 2)], 4)
    with pytest.raises(ValueError, match="1-D float tensor"):
        data.pad_or_crop([torch.ones(3, dtype=torch.int16)], 4)
    with pytest.raises(ValueError, match="positive int"):
        data.pad_or_crop(waves, 0)


@pytest.mark.data("nerf-synthetic-lego-200")
def test_blender_scene(shared):
    scene = data.load_blender("nerf-synthetic-lego-200")
    assert scene.images.shape == (100, 200, 200, 4) and scene.images.dtype == torch.float32
    assert 0.0 <= float(scene.images.min()) and float(scene.images.max()) <= 1.0
    assert scene.poses.shape == (100, 4, 4) and scene.poses.dtype == torch.float32
    assert torch.allclose(scene.poses[:, 3], torch.tensor([0.0, 0.0, 0.0, 1.0]).expand(100, 4))
    angle = 0.6911112070083618
    assert math.isclose(scene.focal, 0.5 * 200 / math.tan(0.5 * angle))
    assert math.isclose(scene.focal, 277.7777, rel_tol=1e-5)
    white, black = data.composite(scene.images[:2], "white"), data.composite(scene.images[:2], "black")
    assert white.shape == (2, 200, 200, 3)
    empty = scene.images[:2, ..., 3] == 0
    assert bool((white[empty] == 1).all()) and bool((black[empty] == 0).all())
    assert torch.allclose(white - black, (1 - scene.images[:2, ..., 3:]).expand(-1, -1, -1, 3))


@pytest.mark.data("tiny-nerf", "nerf-synthetic-lego-200")
def test_tiny_nerf(shared):
    scene = data.load_tiny_nerf()
    assert scene.images.shape == (100, 100, 100, 3) and scene.poses.shape == (100, 4, 4)
    assert math.isclose(scene.focal, 138.889, rel_tol=1e-4) and len(scene) == 100 and scene.width == 100
    # half the resolution of the Blender views: half the focal
    meta = json.loads((shared / "nerf-synthetic-lego-200" / "transforms_train.json").read_text())
    assert math.isclose(scene.focal, data.focal_from_fov(meta["camera_angle_x"], 100), rel_tol=1e-4)


def test_composite_validates():
    with pytest.raises(ValueError, match=r"float tensor \(\.\.\., 4\)"):
        data.composite(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="unknown background"):
        data.composite(torch.zeros(1, 4), "grey")
    with pytest.raises(ValueError, match="scalar or 3 values"):
        data.composite(torch.zeros(1, 4), (0.1, 0.2))
    out = data.composite(torch.tensor([[0.2, 0.4, 0.6, 0.5]]), (1.0, 0.0, 0.0))
    assert torch.allclose(out, torch.tensor([[0.6, 0.2, 0.3]]))
    with pytest.raises(ValueError, match="camera_angle_x"):
        data.focal_from_fov(4.0, 100)


def _scene(tmp_path, sizes, missing=False):
    """A made-up Blender folder: one RGBA PNG per size, identity poses."""
    from PIL import Image

    frames = []
    (tmp_path / "train").mkdir(parents=True)
    for i, (w, h) in enumerate(sizes):
        if not (missing and i == 1):
            Image.new("RGBA", (w, h), (255, 0, 0, 128)).save(tmp_path / "train" / f"r_{i}.png")
        frames.append({"file_path": f"./train/r_{i}", "transform_matrix": torch.eye(4).tolist()})
    (tmp_path / "transforms_train.json").write_text(json.dumps({"camera_angle_x": 0.69, "frames": frames}))
    return tmp_path


def test_blender_folder_of_any_size_and_clear_errors(tmp_path):
    scene = data.load_blender(_scene(tmp_path / "ok", [(12, 8), (12, 8)]))
    assert scene.images.shape == (2, 8, 12, 4) and math.isclose(scene.focal, data.focal_from_fov(0.69, 12))
    with pytest.raises(ValueError, match=r"r_1.png, which does not exist.*paperzoo data verify"):
        data.load_blender(_scene(tmp_path / "missing", [(12, 8), (12, 8)], missing=True))
    with pytest.raises(ValueError, match=r"share one size: .*r_1.png is 6x8, the first view 12x8"):
        data.load_blender(_scene(tmp_path / "mixed", [(12, 8), (6, 8)]))
    bad = _scene(tmp_path / "bad", [(4, 4)])
    (bad / "transforms_train.json").write_text("{")
    with pytest.raises(ValueError, match="damaged"):
        data.load_blender(bad)
    with pytest.raises(ValueError, match="unknown Blender-layout set"):
        data.load_blender("no-such-set")


def test_holdout_every_eighth_view():
    train, held = data.holdout(100)
    assert held.tolist() == list(range(0, 100, 8)) and len(train) + len(held) == 100
    assert not set(train.tolist()) & set(held.tolist())
