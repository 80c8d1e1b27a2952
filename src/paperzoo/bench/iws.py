"""``paperzoo bench iws``: seconds per IWS query on IMDB's full candidate set, ours vs the official code's approach.

A query is the model-of-the-expert refit plus the acquisition over every unqueried LF. Ours: the 50 bootstrap MLPs
as one batched computation (:class:`paperzoo.papers.iws.ExpertModel`). The peer, built like the official
``torchmodels.BaggingWrapperTorch`` (single process, as the notebook runs it with ``ensemblejobs=1``): 50
``torch.nn`` MLPs (Linear-ReLU-Linear-ReLU-Linear-Sigmoid), each reset, trained on its bootstrap resample with its
own ``torch.optim.Adam`` and ``BCELoss`` for up to 200 epochs with the official early stopping, then each predicting
every unqueried LF in turn. Both start from the same weights and bootstrap draws, so their predictions must agree
(``max_abs_diff``).

Rows: the query at 104 answered LFs (4 seeds + 100 oracle answers) on IMDB's 23.7k unigram LFs; the answer-to-next-LF
latency of a session (refit, acquisition, the next query's examples and highlight spans, and the save to disk that
follows every answer: what the UI waits for); the process's peak memory.

Environment: ``PAPERZOO_BENCH_QUICK=1`` uses YouTube spam (200 LFs) and one repeat (a smoke test).
"""

from __future__ import annotations

import os
import resource
import tempfile
import time
from typing import Any

import numpy as np
import torch

from paperzoo.bench.precision import fp32_only
from paperzoo.bench.results import BenchResult
from paperzoo.measure import time_interleaved
from paperzoo.papers.iws import EnsembleConfig, ExpertModel, IWSSession, SessionConfig, acquisition_scores
from paperzoo.papers.iws.mlp import MLPConfig


# ------------------------------------------------------------------------------------------------ the peer
def sequential_fit(init_flat: torch.Tensor, shapes: list[tuple[int, int]], x: torch.Tensor, y: torch.Tensor,
                   w: torch.Tensor, counts: torch.Tensor, config: MLPConfig) -> list[torch.nn.Module]:
    """Train one ``torch.nn`` MLP per member in turn, the official way: each on its bootstrap resample (rows
    repeated as drawn), Adam, ``BCELoss`` of a sigmoid output, mean of loss x weight, the official early stopping."""
    members = []
    for m in range(init_flat.shape[0]):  # the official loop over ensemble members
        layers, o = [], 0
        for i, (a, b) in enumerate(shapes):
            lin = torch.nn.Linear(a, b)
            with torch.no_grad():
                lin.weight.copy_(init_flat[m, o:o + a * b].view(a, b).T)
                lin.bias.copy_(init_flat[m, o + a * b:o + a * b + b])
            o += a * b + b
            layers += [lin, torch.nn.ReLU() if i < len(shapes) - 1 else torch.nn.Sigmoid()]
        net = torch.nn.Sequential(*layers)
        rows = torch.repeat_interleave(torch.arange(len(y)), counts[m].long())
        xb, yb, wb = x[rows], y[rows, None], w[rows, None]
        opt = torch.optim.Adam(net.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        crit = torch.nn.BCELoss(reduction="none")
        last, tol = None, 0
        for _ in range(config.epochs):
            loss = (crit(net(xb), yb) * wb).mean()
            if last is None:
                last = loss
            else:
                tol = tol + 1 if last - loss < config.tol else 0
                if tol > config.patience - 1:
                    break
                if config.early_stop_against == "previous":
                    last = loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        members.append(net)
    return members


@torch.no_grad()
def sequential_predict(members: list[torch.nn.Module], x: torch.Tensor) -> torch.Tensor:
    """(n, members) predictions, one member after the other (the official ``predict_raw``)."""
    return torch.stack([m(x)[:, 0] for m in members], 1)


# ------------------------------------------------------------------------------------------------ the bench
def _setup(quick: bool) -> tuple[Any, np.ndarray, np.ndarray]:
    from paperzoo.papers.iws.recipe import PRESETS, _prepared

    d = _prepared(PRESETS["small"], "youtube" if quick else "imdb")
    rng = np.random.default_rng(0)
    others = np.setdiff1d(np.flatnonzero(d.lfs.coverage() > 0), d.seed_lfs)
    answered = np.concatenate([d.seed_lfs, rng.choice(others, min(100, len(others) // 2), replace=False)])
    label = np.where(np.isin(answered, d.seed_lfs), 1.0, d.useful[answered].astype(float)).astype(np.float32)
    return d, answered, label


def run(repeats: int | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time ours and the official-style ensemble interleaved; returns ``(rows, meta)``."""
    fp32_only("a query refits 50 small MLPs inside ExpertModel.fit, whose training loop has no precision setting "
              "(paperzoo.papers.iws would need one); its matmuls are a few MFLOP each, below where bf16 pays")
    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    d, answered, label = _setup(quick)
    fps = torch.as_tensor(d.fps)
    rest = np.setdiff1d(np.arange(d.lfs.n_lfs), answered)
    x, y = fps[answered], torch.as_tensor(label)
    w = torch.ones(len(answered))
    fam = np.zeros(len(answered), dtype=np.int64)
    cfg = EnsembleConfig()
    ours = ExpertModel(fps.shape[1], 1, cfg, seed=0)
    init = ExpertModel(fps.shape[1], 1, cfg, seed=1)
    counts = init.bootstrap_counts(torch.as_tensor(fam))

    def query_ours() -> int:
        ours.fit(x.numpy(), label, w.numpy(), fam, seed=0)
        p = ours.predict(d.fps[rest], np.zeros(len(rest), dtype=np.int64))
        return int(rest[np.argmax(acquisition_scores("lse", p.mean(1), p.std(1)))])

    def query_official() -> int:
        members = sequential_fit(init.net.flat, init.net.shapes, x, y, w, counts, cfg.mlp)
        p = sequential_predict(members, fps[rest]).numpy()
        return int(rest[np.argmax(acquisition_scores("lse", p.mean(1), p.std(1)))])

    # the same initial weights and bootstrap draws for both: the predictions must agree
    check = ExpertModel(fps.shape[1], 1, cfg, seed=1)
    check.net.flat = init.net.flat.clone()
    check.net.fit(x, y, counts * w[None, :], norm=counts.sum(1))
    seq = sequential_predict(sequential_fit(init.net.flat, init.net.shapes, x, y, w, counts, cfg.mlp), fps[rest])
    max_diff = float((check.net.predict(fps[rest]).T - seq).abs().max())

    n = repeats or (1 if quick else 2)
    query_ours()  # warm (the fused Adam kernel's first call); the peer's first call is the check above
    stats = time_interleaved({"ours (batched)": query_ours, "official-style (sequential)": query_official},
                             warmup=0, repeats=n)
    peak_query = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [BenchResult.from_stats(
        "iws query (refit + LSE)", f"{d.name}: {len(answered)} answered, {len(rest)} unqueried LFs, 50 MLPs",
        stats, repeats=n, max_abs_diff=max_diff, epochs_ours=float(ours.epochs.float().mean()))]

    with tempfile.TemporaryDirectory() as tmp:  # the UI's path: answer -> refit -> next query (+ examples) -> save
        s = IWSSession(d.train, d.lfs, d.fps, SessionConfig(seed=0, budget=10_000), d.seed_lfs, d.name,
                       path=os.path.join(tmp, "s.json"))
        s._save_lfs()
        rng = np.random.default_rng(1)
        for j in rng.choice(rest, 100 if not quick else 20, replace=False):  # 100 earlier answers
            s.events.append({"type": "answer", "lf": int(j), "level": "useful" if d.useful[j] else "not useful",
                             "label": float(d.useful[j]), "weight": 1.0, "phase": "acquisition"})
        s._started = True
        s._advance()
        lat = []
        for _ in range(n + 2):
            t0 = time.perf_counter()
            s.answer("useful" if d.useful[s.pending] else "not useful")
            lat.append(time.perf_counter() - t0)
    rows.append(BenchResult("iws answer -> next LF (session)", f"{d.name}: ~{100 if not quick else 20} answers, "
                            "refit + LSE + examples + save", float(np.median(lat)) * 1e3,
                            extra={"max_ms": round(max(lat) * 1e3, 1), "under_1s": bool(max(lat) < 1.0)}))
    lf_bytes = d.lfs.fires.data.nbytes + d.lfs.fires.indices.nbytes + d.lfs.fires.indptr.nbytes
    meta = {"torch_threads": torch.get_num_threads(),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "peak_rss_mb_after_queries": round(peak_query, 1),
            "lf_matrix_mb": round(lf_bytes / 2**20, 1), "fingerprints_mb": round(d.fps.nbytes / 2**20, 1),
            "n_docs": d.lfs.n_docs, "n_lfs": d.lfs.n_lfs,
            "notes": ("Peer: the official BaggingWrapperTorch's loop (nn.Linear members, one Adam each, BCELoss on "
                      "sigmoid outputs, resampled rows), single process; ours: one batched fit with per-member early "
                      "stopping. Peak memory: the bench process's max RSS (data, LFs, features and both methods).")}
    return rows, meta
