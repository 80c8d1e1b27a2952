"""The end model: an MLP on TruncatedSVD(300) features of unigram counts, trained on the label model's soft labels.

As the official notebook: ``CountVectorizer(strip_accents='ascii', stop_words='english', max_df=0.9, min_df=10
documents)`` counts, ``TruncatedSVD(300, n_iter=20, random_state=42)`` fitted on the training documents, an MLP
300 -> 20 -> 20 -> 1 (sigmoid, BCE on soft labels; K > 2 classes: softmax and cross-entropy against the soft
label distribution), Adam 1e-3 / wd 1e-4, up to 250 full-batch epochs with the official early stopping, trained
on the covered documents only. Several label sets (e.g. every checkpoint of a run) train as one batched
computation (:class:`paperzoo.papers.iws.mlp.BatchedMLP`), one member per label set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .mlp import BatchedMLP, MLPConfig


@dataclass(frozen=True)
class EndModelConfig:
    """The official end model: SVD ``dim`` features, an MLP with ``mlp.hidden`` and ``mlp.epochs``."""

    dim: int = 300
    min_df: int = 10
    max_df: float = 0.9
    mlp: MLPConfig = field(default_factory=lambda: MLPConfig(hidden=(20, 20), epochs=250))


def text_features(train: Sequence[str], test: Sequence[str], config: EndModelConfig | None = None,
                  seed: int = 42) -> tuple[np.ndarray, np.ndarray]:
    """``(train (n, dim), test (m, dim))`` float32 SVD features of unigram counts fitted on ``train`` only."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import CountVectorizer

    c = config or EndModelConfig()
    v = CountVectorizer(strip_accents="ascii", stop_words="english", max_df=c.max_df, min_df=c.min_df)
    xtr = v.fit_transform(train).astype(np.float32)
    xte = v.transform(test).astype(np.float32)
    if xtr.shape[1] <= c.dim:  # as the official notebook: raw counts when the vocabulary is that small
        return np.asarray(xtr.todense()), np.asarray(xte.todense())
    svd = TruncatedSVD(c.dim, n_iter=20, random_state=seed)
    return svd.fit_transform(xtr).astype(np.float32), svd.transform(xte).astype(np.float32)


def train_end_models(x: np.ndarray, soft: Sequence[np.ndarray], mask: Sequence[np.ndarray],
                     config: EndModelConfig | None = None, seed: int = 0) -> BatchedMLP:
    """One end model per label set, trained together: ``x`` (n, d); ``soft[s]`` (n, classes) soft labels and
    ``mask[s]`` (n,) bool the documents it trains on (the covered ones)."""
    c = config or EndModelConfig()
    if len(soft) != len(mask) or not soft:
        raise ValueError(f"soft and mask must be equally long non-empty lists, got {len(soft)} and {len(mask)}")
    n, k = soft[0].shape
    if x.shape[0] != n:
        raise ValueError(f"x has {x.shape[0]} rows but the soft labels cover {n} documents")
    out = 1 if k == 2 else k
    net = BatchedMLP(len(soft), x.shape[1], out, c.mlp, torch.Generator().manual_seed(seed))
    t = torch.as_tensor(np.stack([s[:, 1] if k == 2 else s for s in soft]), dtype=torch.float32)
    w = torch.as_tensor(np.stack(mask), dtype=torch.float32)
    net.fit(torch.as_tensor(x, dtype=torch.float32), t, w)
    return net


def predict_proba(net: BatchedMLP, x: np.ndarray) -> np.ndarray:
    """(members, m, classes) class probabilities of every end model on ``x``."""
    p = net.predict(torch.as_tensor(x, dtype=torch.float32)).numpy()
    return np.stack([1 - p, p], -1) if net.out_dim == 1 else p


def scores(probs: np.ndarray, labels: Sequence[int]) -> dict[str, float]:
    """AUC (binary; K > 2: macro one-vs-rest), accuracy and F1 (binary: of class 1; else macro) of (m, K) probs."""
    from sklearn.metrics import f1_score, roc_auc_score

    y = np.asarray(labels)
    k = probs.shape[1]
    pred = probs.argmax(1)
    if k == 2:
        auc = roc_auc_score(y, probs[:, 1]) if len(np.unique(y)) == 2 else float("nan")
        f1 = f1_score(y, pred, zero_division=0)
    else:
        p = probs / probs.sum(1, keepdims=True)
        auc = roc_auc_score(y, p, multi_class="ovr", average="macro", labels=np.arange(k))
        f1 = f1_score(y, pred, average="macro", zero_division=0)
    return {"auc": float(auc), "accuracy": float((pred == y).mean()), "f1": float(f1)}
