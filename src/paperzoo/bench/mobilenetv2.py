"""``paperzoo bench mobilenetv2``: paperzoo MobileNetV2 vs Hugging Face ``MobileNetV2ForImageClassification``.

Both models carry the same random weights (HF's default config: width 1.0, TF "SAME" padding, 1000
classes; ours converted with ``from_hf``). For each case the three variants run interleaved in one process
(HF, ours eager, ours deployed = folded BN + channels_last + 1x1 convs as matmuls), so machine noise hits
all alike; each row's ratio is HF time / our time (median over repeats).

Cases: inference at batch 1 (latency) and batch 32 (throughput) at 224x224 and 96x96, and training
forward+backward (cross-entropy, train mode) at batch 8, 224x224, eager, ours vs HF.

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs only a few repeats (a smoke test).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from paperzoo.bench.precision import FP32_REF, autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult


def _models(width: float = 1.0) -> tuple[Any, Any, Any]:
    import transformers

    from paperzoo.hf import from_hf
    from paperzoo.papers.mobilenetv2.deploy import optimize_for_inference

    torch.manual_seed(0)
    hf_config = transformers.MobileNetV2Config(num_labels=1000, depth_multiplier=width)
    hf = transformers.MobileNetV2ForImageClassification(hf_config).eval()
    ours = from_hf(hf).eval()
    return hf, ours, optimize_for_inference(ours)


def _infer(model: Any, x: torch.Tensor):
    def f():
        with autocast():
            return model(pixel_values=x)
    return f


def run(sizes: tuple[int, ...] = (224, 96), batches: tuple[int, ...] = (1, 32), train_batch: int = 8,
        train_size: int = 224, width: float = 1.0) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time every case; returns ``(rows, meta)`` for :func:`paperzoo.bench.run_bench` (which calls it with the
    defaults: width 1.0, sizes 224 and 96, batches 1 and 32, training at batch 8 and 224)."""
    from paperzoo.papers.mobilenetv2.model import count_madds

    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    hf, ours, fast = _models(width)
    peak = peak_gflops()
    rows: list[BenchResult] = []
    for size in sizes:
        madds = count_madds(ours, size)
        for batch in batches:
            x = torch.randn(batch, 3, size, size)
            xc = x.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                with autocast():
                    got = fast(pixel_values=xc).logits.float()
                    ref = hf(pixel_values=x).logits.float()
                max_diff = float((got - ref).abs().max())
                repeats = 3 if quick else (30 if batch == 1 else 6)
                stats = time_interleaved({
                    "transformers": _infer(hf, x), "eager": _infer(ours, x), "deployed": _infer(fast, xc),
                }, warmup=1 if quick else 3, repeats=repeats, fp32_ref=("eager", "deployed"))
            hf_ms = stats["transformers"].median * 1e3
            flops = 2 * madds * batch
            for variant in ("eager", "deployed"):
                fp32 = stats.get(variant + FP32_REF)
                rows.append(BenchResult(
                    "mobilenetv2 inference", f"{variant}, batch {batch}, {size}x{size}",
                    stats[variant].median * 1e3, hf_ms, "transformers", flops, peak,
                    extra={"variant": variant, "batch": batch, "image_size": size,
                           "ours_min_ms": stats[variant].min * 1e3, "peer_min_ms": stats["transformers"].min * 1e3,
                           "images_per_s": batch / stats[variant].median, "repeats": stats[variant].n,
                           "max_abs_logit_diff_vs_hf": max_diff if variant == "deployed" else 0.0,
                           "identical_math": variant == "eager",
                           **({"ours_fp32_ms": fp32.median * 1e3,
                               "speedup_vs_ours_fp32": fp32.median / stats[variant].median} if fp32 else {})}))
    rows.append(_training(hf, ours, quick, train_batch, train_size))
    meta = {
        "torch_threads": torch.get_num_threads(),
        "notes": ("Same weights in all three models (HF default config, TF padding, 1000 classes). 'eager' is "
                  "paperzoo's nn.Module as trained (BatchNorm, NCHW); 'deployed' is "
                  "paperzoo.papers.mobilenetv2.deploy.optimize_for_inference (BN folded into convs, channels_last, "
                  "1x1 convs as F.linear), fed channels_last input. FLOPs = 2 x multiply-adds of conv/linear "
                  "(training: 3x forward). The machine is shared with other jobs: medians of interleaved calls, "
                  "minimums are in the JSON."),
    }
    return rows, meta


def _training(hf: Any, ours: Any, quick: bool, batch: int, size: int) -> BenchResult:
    """Forward + backward of the cross-entropy (train mode, BN batch statistics)."""
    from paperzoo.papers.mobilenetv2.model import count_madds

    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 1000, (batch,))
    hf.train()
    ours.train()

    def step(model):
        def f() -> None:
            model.zero_grad(set_to_none=True)
            with autocast():
                loss = model(pixel_values=x, labels=y).loss
            loss.backward()
        return f

    step_hf, step_ours = step(hf), step(ours)

    stats = time_interleaved({"ours": step_ours, "transformers": step_hf}, warmup=1 if quick else 2,
                             repeats=2 if quick else 6)
    hf.eval()
    ours.eval()
    return BenchResult.from_stats("mobilenetv2 training fwd+bwd", f"eager, batch {batch}, {size}x{size}", stats,
                                  flops=3 * 2 * count_madds(ours, size) * batch,
                                  peak_gflops=peak_gflops(), ours_min_ms=stats["ours"].min * 1e3,
                                  peer_min_ms=stats["transformers"].min * 1e3, identical_math=True)
