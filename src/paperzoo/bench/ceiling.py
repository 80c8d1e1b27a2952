"""How fast can ours be at most, when both sides must run the same matrix products?

A speed target such as "1.2x the peer" is reachable only if the peer spends at least 1/6 of its time outside the
work ours must do too. For models whose weights and FLOPs are fixed (same architecture, same dtype), that work is
the GEMMs and the attention kernels. So the ceiling of ``peer time / our time`` is::

    ceiling = peer wall time / peer time in GEMM and attention kernels     (Amdahl's law, all other work -> 0)

This is an upper bound that ignores the elementwise work (GELU, LayerNorm, softmax, dropout) any implementation
needs, so the reachable ratio is lower. The kernel time comes from ``torch.profiler`` self times; the wall time
is the median of timed calls.

``python -m paperzoo.bench.ceiling [--out benchmarks/ceilings.md]`` measures the fwd+bwd cases of the encoder,
Funnel, Swin and Switch benches (run it on a quiet machine).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["KERNELS", "Ceiling", "kernel_ceiling"]

# ops whose time is set by FLOPs that any implementation of the same model must do (CPU names; CUDA kernels are
# attributed to these aten ops too)
KERNELS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_grouped_mm",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_cudnn_attention_backward",
})


@dataclass(frozen=True)
class Ceiling:
    """``wall_ms``: median time per call; ``kernel_ms``: profiled time per call in :data:`KERNELS`;
    ``ceiling = wall_ms / kernel_ms``; ``top``: the largest other ops (name, ms per call)."""

    wall_ms: float
    kernel_ms: float
    top: tuple[tuple[str, float], ...]

    @property
    def ceiling(self) -> float:
        return self.wall_ms / self.kernel_ms

    @property
    def kernel_share(self) -> float:
        return self.kernel_ms / self.wall_ms


def kernel_ceiling(fn: Callable[[], Any], calls: int = 5, warmup: int = 2) -> Ceiling:
    """Time ``calls`` calls of ``fn`` (median), profile ``calls`` more, and return the :class:`Ceiling`."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    from torch.profiler import ProfilerActivity, profile

    from paperzoo.bench.timing import cuda_sync

    for _ in range(warmup):
        fn()
    cuda_sync()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        cuda_sync()
        times.append(time.perf_counter() - t)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
        cuda_sync()
    events = prof.key_averages()
    kernel = sum(e.self_cpu_time_total for e in events if e.key in KERNELS) / calls / 1e3
    if kernel <= 0:
        raise ValueError("fn ran no GEMM or attention kernel: a ceiling is undefined")
    others = sorted((e for e in events if e.key not in KERNELS), key=lambda e: -e.self_cpu_time_total)[:5]
    top = tuple((e.key, e.self_cpu_time_total / calls / 1e3) for e in others)
    return Ceiling(statistics.median(times) * 1e3, kernel, top)


def _cases() -> dict[str, tuple[Callable[[], Any], Callable[[], Any], str]]:
    """name -> (our fwd+bwd, peer fwd+bwd, target) for the benches whose targets are not met."""
    from paperzoo.bench import encoder as enc
    from paperzoo.bench import funnel as fun
    from paperzoo.bench import swin as sw
    from paperzoo.bench import switch as swt

    cases = {}
    hf, ours = enc.build_pair()
    for seq in (128, 512):
        fwd_o, fwd_p = enc._cases(hf, ours, 8, seq)["stack"]
        grad = torch.randn(8, seq, hf.config.hidden_size)
        cases[f"encoder stack, 8 x {seq}"] = (enc._train_step(fwd_o, [ours], grad),
                                              enc._train_step(fwd_p, [hf], grad), ">= 1.1x")
    for blocks, batch, seq in fun.CONFIGS:
        hf_f, ours_f = fun.build_pair(blocks)
        _, _, step_o, step_p = fun._fns(hf_f, ours_f, fun.inputs(batch, seq, fun.VOCAB))
        cases[f"funnel {blocks}, {batch} x {seq}"] = (step_o, step_p, ">= 1.2x")
    for name, cfg in sw.CASES.items():
        hf_s, ours_s = sw._pair(cfg)
        hf_s.train(), ours_s.train()
        x = torch.randn(8, 3, cfg["image_size"], cfg["image_size"])

        def step(m, x=x):
            def f():
                m.zero_grad(set_to_none=True)
                m(pixel_values=x).last_hidden_state.square().mean().backward()
            return f
        cases[f"swin {name}"] = (step(ours_s), step(hf_s), ">= 1.2x")
    from paperzoo.nn.ffn import FeedForward
    from paperzoo.nn.moe import SwitchMoE

    torch.manual_seed(0)
    x, g = torch.randn(swt.BATCH, swt.SEQ, swt.D), torch.randn(swt.BATCH, swt.SEQ, swt.D)
    moe = SwitchMoE(swt.D, swt.HIDDEN, 8, capacity_factor=1.0, jitter_eps=0.0).train()
    dense = FeedForward(swt.D, swt.HIDDEN, "relu", bias=False).train()
    cases["switch 8 experts cf 1.0 vs dense FFN"] = (swt._fwd_bwd(moe, x, g), swt._fwd_bwd(dense, x, g),
                                                     ">= 0.8x (overhead <= 25%)")
    return cases


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="write a markdown table here")
    ap.add_argument("--calls", type=int, default=5)
    args = ap.parse_args(argv)
    rows = ["| case | target | ours ms (kernels) | peer ms (kernels) | ratio | ceiling | with our kernels | "
            "largest other peer ops (ms) |", "|---|---|---|---|---|---|---|---|"]
    for name, (ours_fn, peer_fn, target) in _cases().items():
        o, p = kernel_ceiling(ours_fn, args.calls), kernel_ceiling(peer_fn, args.calls)
        top = ", ".join(f"{k.removeprefix('aten::')} {v:.1f}" for k, v in p.top[:3])
        rows.append(f"| {name} | {target} | {o.wall_ms:.1f} ({o.kernel_ms:.1f}) | {p.wall_ms:.1f} ({p.kernel_ms:.1f}) "
                    f"| {p.wall_ms / o.wall_ms:.2f}x | {p.ceiling:.2f}x | {p.wall_ms / o.kernel_ms:.2f}x | {top} |")
        print(rows[-1], flush=True)
    if args.out:
        from paperzoo.bench.results import bench_meta

        meta = bench_meta("ceiling", "python -m paperzoo.bench.ceiling")
        head = (f"# ceilings\n\n- command: `{meta['command']}`\n- date: {meta['date']}, commit {meta['git_commit']}\n"
                f"- torch {torch.__version__} with {torch.get_num_threads()} threads, load average "
                f"{meta['load_average']}\n\n")
        notes = ("\nratio = peer / ours (measured here, wall medians of a few calls). ceiling = peer wall / peer "
                 "time in GEMM and attention kernels: the ratio ours would reach if it spent no time outside the "
                 "kernels the peer also runs (an upper bound). with our kernels = peer wall / our kernel time: the "
                 "best ratio with our current kernel choice.\n")
        args.out.write_text(head + "\n".join(rows) + "\n" + notes)


if __name__ == "__main__":
    main()
