"""Text readers: documented split sizes, labels, seeded splits, and the IMDB csv format."""

from __future__ import annotations

import csv
import gzip
import io

import pytest

from paperzoo import data
from paperzoo.data.text import AGNEWS_CLASSES, SENTEVAL_TASKS


@pytest.mark.data("sst2")
def test_sst2(shared):
    train, test = data.load_sst2("train"), data.load_sst2("test")
    assert (len(train), len(test)) == (67349, 872)
    assert set(train.labels) == {0, 1} and test.texts[0] == "it 's a charming and often affecting journey ."
    text, label = test[0]
    assert isinstance(text, str) and label == 1
    assert data.load_sst2("test").label_tensor().shape == (872,)


@pytest.mark.data("agnews-partial")
def test_agnews(shared):
    train, test = data.load_agnews("train"), data.load_agnews("test")
    assert (len(train), len(test)) == (10001, 7600) and test.classes == AGNEWS_CLASSES
    assert [test.labels.count(k) for k in range(4)] == [1900] * 4


SENTEVAL_SIZES = {"CoLA": (8551, 516), "CR": (3016, 755), "MPQA": (8482, 2121), "MR": (8529, 2133),
                  "SST2": (6920, 1821), "SUBJ": (8000, 2000)}


@pytest.mark.data("nlpdatasets-senteval")
@pytest.mark.parametrize("task", SENTEVAL_TASKS)
def test_senteval(shared, task):
    train, test = data.load_senteval(task, "train"), data.load_senteval(task, "test")
    assert (len(train), len(test)) == SENTEVAL_SIZES[task]
    assert set(train.labels) == {0, 1} and all(t and not t.isdigit() for t in train.texts[:100])


@pytest.mark.data("nlpdatasets-senteval")
def test_cola_column_order(shared):
    ds = data.load_senteval("CoLA", "test")
    assert ds[0] == ("somebody just left guess who", 1) and ds.classes[1] == "acceptable"


@pytest.mark.data("youtube-spam", "sms-spam")
def test_spam_sets_and_seeded_split(shared):
    yt = data.load_youtube_spam("all")
    assert len(yt) == 1956 and sum(yt.labels) == 1005
    sms = data.load_sms_spam("all")
    assert len(sms) == 5574 and sum(sms.labels) == 747 and sms.classes == ("ham", "spam")
    tr, te = data.load_sms_spam("train"), data.load_sms_spam("test")
    assert len(te) == 1115 and len(tr) + len(te) == 5574
    assert data.load_sms_spam("test").texts == te.texts  # deterministic
    assert data.load_sms_spam("test", seed=1).texts != te.texts
    train_idx, test_idx = data.seeded_split(5574, "train"), data.seeded_split(5574, "test")
    assert not set(train_idx) & set(test_idx) and len(set(train_idx) | set(test_idx)) == 5574
    assert len(data.load_youtube_spam("test", test_fraction=0.1)) == 196


@pytest.mark.data("wikitext-2-partial", "tinyshakespeare")
def test_wikitext_and_shakespeare(shared):
    valid, test = data.load_wikitext2("valid"), data.load_wikitext2("test")
    assert valid.startswith(" \n = Homarus gammarus = \n") and len(test) > 1_000_000
    text = data.load_tinyshakespeare("all")
    train, val = data.load_tinyshakespeare("train"), data.load_tinyshakespeare("val")
    assert len(text) == 1115394 and train + val == text and len(train) == int(0.9 * len(text))
    assert text.startswith("First Citizen:")


def _fake_imdb(root):
    (root / "imdb").mkdir(parents=True)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["text", "label", "fold", "orig_split", "repo_split", "id", "rating"])
    w.writerow(['A "great", long\nreview', "1", "0", "train", "train", "0", "9"])
    w.writerow(["awful", "-1", "0", "train", "train", "1", "2"])
    w.writerow(["fine", "1", "1", "test", "test", "2", "7"])
    (root / "imdb" / "IMDB_iws_format.csv.gz").write_bytes(gzip.compress(buf.getvalue().encode()))


def test_imdb_format_on_a_small_file(tmp_path):
    _fake_imdb(tmp_path)
    path = tmp_path / "imdb" / "IMDB_iws_format.csv.gz"
    train = data.read_imdb_csv(path, "train")
    assert train.texts == ['A "great", long\nreview', "awful"] and train.labels == [1, 0]
    assert data.read_imdb_csv(path, "test").texts == ["fine"]
    with pytest.raises(data.DataIntegrityError, match="IMDB_iws_format.csv.gz"):  # not the catalog's file
        data.load_imdb("train", root=tmp_path)


@pytest.mark.slow
@pytest.mark.data("imdb")
def test_imdb_full(shared):
    for split in ("train", "test"):
        ds = data.load_imdb(split)
        assert len(ds) == 25000 and sum(ds.labels) == 12500
