"""Where sets are looked for, the one clear error for a missing set, and bad-input ValueErrors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from paperzoo import data


def test_data_root_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv("PAPERZOO_DATA", str(tmp_path))
    assert data.data_root() == tmp_path
    monkeypatch.delenv("PAPERZOO_DATA")
    assert data.data_root() == Path.home() / ".cache" / "paperzoo"
    monkeypatch.setenv("PAPERZOO_CACHE", str(tmp_path / "c"))
    assert data.cache_root() == tmp_path / "c"
    monkeypatch.delenv("PAPERZOO_CACHE")
    assert data.cache_root() == Path.home() / ".cache" / "paperzoo" / "derived"


def test_missing_set_gives_one_clear_error(empty_root):
    assert not data.is_present("mnist")
    with pytest.raises(data.DataNotFoundError) as e:
        data.require("mnist")
    msg = str(e.value)
    assert isinstance(e.value, FileNotFoundError)
    assert "'mnist'" in msg and str(empty_root / "mnist") in msg
    assert "paperzoo data fetch mnist" in msg and "PAPERZOO_DATA" in msg
    assert "train-images-idx3-ubyte.gz" in msg


def test_missing_repacked_set_says_how_it_is_rebuilt(empty_root):
    with pytest.raises(data.DataNotFoundError, match=r"paperzoo data fetch cifar10-jpeg.*public original "
                                                     r"cifar-10-python.tar.gz and rebuilds.*PAPERZOO_DATA"):
        data.load_cifar10("train")
    with pytest.raises(data.DataNotFoundError, match="nerf-synthetic-lego-200.*and 98 more"):
        data.load_blender()


@pytest.mark.parametrize("loader", [data.load_mnist, data.load_fashion_mnist, data.load_fsdd, data.load_sst2,
                                    data.load_agnews, data.load_imdb, data.load_sms_spam, data.load_youtube_spam,
                                    data.load_tinyshakespeare, data.load_tiny_nerf, data.load_blender])
def test_every_reader_raises_data_not_found(empty_root, loader):
    with pytest.raises(data.DataNotFoundError, match=str(empty_root)):
        loader()


@pytest.mark.data("sst2")
def test_require_returns_folder(shared):
    assert data.require("sst2") == shared / "sst2"


@pytest.mark.parametrize("call", [data.is_present, data.verify, data.require, data.get_info])
def test_unknown_set_name(call):
    with pytest.raises(ValueError, match="unknown data set 'imagenet'; valid names: agnews-partial"):
        call("imagenet")


@pytest.mark.parametrize("loader,split", [(data.load_mnist, "val"), (data.load_fashion_mnist, "dev"),
                                          (data.load_cifar10, "valid"), (data.load_fsdd, "dev"),
                                          (data.load_sst2, "dev"), (data.load_agnews, "all"),
                                          (data.load_imdb, "unsup"), (data.load_sms_spam, "val"),
                                          (data.load_youtube_spam, "dev"), (data.load_wikitext2, "train"),
                                          (data.load_tinyshakespeare, "test")])
def test_unknown_split(loader, split):
    with pytest.raises(ValueError, match=f"unknown split '{split}'.*valid"):
        loader(split)


@pytest.mark.data("nerf-synthetic-lego-200")
def test_other_bad_arguments(shared):
    with pytest.raises(ValueError, match="unknown SentEval task 'QQP'; valid: .*CoLA"):
        data.load_senteval("QQP")
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        data.load_senteval("MR", "dev")
    with pytest.raises(ValueError, match="unknown Blender-layout set"):
        data.load_blender("tiny-nerf")
    with pytest.raises(ValueError, match="unknown split 'test'.*'train'"):
        data.load_blender(split="test")
    with pytest.raises(ValueError, match="test_fraction"):
        data.seeded_split(10, "train", test_fraction=1.5)


def test_tensor_datasets_validate():
    with pytest.raises(ValueError, match=r"uint8 tensor \(N, C, H, W\)"):
        data.ImageDataset(torch.zeros(2, 28, 28, dtype=torch.uint8), torch.zeros(2, dtype=torch.int64), ("a",))
    with pytest.raises(ValueError, match=r"uint8 tensor"):
        data.ImageDataset(torch.zeros(2, 1, 28, 28), torch.zeros(2, dtype=torch.int64), ("a",))
    with pytest.raises(ValueError, match=r"int64 tensor \(N,\)"):
        data.ImageDataset(torch.zeros(2, 1, 4, 4, dtype=torch.uint8), torch.zeros(2, dtype=torch.int32), ("a",))
    with pytest.raises(ValueError, match="share dim 0"):
        data.ArrayDataset(torch.zeros(3, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="labels must lie in"):
        data.ImageDataset(torch.zeros(1, 1, 4, 4, dtype=torch.uint8), torch.tensor([3]), ("a", "b"))
    with pytest.raises(ValueError, match="at least one tensor"):
        data.ArrayDataset()
    with pytest.raises(ValueError, match="differ in length"):
        data.TextDataset(["a"], [0, 1], ("x", "y"))
    ds = data.ArrayDataset(torch.arange(3), torch.arange(3) * 2)
    assert len(ds) == 3 and [int(t) for t in ds[2]] == [2, 4]


def test_parse_idx_validates():
    good = bytes([0, 0, 0x08, 1]) + (3).to_bytes(4, "big") + bytes([1, 2, 3])
    assert data.parse_idx(good).tolist() == [1, 2, 3]
    assert data.parse_idx(bytes([0, 0, 0x0B, 1]) + (2).to_bytes(4, "big") + np.array([1, -2], ">i2").tobytes()
                          ).tolist() == [1, -2]
    with pytest.raises(ValueError, match="magic bytes"):
        data.parse_idx(b"\x1f\x8b\x08\x00" + good[4:])
    with pytest.raises(ValueError, match="size mismatch"):
        data.parse_idx(good[:-1])
    with pytest.raises(ValueError, match="has 1 dims, expected 3"):
        data.parse_idx(good, ndim=3)
