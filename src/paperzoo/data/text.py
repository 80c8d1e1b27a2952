"""Text data sets: classification sets as :class:`TextDataset`, language-model corpora as plain strings.

Splits (all deterministic):

* ``imdb``: 'train' = fold 0 (25000), 'test' = fold 1 (25000); label 1 = positive (+1), 0 = negative (-1).
* ``sst2``: 'train' = alps_train + alps_dev = the GLUE train (67349); 'test' = alps_test = the GLUE dev (872).
* ``agnews``: 'train' = the 10001-row train sample, 'test' = the official test (7600); classes
  World, Sports, Business, Sci/Tech (the AG News order).
* SentEval tasks (CoLA, MR, CR, SUBJ, MPQA, SST2): 'train' = train.tsv, 'test' = dev.tsv (the source's
  held-out file; for CoLA the out-of-domain dev set, 516). CoLA rows are ``text<TAB>label``, the others
  ``label<TAB>text``.
* ``youtube-spam`` (5 CSVs, in file order) and ``sms-spam`` have no official split: 'all' is every row;
  'train'/'test' is a seeded permutation (``seed=0``) with ``test_fraction`` (default 0.2) of the rows
  in test. Label 1 = spam.
* ``wikitext2``: 'valid' or 'test' text (there is no train file). ``tinyshakespeare``: 'train' = the
  first 90% of the characters, 'val' = the last 10%, 'all'.

Every reader checks the files it reads against the catalog first (:func:`paperzoo.data.store.require`): a
truncated ``input.txt`` fails with the file, both digests and the remedy instead of shifting the split.
:func:`build_imdb_csv` rebuilds the IMDB csv from the public ``aclImdb_v1.tar.gz``.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from paperzoo.data.store import atomic_writer, require

SENTEVAL_TASKS = ("CoLA", "CR", "MPQA", "MR", "SST2", "SUBJ")
AGNEWS_CLASSES = ("World", "Sports", "Business", "Sci/Tech")
IMDB_CSV = "IMDB_iws_format.csv.gz"
IMDB_ARCHIVE = "aclImdb_v1.tar.gz"
IMDB_COLUMNS = ("text", "label", "fold", "orig_split", "repo_split", "id", "rating")
_REVIEW = re.compile(r"aclImdb/(train|test)/(pos|neg)/([0-9]+)_([0-9]+)\.txt")


@dataclass
class TextDataset(Dataset):
    """Texts and int labels; item ``i`` is ``(texts[i], labels[i])``; ``classes[k]`` names label ``k``."""

    texts: list[str]
    labels: list[int]
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.texts) != len(self.labels):
            raise ValueError(f"texts and labels differ in length: {len(self.texts)} vs {len(self.labels)}")
        bad = [y for y in self.labels if not 0 <= y < len(self.classes)]
        if bad:
            raise ValueError(f"labels must lie in [0, {len(self.classes)}) for classes {self.classes}; got {bad[:5]}")

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i: int) -> tuple[str, int]:
        return self.texts[i], self.labels[i]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(zip(self.texts, self.labels, strict=True))

    def label_tensor(self) -> torch.Tensor:
        """Labels as int64 (N,)."""
        return torch.tensor(self.labels, dtype=torch.int64)


def _check(split: str, valid: tuple[str, ...], name: str) -> None:
    if split not in valid:
        raise ValueError(f"unknown split {split!r} for {name}; valid: {valid}")


def seeded_split(n: int, split: str, test_fraction: float = 0.2, seed: int = 0) -> list[int]:
    """Row indices of 'train', 'test' or 'all' for ``n`` rows: a seeded permutation, test = first ceil(f*n)."""
    _check(split, ("train", "test", "all"), "seeded_split")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    if split == "all":
        return list(range(n))
    perm = np.random.default_rng(seed).permutation(n)
    k = int(np.ceil(test_fraction * n))
    return sorted(perm[:k].tolist() if split == "test" else perm[k:].tolist())


def _read_tsv(path: Path, header: bool) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in (lines[1:] if header else lines) if line]
    bad = [i for i, r in enumerate(rows) if len(r) != 2]
    if bad:
        raise ValueError(f"{path}: expected 2 tab-separated columns, row {bad[0]} has {len(rows[bad[0]])}")
    return rows


def read_imdb_csv(path: str | os.PathLike, split: str) -> TextDataset:
    """Parse an IWS-format IMDB csv.gz: 'train' = fold 0, 'test' = fold 1; labels +1/-1 become 1/0."""
    _check(split, ("train", "test"), "imdb")
    fold = "0" if split == "train" else "1"
    texts, labels = [], []
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("text", "label", "fold") if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: the IWS csv layout needs columns text, label, fold; missing {missing} "
                             f"(found {reader.fieldnames})")
        for row in reader:
            if row["fold"] == fold:
                if row["label"] not in ("1", "-1"):
                    raise ValueError(f"imdb: expected label +1/-1, got {row['label']!r}")
                texts.append(row["text"])
                labels.append(1 if row["label"] == "1" else 0)
    return TextDataset(texts, labels, ("negative", "positive"))


def load_imdb(split: str = "train", root: str | os.PathLike | None = None) -> TextDataset:
    """IMDB reviews: 'train' (fold 0, 25000) or 'test' (fold 1, 25000); labels 1 positive, 0 negative."""
    _check(split, ("train", "test"), "imdb")
    return read_imdb_csv(require("imdb", root=root, files=(IMDB_CSV,)) / IMDB_CSV, split)


def build_imdb_csv(archive: str | os.PathLike, out_dir: str | os.PathLike) -> list[str]:
    """Write ``out_dir/IMDB_iws_format.csv.gz`` from ``aclImdb_v1.tar.gz``; returns the relative paths written.

    Rows: train positive, train negative, test positive, test negative, each by review id; ``text`` is the review
    file verbatim (UTF-8), ``label`` +1/-1, ``fold`` 0 train / 1 test, ``repo_split`` the reference copy's
    train/val assignment (:mod:`paperzoo.data._imdb_val`) or "test"; written by :mod:`csv` (CRLF, minimal quoting)
    as the reference was, so the decompressed bytes equal it. The 'unsup' reviews are not used.
    """
    from paperzoo.data._imdb_val import val_ids

    reviews: dict[tuple[str, str], dict[int, tuple[int, str]]] = {}
    with tarfile.open(archive, "r:*") as tar:
        for m in tar:
            hit = _REVIEW.fullmatch(m.name.removeprefix("./"))
            if not m.isfile() or not hit:
                continue
            split, sentiment, rid, rating = hit.groups()
            try:
                text = tar.extractfile(m).read().decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{archive}: {m.name} is not UTF-8 ({e})") from e
            reviews.setdefault((split, sentiment), {})[int(rid)] = (int(rating), text)
    if not reviews:
        raise ValueError(f"{archive} holds no aclImdb/{{train,test}}/{{pos,neg}}/<id>_<rating>.txt: not aclImdb")
    val = {"1": val_ids("1"), "-1": val_ids("-1")}
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(IMDB_COLUMNS)
    for split in ("train", "test"):
        for sentiment, label in (("pos", "1"), ("neg", "-1")):
            for rid, (rating, text) in sorted(reviews.get((split, sentiment), {}).items()):
                repo = "test" if split == "test" else ("val" if rid in val[label] else "train")
                w.writerow([text, label, "0" if split == "train" else "1", split, repo, rid, rating])
    with atomic_writer(Path(out_dir) / IMDB_CSV) as f:
        f.write(gzip.compress(buf.getvalue().encode("utf-8"), compresslevel=6, mtime=0))
    return [IMDB_CSV]


def load_sst2(split: str = "train", root: str | os.PathLike | None = None) -> TextDataset:
    """GLUE SST-2: 'train' (67349 = alps_train + alps_dev) or 'test' (872 = the GLUE dev set)."""
    _check(split, ("train", "test"), "sst2")
    files = ("alps_train.tsv", "alps_dev.tsv") if split == "train" else ("alps_test.tsv",)
    d = require("sst2", root=root, files=files)
    rows = [r for f in files for r in _read_tsv(d / f, header=True)]
    return TextDataset([t.strip() for t, _ in rows], [int(y) for _, y in rows], ("negative", "positive"))


def load_agnews(split: str = "train", root: str | os.PathLike | None = None) -> TextDataset:
    """AG News: 'train' (the 10001-row sample) or 'test' (7600); 4 classes in :data:`AGNEWS_CLASSES`."""
    _check(split, ("train", "test"), "agnews")
    rel = "alps_dev.tsv" if split == "train" else "alps_test.tsv"
    rows = _read_tsv(require("agnews-partial", root=root, files=(rel,)) / rel, header=False)
    unknown = {y for _, y in rows} - set(AGNEWS_CLASSES)
    if unknown:
        raise ValueError(f"agnews: unexpected labels {sorted(unknown)}; expected {AGNEWS_CLASSES}")
    return TextDataset([t for t, _ in rows], [AGNEWS_CLASSES.index(y) for _, y in rows], AGNEWS_CLASSES)


def load_senteval(task: str, split: str = "train", root: str | os.PathLike | None = None) -> TextDataset:
    """A SentEval-style task (CoLA, CR, MPQA, MR, SST2, SUBJ): 'train' = train.tsv, 'test' = dev.tsv."""
    if task not in SENTEVAL_TASKS:
        raise ValueError(f"unknown SentEval task {task!r}; valid: {SENTEVAL_TASKS}")
    _check(split, ("train", "test"), f"senteval/{task}")
    rel = f"{task}/{'train' if split == 'train' else 'dev'}.tsv"
    rows = _read_tsv(require("nlpdatasets-senteval", root=root, files=(rel,)) / rel, header=False)
    pairs = [(t, y) for t, y in rows] if task == "CoLA" else [(t, y) for y, t in rows]
    classes = ("unacceptable", "acceptable") if task == "CoLA" else ("0", "1")
    return TextDataset([t for t, _ in pairs], [int(y) for _, y in pairs], classes)


def load_youtube_spam(split: str = "all", root: str | os.PathLike | None = None, test_fraction: float = 0.2,
                      seed: int = 0) -> TextDataset:
    """YouTube comments (1956, 1005 spam): 'all', or a seeded 'train'/'test' split; label 1 = spam."""
    _check(split, ("train", "test", "all"), "youtube-spam")
    d = require("youtube-spam", root=root)
    texts, labels = [], []
    for path in sorted(d.glob("Youtube0*.csv")):
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f):
                texts.append(row["CONTENT"])
                labels.append(int(row["CLASS"]))
    keep = seeded_split(len(texts), split, test_fraction, seed)
    return TextDataset([texts[i] for i in keep], [labels[i] for i in keep], ("ham", "spam"))


def load_sms_spam(split: str = "all", root: str | os.PathLike | None = None, test_fraction: float = 0.2,
                  seed: int = 0) -> TextDataset:
    """SMS messages (5574, 747 spam): 'all', or a seeded 'train'/'test' split; label 1 = spam."""
    _check(split, ("train", "test", "all"), "sms-spam")
    d = require("sms-spam", root=root)
    rows = _read_tsv(d / "SMSSpamCollection", header=False)
    unknown = {y for y, _ in rows} - {"ham", "spam"}
    if unknown:
        raise ValueError(f"sms-spam: unexpected labels {sorted(unknown)}; expected ham/spam")
    keep = seeded_split(len(rows), split, test_fraction, seed)
    return TextDataset([rows[i][1] for i in keep], [int(rows[i][0] == "spam") for i in keep], ("ham", "spam"))


def load_wikitext2(split: str = "valid", root: str | os.PathLike | None = None) -> str:
    """WikiText-2 (tokenized) 'valid' or 'test' text; there is no train split here."""
    _check(split, ("valid", "test"), "wikitext-2-partial")
    rel = f"{split}.txt"
    return (require("wikitext-2-partial", root=root, files=(rel,)) / rel).read_text(encoding="utf-8")


def load_tinyshakespeare(split: str = "train", root: str | os.PathLike | None = None) -> str:
    """Tiny Shakespeare: 'train' (first 90% of characters), 'val' (last 10%) or 'all' (1115394 chars)."""
    _check(split, ("train", "val", "all"), "tinyshakespeare")
    with open(require("tinyshakespeare", root=root) / "input.txt", encoding="utf-8", newline="") as f:
        text = f.read()
    cut = int(0.9 * len(text))
    return {"train": text[:cut], "val": text[cut:], "all": text}[split]
