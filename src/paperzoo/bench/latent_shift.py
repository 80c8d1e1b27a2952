"""``paperzoo bench latent-shift``: time per explanation (the whole lambda search and the frames), Latent Shift batched
vs one image at a time (as the official code runs), against Captum's IntegratedGradients at 50 steps on the same
classifier, interleaved in one process.

Models: the reproduction's trained autoencoder and classifier (``PAPERZOO_LATENT_SHIFT_MODELS``, default
``runs/latent-shift-small/models/seed-0``); without them the ``tiny`` recipe's models are trained first (a note in
the meta says so), since with untrained models the search never moves. Images: the first 32 lesion-set test
positives, the paper's settings (relative drop 0.3, gifsplanation's grid to 1000, 10 frames).

Rows (times per explanation, batch time / 32): batched vs one at a time; batched vs the whole grid in one decode
call (no early exit); batched vs Captum IG. FLOPs: matmuls and convolutions (torch.utils.flop_counter).

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs 8 images and one repeat (a smoke test).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from paperzoo.bench.precision import FP32_REF, autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops
from paperzoo.papers.latent_shift import LatentShift

DEFAULT_MODELS = Path("runs/latent-shift-small/models/seed-0")


def _models() -> tuple[Any, Any, str]:
    from paperzoo.papers.latent_shift.recipe import load_trained

    where = Path(os.environ.get("PAPERZOO_LATENT_SHIFT_MODELS", DEFAULT_MODELS))
    if (where / "latent_shift.json").is_file():
        ae, clf = load_trained(where)
        return ae, clf, f"trained models from {where}"
    import tempfile

    from paperzoo.papers.latent_shift.recipe import PRESETS, train_job
    from paperzoo.recipes import Job

    with tempfile.TemporaryDirectory() as tmp:
        train_job(Job("models", 0), Path(tmp), False, False, PRESETS["tiny"])
        ae, clf = load_trained(Path(tmp))
    return ae, clf, f"no models in {where}: the tiny recipe's models, trained for this run"


def run(repeats: int | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time every case; ``(rows, meta)`` for :func:`paperzoo.bench.run_bench`."""
    from captum.attr import IntegratedGradients

    from paperzoo.data.lesions import load_lesions
    from paperzoo.papers.latent_shift.recipe import positives

    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    n = 8 if quick else 32
    reps = repeats or (1 if quick else 5)
    ae, clf, source = _models()
    test = load_lesions("test", 0, 2000)
    idx, target = positives(test, n // 2)
    x = test.images[idx]
    ls = LatentShift(clf, ae)
    kw = {"output": "logits", "internal_batch_size": 64}  # latents per decode call: what fits the CPU caches

    def batched():
        with autocast():
            return ls.attribute(x, target, **kw)

    def whole_grid():
        with autocast():
            return ls.attribute(x, target, early_exit=False, **kw)

    def one_at_a_time():
        with autocast():
            return [ls.attribute(x[i:i + 1], int(target[i]), **kw) for i in range(n)]

    ig = IntegratedGradients(clf)

    def captum_ig():
        with autocast():
            return ig.attribute(x, baselines=torch.zeros_like(x), target=target.tolist(), n_steps=50,
                                internal_batch_size=512)

    ref = batched()
    singles = one_at_a_time()
    same = bool(torch.equal(ref.stop_lambda, torch.cat([s.stop_lambda for s in singles])))
    max_diff = float(max((ref.frames[i] - s.frames[0]).abs().max() for i, s in enumerate(singles)))
    peak = peak_gflops()
    # FLOPs: FlopCounterMode cannot follow autograd.grad, so Latent Shift's are counted from its parts: one
    # decode + classify per evaluated (image, lambda) and per frame, plus the gradient pass (forward + backward)
    z = ae.encode(x[:1]).detach()
    per_eval = count_flops(lambda: clf(ae.decode(z)))

    def gradient_pass():
        zz = ae.encode(x).detach().requires_grad_(True)
        torch.sigmoid(clf(ae.decode(zz))).sum().backward()

    grad_flops = count_flops(gradient_pass)
    frames = n * (ref.frames.shape[1] - 1)
    evaluated = int((~ref.search_preds.isnan()).sum()) - n  # grid points decoded (lambda 0 is the reconstruction)
    flops = {"ours": grad_flops + per_eval * (evaluated + frames),
             "whole": grad_flops + per_eval * (n * (ref.search_preds.shape[1] - 1) + frames),
             "ig": count_flops(lambda: clf(x.repeat(50, 1, 1, 1).requires_grad_(True)).sum().backward())}  # IG's steps
    timed = time_interleaved({"batched": batched, "one at a time": one_at_a_time, "whole grid": whole_grid,
                              "captum IG 50": captum_ig}, warmup=1, repeats=reps)
    per = {k: v for k, v in timed.items()}

    def row(name, peer, flops_key, **extra):
        stats = {k: per[k] for k in ("batched", peer, "batched" + FP32_REF) if k in per}
        r = BenchResult.from_stats(name, f"{n} lesion positives, per explanation (batch time / {n})", stats,
                                   flops=flops[flops_key] // n, peak_gflops=peak, repeats=reps, **extra)
        r.ours_ms /= n
        r.peer_ms = r.peer_ms / n if r.peer_ms else None
        if "ours_fp32_ms" in r.extra:
            r.extra["ours_fp32_ms"] /= n
        return r

    stops = torch.tensor([float(v) for v in ref.stop_lambda])
    rows = [row("latent shift batched vs one at a time", "one at a time", "ours", same_stops=same,
                max_abs_frame_diff=max_diff, median_stop_lambda=float(stops.median())),
            row("latent shift early exit vs whole grid", "whole grid", "ours",
                peer_flops_per_explanation=flops["whole"] // n, grid_points_decoded=evaluated,
                grid_points_whole=n * (ref.search_preds.shape[1] - 1)),
            row("latent shift vs captum integrated gradients", "captum IG 50", "ours",
                peer_flops_per_explanation=flops["ig"] // n)]
    meta = {"torch_threads": torch.get_num_threads(), "models": source, "peak_gflops": peak,
            "notes": ("Times per explanation: a batch of images explained in one call, divided by the batch. "
                      "Latent Shift: the whole search (gradient, grid decodes and predictions, stopping rules) and "
                      "the 10 frames; the one-at-a-time peer is the same code called per image, as the official "
                      "repositories loop. Captum IG: 50 Gauss-Legendre steps, zero baseline, the map only (no "
                      "counterfactual). FLOPs: matmuls and convolutions; in the pass's precision; interleaved "
                      "medians on a shared machine.")}
    return rows, meta
