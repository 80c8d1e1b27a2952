"""An IWS session: one expert (or a simulated oracle) judging candidate LFs, one at a time, resumable at any answer.

The loop (paper Algorithm 1): show an LF, take an answer on the five-level scale, refit the model of the expert,
pick the next LF by the acquisition function. The official start-up protocol: a few seed LFs the expert names up
front (answered useful), then ``n_random_init`` random queries (counted in the budget), then acquisition. With K > 2
classes every class's LFs are their own one-vs-rest problem: the families take turns, each with its own random
start-up (``n_random_init`` per family) and its own ensemble.

Driving a session (what the web UI does)::

    s = IWSSession.create(texts, classes, seed_lfs=[("adorable", 1), ("hated", 0)], path="imdb.iws.json")
    q = s.next_query()            # Query: the LF, its n-gram, polarity, coverage, examples with highlight spans
    s.answer("useful", lf=q.lf)   # or "likely useful", "don't know", "likely not useful", "not useful"
    s.skip(); s.undo()            # skip this LF / take back the last answer or skip (its LF is shown again)
    s.progress(quality=True)      # queries so far, the label model's quality on the held-out set if there is one
    s.export_lfs("lfs.csv"); s.export_labels("labels.json")
    s = IWSSession.load("imdb.iws.json", texts)   # resumes exactly: the same next query, the same model

Every answer, skip and undo is saved at once (``path``: the JSON state, ``path.lfs.npz``: the candidate LFs and
fingerprints, written once, ``path.model.safetensors``: the model of the expert). Each step's randomness is seeded
by the session seed and the number of events so far, so the queries a session asks depend only on its answers.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from .acquisition import ACQUISITIONS, FINAL_SETS, choose, final_set
from .expert import EnsembleConfig, ExpertModel
from .label_model import LABEL_MODELS, SoftLabels, fit_label_model
from .lfs import CandidateLFs, LFConfig, UserLF, fingerprints, generate_lfs
from .mlp import MLPConfig

# answer level -> (label, weight): the official human-mode scale (radiolabels / radioweights)
LEVELS: dict[str, tuple[float, float]] = {
    "useful": (1.0, 1.0),
    "likely useful": (1.0, 0.5),
    "don't know": (0.5, 0.0),
    "likely not useful": (0.0, 0.5),
    "not useful": (0.0, 1.0),
}
FORMAT = 1


@dataclass(frozen=True)
class SessionConfig:
    """The loop's settings; ``final_set`` None picks the rule matching the acquisition (LSE -> LSE-ac, else AS)."""

    acquisition: str = "lse"
    r: float = 0.6
    z: float = 1.96
    n_random_init: int = 4
    budget: int = 150  # answers, the random start-up included
    final_set: str | None = None
    n_predict: int = 100  # LSE-ac: predicted LFs added per family (the notebook uses 200)
    label_model: str = "snorkel"
    class_balance: tuple[float, ...] | None = None  # the prior p(y) the expert states (None: Snorkel's uniform)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    fingerprint_dim: int = 150
    n_examples: int = 3
    snippet_chars: int = 300
    seed: int = 0

    def __post_init__(self) -> None:
        if self.acquisition not in ACQUISITIONS:
            raise ValueError(f"unknown acquisition {self.acquisition!r}; valid: {ACQUISITIONS}")
        if self.final_set is not None and self.final_set not in FINAL_SETS:
            raise ValueError(f"unknown final set {self.final_set!r}; valid: {FINAL_SETS}")
        if self.label_model not in LABEL_MODELS:
            raise ValueError(f"unknown label model {self.label_model!r}; valid: {LABEL_MODELS}")
        if not 0.5 <= self.r <= 1:
            raise ValueError(f"r must lie in [0.5, 1] (a threshold on p(useful)), got {self.r}")
        if self.budget < 0 or self.n_random_init < 0:
            raise ValueError(f"budget and n_random_init must be >= 0, got {self.budget}, {self.n_random_init}")

    @property
    def rule(self) -> str:
        return self.final_set or ("lse-ac" if self.acquisition == "lse" else "as")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SessionConfig:
        e = dict(d["ensemble"])
        e["mlp"] = MLPConfig(**{**e["mlp"], "hidden": tuple(e["mlp"]["hidden"])})
        cb = d.get("class_balance")
        return cls(**{**d, "ensemble": EnsembleConfig(**e), "class_balance": None if cb is None else tuple(cb)})


@dataclass
class Example:
    """A document the LF votes on: ``snippet`` = ``text[offset:offset + len(snippet)]``, ``spans`` in the snippet."""

    doc: int
    snippet: str
    offset: int
    spans: list[tuple[int, int]]


@dataclass
class Query:
    """The LF to show: what it matches, what it votes, how often, examples, and where the session stands."""

    lf: int
    pattern: str
    kind: str
    label: int
    label_name: str
    vote: int  # the IWS output value: +1 / -1 (binary) or class + 1
    description: str
    coverage: float
    number: int  # 1-based: this is the number-th query
    phase: str  # "start-up" (random) or "acquisition"
    mu: float | None
    sigma: float | None
    examples: list[Example]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class IWSSession:
    """See the module docstring. Build with :meth:`create` (or the constructor from prepared LFs) or :meth:`load`."""

    def __init__(self, texts: Sequence[str], lfs: CandidateLFs, fps: np.ndarray, config: SessionConfig | None = None,
                 seed_lfs: Sequence[int] = (), dataset: str = "", path: str | os.PathLike | None = None,
                 heldout: tuple[sp.spmatrix, np.ndarray] | None = None):
        self.config = config or SessionConfig()
        if len(texts) != lfs.n_docs:
            raise ValueError(f"texts has {len(texts)} documents but the LFs were built on {lfs.n_docs}")
        if fps.shape[0] != lfs.n_lfs:
            raise ValueError(f"fingerprints must have one row per LF ({lfs.n_lfs}), got shape {fps.shape}")
        self.texts, self.lfs, self.fps = texts, lfs, np.ascontiguousarray(fps, dtype=np.float32)
        self.dataset = dataset
        self.data_sha256 = corpus_sha256(texts, lfs.classes)
        self.seed_lfs = [int(j) for j in seed_lfs]
        bad = [j for j in self.seed_lfs if not 0 <= j < lfs.n_lfs]
        if bad:
            raise ValueError(f"seed LFs must be LF indices in [0, {lfs.n_lfs}), got {bad}")
        if self.config.class_balance is not None and len(self.config.class_balance) != lfs.n_classes:
            raise ValueError(f"class_balance has {len(self.config.class_balance)} entries but the data set has "
                             f"{lfs.n_classes} classes {tuple(lfs.classes)}")
        self.path = Path(path) if path is not None else None
        self.heldout = heldout
        self.family = lfs.lf_class.copy() if lfs.n_classes > 2 else np.zeros(lfs.n_lfs, dtype=np.int64)
        self.n_families = lfs.n_classes if lfs.n_classes > 2 else 1
        self.coverage = lfs.coverage()
        self._fires_csc = lfs.fires.tocsc()
        self.empty = np.flatnonzero(self.coverage == 0)  # known useless (the official code labels them 0 up front)
        self.expert = ExpertModel(self.fps.shape[1], self.n_families, self.config.ensemble, self.config.seed)
        self.events: list[dict[str, Any]] = []
        self.pending: int | None = None
        self._shown_at = time.monotonic()
        self._mu: np.ndarray | None = None  # (LFs,) over the unqueried LFs, NaN elsewhere
        self._sigma: np.ndarray | None = None
        self._model_at = -1  # binary: the number of events the fitted model has seen (-1: none)
        self._fit_keys: list[str | None] = [None] * self.n_families  # K > 2: each family's answers at its last fit
        self._started = False
        if self.config.n_random_init == 0 and not self.seed_lfs and self.config.acquisition != "random":
            raise ValueError("a session needs seed LFs or random start-up queries before the model can acquire")

    # ----------------------------------------------------------------------------------------------- building
    @classmethod
    def create(cls, texts: Sequence[str], classes: Sequence[str], config: SessionConfig | None = None,
               lf_config: LFConfig | None = None, user_lfs: Sequence[UserLF] = (),
               seed_lfs: Sequence[tuple[str, int | str]] = (), dataset: str = "",
               path: str | os.PathLike | None = None,
               heldout: tuple[Sequence[str], Sequence[int]] | None = None) -> IWSSession:
        """Generate the candidate LFs and fingerprints on ``texts`` and start a session (saved at ``path``).

        ``seed_lfs``: (pattern, class) pairs the expert vouches for; ``heldout``: (texts, labels) documents with
        labels to report the label model's quality on (never used for training or fingerprints).
        """
        config = config or SessionConfig()
        lfs = generate_lfs(texts, classes, lf_config, user_lfs)
        fps = fingerprints(lfs, config.fingerprint_dim)
        held = None
        if heldout is not None:
            ht, hy = heldout
            if len(ht) != len(hy):
                raise ValueError(f"heldout texts and labels differ in length: {len(ht)} vs {len(hy)}")
            held = (lfs.outputs(lfs.fire(ht)), np.asarray(hy, dtype=np.int64))
        s = cls(texts, lfs, fps, config, [lfs.find(p, c) for p, c in seed_lfs], dataset, path, held)
        s._save_lfs()
        s.next_query()
        s._save()
        return s

    @classmethod
    def start(cls, texts: Sequence[str], lfs: CandidateLFs, fps: np.ndarray, config: SessionConfig | None = None,
              seed_lfs: Sequence[int] = (), dataset: str = "", path: str | os.PathLike | None = None,
              heldout: tuple[sp.spmatrix, np.ndarray] | None = None) -> IWSSession:
        """Start a session from candidate LFs and fingerprints built once and shared (what the web UI caches per
        data set); saved at ``path`` like :meth:`create`'s. ``heldout``: (its LF outputs, its labels)."""
        s = cls(texts, lfs, fps, config, seed_lfs, dataset, path, heldout)
        s._save_lfs()
        s.next_query()
        s._save()
        return s

    # ----------------------------------------------------------------------------------------------- the loop
    @property
    def n_answers(self) -> int:
        return sum(e["type"] == "answer" for e in self.events)

    def answers(self) -> dict[int, tuple[float, float]]:
        """LF -> (label, weight) of every answer so far (seed LFs not included)."""
        return {e["lf"]: (e["label"], e["weight"]) for e in self.events if e["type"] == "answer"}

    def skipped(self) -> set[int]:
        return {e["lf"] for e in self.events if e["type"] == "skip"}

    def done(self) -> bool:
        return self.pending is None

    def next_query(self) -> Query | None:
        """The LF to show now (None once the budget is spent or no LF is left); asking twice shows the same LF."""
        if not self._started:
            self._started = True
            self._advance()
        if self.pending is None:
            return None
        return self._query(self.pending)

    def answer(self, level: str, lf: int | None = None) -> Query | None:
        """Answer the pending LF on the five-level scale; returns the next query. ``lf`` (optional) must be the
        pending LF: a stale page answering another LF is refused instead of recording the answer on the wrong LF."""
        if level not in LEVELS:
            raise ValueError(f"unknown answer {level!r}; valid: {tuple(LEVELS)}")
        target = self._pending_or_fail(lf)
        label, weight = LEVELS[level]
        self._record({"type": "answer", "lf": target, "level": level, "label": label, "weight": weight,
                      "phase": self._phase()})
        return self.next_query()

    def skip(self, lf: int | None = None) -> Query | None:
        """Put the pending LF aside (not answered, not counted, never asked again); returns the next query."""
        target = self._pending_or_fail(lf)
        self._record({"type": "skip", "lf": target, "phase": self._phase()})
        return self.next_query()

    def undo(self) -> Query | None:
        """Take back the last answer or skip: its LF is the pending query again. Returns it (None: nothing to undo)."""
        if not self.events:
            return None
        last = self.events.pop()
        self.pending = int(last["lf"])
        if self.n_families == 1:  # a later state with as many events is another state: refit then
            self._mu = self._sigma = None
            self._model_at = -1  # (K > 2: each family's fit is keyed by its own answers, see model())
        self._shown_at = time.monotonic()
        self._save()
        return self._query(self.pending)

    def _pending_or_fail(self, lf: int | None) -> int:
        if self.pending is None:
            raise ValueError("the session is finished (budget spent or no LF left): nothing to answer")
        if lf is not None and int(lf) != self.pending:
            raise ValueError(f"LF {lf} is not the pending query (LF {self.pending}); reload the query and answer it")
        return self.pending

    def _record(self, event: dict[str, Any]) -> None:
        now = time.monotonic()
        event.update(t=datetime.now(UTC).isoformat(timespec="seconds"), seconds=round(now - self._shown_at, 3))
        self.events.append(event)
        self._advance()
        self._save()

    def _phase(self) -> str:
        return "start-up" if self.n_answers < self.n_startup else "acquisition"

    @property
    def n_startup(self) -> int:
        """Random start-up answers: ``n_random_init`` per family (K one-vs-rest problems with K > 2 classes)."""
        return self.config.n_random_init * self.n_families

    def _advance(self) -> None:
        """Pick the pending LF for the current state (deterministic given the events and the seed)."""
        c = self.config
        self.pending = None
        if self.n_answers >= c.budget:
            return
        candidates = np.setdiff1d(self.unqueried(), np.array(sorted(self.skipped()), dtype=np.int64))
        candidates = candidates[self.coverage[candidates] > 0]
        if len(candidates) == 0:
            return
        turn = None
        if self.n_families > 1:
            turn, candidates = self._family_turn(candidates)
        rng = np.random.default_rng([c.seed, len(self.events)])
        if c.acquisition == "random" or self.n_answers < self.n_startup:
            self.pending = choose("random", candidates, None, None, rng)
        else:
            mu, sigma = self.model(turn)  # K > 2: only the family whose turn it is must be current
            self.pending = choose(c.acquisition, candidates, mu[candidates], sigma[candidates], rng, c.r, c.z)
        self._shown_at = time.monotonic()

    def _family_turn(self, candidates: np.ndarray) -> tuple[int, np.ndarray]:
        """One-vs-rest with K > 2 classes: the families take turns (answer n goes to family n mod K, the next one
        with candidates left), so each family's model sees its share of answers. Without turns the acquisition's
        argmax over all families starves the families whose model has seen only positive answers (sigma ~ 0:
        never queried again) while LSE-ac keeps adding their most common n-grams as predicted useful."""
        fams = self.family[candidates]
        for k in range(self.n_families):
            g = (self.n_answers + k) % self.n_families
            if (fams == g).any():
                return g, candidates[fams == g]
        raise AssertionError("unreachable: candidates is not empty")

    # ----------------------------------------------------------------------------------------------- the model
    def known(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lf, label, weight)`` of everything the model trains on: seed LFs (useful), the LFs that vote on no
        document (not useful, as the official code), and the answers."""
        ans = self.answers()
        lf = np.concatenate([np.array(self.seed_lfs, dtype=np.int64), self.empty,
                             np.array(list(ans), dtype=np.int64)])
        label = np.concatenate([np.ones(len(self.seed_lfs)), np.zeros(len(self.empty)),
                                np.array([a[0] for a in ans.values()])])
        weight = np.concatenate([np.ones(len(self.seed_lfs) + len(self.empty)),
                                 np.array([a[1] for a in ans.values()])])
        keep = np.unique(lf, return_index=True)[1]  # an LF answered twice: the first entry (seeds win)
        keep.sort()
        return lf[keep], label[keep].astype(np.float32), weight[keep].astype(np.float32)

    def unqueried(self) -> np.ndarray:
        """Indices of the LFs without an answer (skipped ones included: they may still be predicted useful)."""
        mask = np.ones(self.lfs.n_lfs, dtype=bool)
        mask[self.known()[0]] = False
        return np.flatnonzero(mask)

    def model(self, family: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(mu, sigma)`` (LFs,) of the model of the expert fitted on the current answers (NaN on known LFs).

        With K > 2 classes each family's ensemble is refitted only when that family's answers changed, and
        ``family`` asks for one family only (the acquisition of its turn: the other families' entries may then be
        stale); each family's fit is seeded by its own answers, so it does not depend on when it was asked for."""
        if self.n_families > 1:
            return self._family_models(range(self.n_families) if family is None else (family,))
        if self._model_at != len(self.events) or self._mu is None:
            lf, label, weight = self.known()
            self.expert.fit(self.fps[lf], label, weight, self.family[lf], seed=self._fit_seed())
            rest = self.unqueried()
            p = self.expert.predict(self.fps[rest], self.family[rest])  # (rest, members)
            self._mu = np.full(self.lfs.n_lfs, np.nan, dtype=np.float32)
            self._sigma = np.full(self.lfs.n_lfs, np.nan, dtype=np.float32)
            self._mu[rest], self._sigma[rest] = p.mean(1), p.std(1)  # numpy's population std, as the official code
            self._model_at = len(self.events)
        return self._mu, self._sigma

    def _family_models(self, families) -> tuple[np.ndarray, np.ndarray]:
        if self._mu is None:
            self._mu = np.full(self.lfs.n_lfs, np.nan, dtype=np.float32)
            self._sigma = np.full(self.lfs.n_lfs, np.nan, dtype=np.float32)
        lf, label, weight = self.known()
        fam = self.family[lf]
        rest = self.unqueried()
        for g in families:  # the K class families (one in the acquisition's turn), not LFs or members
            own = fam == g
            key = _answers_key(lf[own], label[own], weight[own])
            if self._fit_keys[g] == key:
                continue
            seed = int(np.random.default_rng([self.config.seed, g, int(own.sum()), 3]).integers(2**62))
            self.expert.fit_family(g, self.fps[lf[own]], label[own], weight[own], seed=seed)
            todo = rest[self.family[rest] == g]
            p = self.expert.predict(self.fps[todo], self.family[todo])  # (todo, members)
            mine = self.family == g
            self._mu[mine], self._sigma[mine] = np.nan, np.nan
            self._mu[todo], self._sigma[todo] = p.mean(1), p.std(1)
            self._fit_keys[g] = key
        return self._mu, self._sigma

    def _current(self, j: int) -> bool:
        """Whether the fitted model's mu_j is the current state's."""
        if self._mu is None or np.isnan(self._mu[j]):
            return False
        if self.n_families == 1:
            return self._model_at == len(self.events)
        lf, label, weight = self.known()
        own = self.family[lf] == self.family[j]
        return self._fit_keys[int(self.family[j])] == _answers_key(lf[own], label[own], weight[own])

    def _fit_seed(self) -> int:
        return int(np.random.default_rng([self.config.seed, len(self.events), 1]).integers(2**62))

    # ----------------------------------------------------------------------------------------------- results
    def final_lfs(self, rule: str | None = None) -> np.ndarray:
        """Sorted LF indices of the final set (``rule`` default: the config's)."""
        c = self.config
        rule = rule or c.rule
        lf, label, _ = self.known()
        rest = self.unqueried()
        mu = self.model()[0][rest] if rule != "as" else None
        return final_set(rule, lf, label, rest, mu, self.coverage, self.family, c.r, c.n_predict)

    def soft_labels(self, rule: str | None = None, model: str | None = None) -> SoftLabels:
        """The label model's soft labels of the training documents from the final set."""
        votes = self.lfs.outputs(columns=self.final_lfs(rule))
        return fit_label_model(votes, self.lfs.n_classes, model or self.config.label_model, self.config.seed,
                               class_balance=self.config.class_balance)

    def progress(self, quality: bool = False) -> dict[str, Any]:
        """Where the session stands; with ``quality`` and a held-out set, the label model's quality on it (the label
        model is fitted on the training and held-out votes together, unsupervised, and scored on the held-out rows)."""
        c = self.config
        ans = self.answers()
        out: dict[str, Any] = {
            "queries": self.n_answers, "budget": c.budget, "phase": self._phase(), "done": self.done(),
            "skipped": len(self.skipped()), "useful": sum(a[0] == 1 for a in ans.values()),
            "seed_lfs": len(self.seed_lfs), "acquisition": c.acquisition, "final_set": c.rule,
        }
        if quality and self.heldout is not None:
            from .end_model import scores

            chosen = self.final_lfs()
            hv, hy = self.heldout
            both = sp.vstack([self.lfs.outputs(columns=chosen), sp.csr_matrix(hv)[:, chosen]]).tocsr()
            soft = fit_label_model(both, self.lfs.n_classes, c.label_model, c.seed, class_balance=c.class_balance)
            n = self.lfs.n_docs
            out["heldout"] = {"lfs": len(chosen), "coverage": float(soft.covered[n:].mean()), "model": soft.model,
                              **scores(soft.probs[n:], hy)}
        return out

    def export_lfs(self, path: str | os.PathLike, rule: str | None = None) -> Path:
        """Write the final set's LFs (``.csv`` or ``.json``): pattern, kind, class, coverage, how it got in."""
        chosen = self.final_lfs(rule)
        ans = self.answers()
        mu = self._mu if self._mu is not None else np.full(self.lfs.n_lfs, np.nan)
        rows = []
        for j in chosen.tolist():  # export only: one row per accepted LF
            p = int(self.lfs.lf_pattern[j])
            how = "seed" if j in self.seed_lfs else ("answered" if j in ans else "predicted")
            rows.append({"lf": j, "pattern": self.lfs.names[p], "kind": self.lfs.kinds[p],
                         "class": self.lfs.classes[int(self.lfs.lf_class[j])], "coverage": float(self.coverage[j]),
                         "source": how, "mu": None if np.isnan(mu[j]) else float(mu[j]),
                         "level": next((e["level"] for e in self.events if e["type"] == "answer" and e["lf"] == j),
                                       None)})
        return _write_table(Path(path), rows)

    def export_labels(self, path: str | os.PathLike, rule: str | None = None) -> Path:
        """Write the final soft labels of the training documents (``.csv`` or ``.json``)."""
        soft = self.soft_labels(rule)
        names = self.lfs.classes
        rows = [{"doc": i, "covered": bool(soft.covered[i]), "label": names[int(soft.probs[i].argmax())],
                 **{f"p_{n}": float(soft.probs[i, k]) for k, n in enumerate(names)}} for i in range(len(soft.probs))]
        return _write_table(Path(path), rows)

    # ----------------------------------------------------------------------------------------------- a query
    def _query(self, j: int) -> Query:
        c = self.config
        p = int(self.lfs.lf_pattern[j])
        k = int(self.lfs.lf_class[j])
        mu = sigma = None
        if self._current(j):
            mu, sigma = float(self._mu[j]), float(self._sigma[j])
        docs = self._fires_csc.indices[self._fires_csc.indptr[p]:self._fires_csc.indptr[p + 1]]
        rng = np.random.default_rng([c.seed, j, 7])
        pick = np.sort(rng.choice(docs, min(c.n_examples, len(docs)), replace=False)) if len(docs) else docs
        examples = [self._example(int(i), j) for i in pick]
        return Query(j, self.lfs.names[p], self.lfs.kinds[p], k, self.lfs.classes[k], int(self.lfs.votes()[j]),
                     self.lfs.describe(j), float(self.coverage[j]), self.n_answers + 1, self._phase(), mu, sigma,
                     examples)

    def _example(self, doc: int, j: int) -> Example:
        text = self.texts[doc]
        spans = self.lfs.spans(text, j)
        w = self.config.snippet_chars
        start = max(0, (spans[0][0] - w // 3) if spans else 0)
        end = min(len(text), start + w)
        inside = [(a - start, b - start) for a, b in spans if a >= start and b <= end]
        return Example(doc, text[start:end], start, inside)

    # ----------------------------------------------------------------------------------------------- saving
    def _save_lfs(self) -> None:
        if self.path is None:
            return
        lfs = self.lfs
        arrays = {"fires_data": lfs.fires.data, "fires_indices": lfs.fires.indices, "fires_indptr": lfs.fires.indptr,
                  "fires_shape": np.array(lfs.fires.shape), "lf_pattern": lfs.lf_pattern, "lf_class": lfs.lf_class,
                  "fingerprints": self.fps, "names": np.array(lfs.names, dtype=object),
                  "kinds": np.array(lfs.kinds, dtype=object)}
        if self.heldout is not None:
            hv = sp.csr_matrix(self.heldout[0])
            arrays.update(held_data=hv.data, held_indices=hv.indices, held_indptr=hv.indptr,
                          held_shape=np.array(hv.shape), held_labels=self.heldout[1])
        buf = io.BytesIO()
        np.savez_compressed(buf, **arrays)
        _write_bytes_atomic(_sidecar(self.path, ".lfs.npz"), buf.getvalue())

    def state_dict(self) -> dict[str, Any]:
        lfs = self.lfs
        return {"format": FORMAT, "dataset": self.dataset, "data_sha256": self.data_sha256, "n_docs": lfs.n_docs,
                "classes": list(lfs.classes), "lf_key": lfs.fingerprint_key(), "lf_config": asdict(lfs.config),
                "user_lfs": [asdict(u) for u in lfs.user], "config": self.config.to_dict(),
                "seed_lfs": self.seed_lfs, "events": self.events, "pending": self.pending,
                "model_at": self._model_at, "fit_keys": self._fit_keys}

    def _save(self) -> None:
        if self.path is None:
            return
        from safetensors.torch import save as save_tensors

        from paperzoo.report.serial import write_text_atomic

        if self._mu is not None and (self._model_at >= 0 or any(k is not None for k in self._fit_keys)):
            tensors = {**self.expert.state(), "mu": torch.from_numpy(self._mu), "sigma": torch.from_numpy(self._sigma)}
            _write_bytes_atomic(_sidecar(self.path, ".model.safetensors"),
                                save_tensors({k: v.contiguous() for k, v in tensors.items()}))
        write_text_atomic(self.path, json.dumps(self.state_dict(), indent=1))

    @classmethod
    def load(cls, path: str | os.PathLike, texts: Sequence[str]) -> IWSSession:
        """Resume the session saved at ``path`` on the same training documents ``texts`` (checked by digest)."""
        path = Path(path)
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path} is not a readable IWS session file ({e})") from e
        if state.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown session format {state.get('format')!r} (expected {FORMAT})")
        classes = tuple(state["classes"])
        sha = corpus_sha256(texts, classes)
        if sha != state["data_sha256"]:
            raise ValueError(f"{path} is a session on data set {state['dataset']!r} ({state['n_docs']} documents, "
                             f"sha256 {state['data_sha256'][:12]}), not on these {len(texts)} documents "
                             f"(sha256 {sha[:12]}): open it with the documents it was started on")
        side = _sidecar(path, ".lfs.npz")
        if not side.is_file():
            raise ValueError(f"{side} is missing: the candidate LFs of session {path} were not found beside it")
        z = np.load(side, allow_pickle=True)
        fires = sp.csr_matrix((z["fires_data"], z["fires_indices"], z["fires_indptr"]), shape=tuple(z["fires_shape"]))
        names, kinds = [str(n) for n in z["names"]], [str(k) for k in z["kinds"]]
        vocab = {k: [n for n, kk in zip(names, kinds, strict=True) if kk == k] for k in ("unigram", "bigram")}
        lfs = CandidateLFs(fires, names, kinds, z["lf_pattern"], z["lf_class"], classes,
                           LFConfig(**state["lf_config"]), tuple(UserLF(**u) for u in state["user_lfs"]),
                           {k: v for k, v in vocab.items() if v})
        if lfs.fingerprint_key() != state["lf_key"]:
            raise ValueError(f"{side} does not hold the LFs session {path} was saved with (LF digests differ)")
        held = None
        if "held_labels" in z:
            held = (sp.csr_matrix((z["held_data"], z["held_indices"], z["held_indptr"]),
                                  shape=tuple(z["held_shape"])), z["held_labels"])
        s = cls(texts, lfs, z["fingerprints"], SessionConfig.from_dict(state["config"]), state["seed_lfs"],
                state["dataset"], path, held)
        s.events = list(state["events"])
        s.pending = state["pending"]
        s._started = True
        model = _sidecar(path, ".model.safetensors")
        keys = state.get("fit_keys") or [None] * s.n_families
        if (state["model_at"] >= 0 or any(k is not None for k in keys)) and model.is_file():
            from safetensors.torch import load_file

            t = load_file(str(model))
            s._mu, s._sigma = t.pop("mu").numpy().copy(), t.pop("sigma").numpy().copy()
            s.expert.load(t)
            s._model_at, s._fit_keys = state["model_at"], list(keys)
        return s

    # ----------------------------------------------------------------------------------------------- simulation
    def simulate(self, useful: np.ndarray, checkpoints: Sequence[int], rules: Sequence[str]
                 ) -> dict[int, dict[str, list[int]]]:
        """Answer with an oracle (``useful``: (LFs,) bool, "useful" / "not useful" with weight 1, as the official
        automated mode) until the budget; at each checkpoint (a number of answers) record every final set of
        ``rules``. Returns ``{answers: {rule: LF indices}}``."""
        if np.shape(useful) != (self.lfs.n_lfs,):
            raise ValueError(f"useful must have shape ({self.lfs.n_lfs},), got {np.shape(useful)}")
        want = sorted(set(int(q) for q in checkpoints if q <= self.config.budget))
        out: dict[int, dict[str, list[int]]] = {}
        self.next_query()
        while True:
            q = self.n_answers
            if q in want and q not in out:
                out[q] = {r: self.final_lfs(r).tolist() for r in rules}
            if self.pending is None or q >= max(want, default=0):
                break
            self.answer("useful" if useful[self.pending] else "not useful")
        return out


# ----------------------------------------------------------------------------------------------- helpers
def corpus_sha256(texts: Sequence[str], classes: Sequence[str]) -> str:
    """A digest of the documents (in order) and the class names: what identifies a session's data set."""
    h = hashlib.sha256()
    h.update("\x1f".join(classes).encode())
    for t in texts:
        h.update(b"\x1e" + t.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _answers_key(lf: np.ndarray, label: np.ndarray, weight: np.ndarray) -> str:
    """A digest of one family's training rows (LF, label, weight): what its fitted ensemble depends on."""
    h = hashlib.sha256()
    for a in (np.asarray(lf, np.int64), np.asarray(label, np.float32), np.asarray(weight, np.float32)):
        h.update(a.tobytes())
    return h.hexdigest()[:32]


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_table(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix not in (".csv", ".json"):
        raise ValueError(f"export path must end in .csv or .json, got {path.name!r}")
    from paperzoo.report.serial import write_text_atomic

    if path.suffix == ".json":
        return write_text_atomic(path, json.dumps(rows, indent=1))
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["lf"])
    w.writeheader()
    w.writerows(rows)
    return write_text_atomic(path, buf.getvalue())
