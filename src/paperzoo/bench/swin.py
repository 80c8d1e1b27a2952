"""``paperzoo bench swin``: paperzoo Swin vs Hugging Face ``SwinModel`` with the same weights.

Cases (issue 9): a small Swin at 64x64 (patch 4, embed 128, depths 2-2, heads 4-8, window 4) and Swin-T at
224x224, both at batch 8; forward (inference, no grad) and forward+backward (train mode, stochastic depth off,
loss = mean square of ``last_hidden_state``). Ours is converted from the HF model with ``from_hf``, so weights
and outputs are identical (the max difference is recorded). Calls alternate ours/HF in one process; rows give
medians, ratio = HF / ours.

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs a few repeats only (a smoke test).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops, time_interleaved

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
    for case, cfg in CASES.items():
        hf, ours = _pair(cfg)
        size = cfg["image_size"]
        x = torch.randn(batch, 3, size, size)
        big = size > 100
        n = repeats or (2 if quick else (8 if big else 24))

        def fwd(model, x=x):
            def f():
                with torch.no_grad():
                    return model(pixel_values=x).last_hidden_state
            return f

        def fwd_bwd(model, x=x):
            def f():
                model.zero_grad(set_to_none=True)
                model(pixel_values=x).last_hidden_state.square().mean().backward()
            return f

        hf.eval(), ours.eval()
        max_diff = float((fwd(ours)() - fwd(hf)()).abs().max())
        flops = count_flops(fwd(ours))
        stats = time_interleaved({"ours": fwd(ours), "transformers": fwd(hf)}, warmup=1 if quick or big else 3,
                                 repeats=n)
        rows.append(BenchResult.from_stats(f"swin fwd {case}", f"batch {batch}, eval, no grad", stats, flops=flops,
                                           ours_min_ms=stats["ours"].min * 1e3,
                                           peer_min_ms=stats["transformers"].min * 1e3, repeats=n,
                                           max_abs_diff_vs_hf=max_diff))
        hf.train(), ours.train()
        flops = count_flops(fwd_bwd(ours))
        stats = time_interleaved({"ours": fwd_bwd(ours), "transformers": fwd_bwd(hf)},
                                 warmup=1 if quick or big else 2, repeats=n)
        rows.append(BenchResult.from_stats(f"swin fwd+bwd {case}", f"batch {batch}, train", stats, flops=flops,
                                           ours_min_ms=stats["ours"].min * 1e3,
                                           peer_min_ms=stats["transformers"].min * 1e3, repeats=n))
    meta = {
        "torch_threads": torch.get_num_threads(),
        "notes": ("Same weights (ours = from_hf(HF)); HF uses its default attention (sdpa). Ours: fused qkv, "
                  "relative bias + shift mask as one additive mask per window (cached shift masks), 4-D SDPA on "
                  "strided views. FLOPs from torch.utils.flop_counter (matmuls only). The machine is shared "
                  "with other jobs: medians of interleaved calls; minimums are in the JSON."),
    }
    return rows, meta
