"""``paperzoo bench swin``: paperzoo Swin vs Hugging Face ``SwinModel`` with the same weights; and the cost scaling
of Swin vs ViT with image size (``python -m paperzoo.bench.swin``, :func:`write_scaling`).

Cases: a small Swin at 64x64 (patch 4, embed 128, depths 2-2, heads 4-8, window 4) and Swin-T at
224x224, both at batch 8; forward (inference, no grad) and forward+backward (train mode, stochastic depth off,
loss = mean square of ``last_hidden_state``). Ours is converted from the HF model with ``from_hf``, so weights
and outputs are identical (the max difference is recorded). Calls alternate ours/HF in one process; rows give
medians, ratio = HF / ours.

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs a few repeats only (a smoke test).

Scaling: the recipe's scaling models (:class:`paperzoo.papers.swin.recipe.Scaling`) at each size: the time of a
batch-1 forward+backward (the recipe's :func:`~paperzoo.papers.swin.recipe.time_scaling`), its FLOPs
(``torch.utils.flop_counter``) and the bytes autograd saves for backward, with log-log slopes against pixel count.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import activation_bytes, count_flops, loglog_slope

CASES = {
    "small 64x64": dict(image_size=64, patch_size=4, embed_dim=128, depths=[2, 2], num_heads=[4, 8], window_size=4),
    "swin-t 224x224": dict(image_size=224, patch_size=4, embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
                           window_size=7),
}


def _pair(cfg: dict[str, Any]) -> tuple[Any, Any]:
    import transformers

    from paperzoo.hf import from_hf

    torch.manual_seed(0)
    hf = transformers.SwinModel(transformers.SwinConfig(drop_path_rate=0.0, **cfg))
    with torch.no_grad():  # HF starts bias tables at zero; random values exercise the same paths
        for p in hf.parameters():
            p.add_(0.02 * torch.randn_like(p))
    return hf, from_hf(hf)


def run(batch: int = 8, repeats: int | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time every case; returns ``(rows, meta)`` for :func:`paperzoo.bench.run_bench`."""
    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    rows: list[BenchResult] = []
    peak = peak_gflops()
    for case, cfg in CASES.items():
        hf, ours = _pair(cfg)
        size = cfg["image_size"]
        x = torch.randn(batch, 3, size, size)
        big = size > 100
        n = repeats or (2 if quick else (8 if big else 24))

        def fwd(model, x=x):
            def f():
                with torch.no_grad(), autocast():
                    return model(pixel_values=x).last_hidden_state
            return f

        def fwd_bwd(model, x=x):
            def f():
                model.zero_grad(set_to_none=True)
                with autocast():
                    loss = model(pixel_values=x).last_hidden_state.float().square().mean()
                loss.backward()
            return f

        hf.eval(), ours.eval()
        max_diff = float((fwd(ours)().float() - fwd(hf)().float()).abs().max())
        flops = count_flops(fwd(ours))
        stats = time_interleaved({"ours": fwd(ours), "transformers": fwd(hf)}, warmup=1 if quick or big else 3,
                                 repeats=n)
        rows.append(BenchResult.from_stats(f"swin fwd {case}", f"batch {batch}, eval, no grad", stats, flops=flops,
                                           peak_gflops=peak, ours_min_ms=stats["ours"].min * 1e3,
                                           peer_min_ms=stats["transformers"].min * 1e3, repeats=n,
                                           max_abs_diff_vs_hf=max_diff, identical_math=True))
        hf.train(), ours.train()
        flops = count_flops(fwd_bwd(ours))
        stats = time_interleaved({"ours": fwd_bwd(ours), "transformers": fwd_bwd(hf)},
                                 warmup=1 if quick or big else 2, repeats=n)
        rows.append(BenchResult.from_stats(f"swin fwd+bwd {case}", f"batch {batch}, train", stats, flops=flops,
                                           peak_gflops=peak, ours_min_ms=stats["ours"].min * 1e3,
                                           peer_min_ms=stats["transformers"].min * 1e3, repeats=n,
                                           identical_math=True, gemm_bound=big))
    meta = {
        "torch_threads": torch.get_num_threads(),
        "notes": ("Same weights (ours = from_hf(HF)); HF uses its default attention (sdpa). Ours: fused qkv, "
                  "relative bias + shift mask as one additive mask per window (cached shift masks), 4-D SDPA on "
                  "strided views. FLOPs from torch.utils.flop_counter (matmuls only). The machine is shared "
                  "with other jobs: medians of interleaved calls; minimums are in the JSON."),
    }
    return rows, meta


def scaling(preset: str = "small", threads: int = 1) -> dict[str, Any]:
    """Time (median s), FLOPs and activation bytes of one batch-1 forward+backward of the ``preset``'s scaling Swin
    and ViT at each size, with log-log slopes against pixel count over the sizes the recipe fits."""
    from paperzoo.papers.swin.recipe import MODELS, PRESETS, fwd_bwd_step, time_scaling

    s = PRESETS[preset].scaling
    timed = time_scaling(s, threads=threads)
    torch.manual_seed(0)
    models = {k: MODELS[k](getattr(s, k)).train() for k in MODELS}
    measures: dict[str, dict[str, list[float]]] = {"seconds": timed["seconds"], "flops": {}, "activation_bytes": {}}
    for k, model in models.items():
        xs = [torch.randn(1, 3, n, n) for n in s.sizes]
        measures["flops"][k] = [count_flops(fwd_bwd_step(model, x)) for x in xs]
        measures["activation_bytes"][k] = [activation_bytes(lambda m=model, x=x: m(pixel_values=x).logits) for x in xs]
    fit = timed["slope_sizes"]
    slopes = {f"{k}_{m}": loglog_slope([n * n for n in fit], [v for n, v in zip(s.sizes, vs, strict=True) if n in fit])
              for m, by_model in measures.items() for k, vs in by_model.items()}
    return {"sizes": list(s.sizes), **measures, "slope_sizes": fit, "slopes": slopes, "torch_threads": threads,
            "command": "python -m paperzoo.bench.swin"}


def write_scaling(path: Path = Path("benchmarks/swin.scaling.json"), preset: str = "small") -> dict[str, Any]:
    """Measure :func:`scaling` and write it as JSON, a Markdown table and a plot beside it."""
    from paperzoo.papers.swin.recipe import plot_scaling

    sc = scaling(preset)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sc, indent=2) + "\n")
    lines = ["| model | size | GFLOP (fwd+bwd) | seconds | activation MiB |", "|---|---|---|---|---|"]
    lines += [f"| {k} | {n}x{n} | {sc['flops'][k][i] / 1e9:.2f} | {sc['seconds'][k][i]:.3f} | "
              f"{sc['activation_bytes'][k][i] / 2**20:.1f} |" for i, n in enumerate(sc["sizes"]) for k in sc["flops"]]
    fit = sc["slope_sizes"]
    lines += ["", f"Log-log slopes vs pixel count over {fit[0]}^2..{fit[-1]}^2:", ""]
    lines += [f"- {k}: {v:.3f}" for k, v in sc["slopes"].items()]
    path.with_suffix(".md").write_text(f"# Swin vs ViT cost scaling\n\n`{sc['command']}`\n\n" + "\n".join(lines) + "\n")
    plot_scaling(sc["sizes"], {"fwd+bwd time (s)": sc["seconds"], "FLOPs": sc["flops"],
                               "activation memory (bytes)": sc["activation_bytes"]}, path.with_suffix(".png"))
    return sc


if __name__ == "__main__":
    write_scaling(*(Path(a) for a in sys.argv[1:2]))
