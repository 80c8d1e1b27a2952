"""How fast can ours be at most, when both sides must run the same matrix products?

A speed target such as "1.2x the peer" is reachable only if the peer spends at least 1/6 of its time outside the
work ours must do too. For models whose weights and FLOPs are fixed (same architecture, same dtype), that work is
the GEMMs and the attention kernels. So the ceiling of ``peer time / our time`` is::

    ceiling = peer wall time / peer time in GEMM and attention kernels     (Amdahl's law, all other work -> 0)

This is an upper bound that ignores the elementwise work (GELU, LayerNorm, softmax, dropout) any implementation
needs, so the reachable ratio is lower. The kernel time comes from ``torch.profiler`` self times; the wall time from
unprofiled calls interleaved with the profiled ones (the profiler inflates elementwise-heavy code more).

``python -m paperzoo.bench.ceiling [--out benchmarks/ceilings.md]`` measures the fwd+bwd cases of the encoder,
Funnel, Swin and Switch benches (run it on a quiet machine).

The same accounting bounds a fraction-of-peak target. A training step doing ``F`` FLOPs in wall time ``T`` runs at
``F / T / peak``; with every non-kernel op taken to zero time it would run at most at::

    peak ceiling = F / (time in GEMM, convolution and attention kernels) / peak

which is the speed of the kernels themselves at the step's shapes. Where that is below the target (say 70%), no
implementation calling these kernels reaches the target at these shapes. ``--peak [--out
benchmarks/peak-ceilings.md]`` measures it for the GEMM-bound training steps of the benches (``gemm_bound`` rows:
the encoder stack, Funnel, Swin-T), in fp32 and in bf16 where the CPU has it fast, against the matmul peak measured
in the same process.
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

__all__ = ["KERNELS", "PEAK_KERNELS", "Ceiling", "kernel_ceiling", "kernel_ceilings", "peak_ceilings"]

# ops whose time is set by FLOPs that any implementation of the same model must do (CPU names; CUDA kernels are
# attributed to these aten ops too)
KERNELS = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_grouped_mm",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention", "aten::_scaled_dot_product_cudnn_attention_backward",
})
# for a fraction of peak: every op whose FLOPs torch.utils.flop_counter counts (convolutions too: Swin's patch
# embedding), so that the FLOPs and the kernel time cover the same ops
PEAK_KERNELS = KERNELS | {"aten::mkldnn_convolution", "aten::convolution_backward", "aten::_convolution",
                          "aten::convolution"}


@dataclass(frozen=True)
class Ceiling:
    """``wall_ms``: median wall time per call, unprofiled; ``kernel_ms``: time per call in :data:`KERNELS` (from
    profiled calls); ``profiled_ms``: mean wall time of those profiled calls (the profiler's overhead shows as
    ``profiled_ms - wall_ms``); ``ceiling = wall_ms / kernel_ms``; ``top``: the largest other ops (name, ms per
    call, profiled)."""

    wall_ms: float
    kernel_ms: float
    top: tuple[tuple[str, float], ...]
    profiled_ms: float

    @property
    def ceiling(self) -> float:
        return self.wall_ms / self.kernel_ms


def kernel_ceilings(fns: dict[str, Callable[[], Any]], calls: int = 5, warmup: int = 2,
                    kernels: frozenset[str] = KERNELS) -> dict[str, Ceiling]:
    """Run ``calls`` rounds; each round times one unprofiled call of every fn, then profiles one more call of every
    fn (A B A' B' ...), and return a :class:`Ceiling` per name (wall: median of the unprofiled calls; kernels:
    mean over the profiled ones). Interleaving both kinds in every round keeps a drifting machine from biasing
    one side or one kind.

    The wall time comes from unprofiled calls because the profiler slows code of many or memory-bound ops far more
    than GEMM-bound code (on the Funnel bench it slowed Hugging Face's step several times more than ours), which
    would inflate the peer's wall time and so the ceiling. Kernels are large ops, which the profiler barely slows.
    ``kernels``: the op names counted as kernel time (default :data:`KERNELS`)."""
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    from torch.profiler import ProfilerActivity, profile

    from paperzoo.measure import cuda_sync

    for _ in range(warmup):
        for fn in fns.values():
            fn()
    cuda_sync()
    wall: dict[str, list[float]] = {k: [] for k in fns}
    profiled = {k: 0.0 for k in fns}
    kernel = {k: 0.0 for k in fns}
    other: dict[str, dict[str, float]] = {k: {} for k in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            cuda_sync()
            wall[name].append(time.perf_counter() - t)
        for name, fn in fns.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                t = time.perf_counter()
                fn()
                cuda_sync()
                profiled[name] += time.perf_counter() - t
            for e in prof.key_averages():
                if e.key in kernels:
                    kernel[name] += e.self_cpu_time_total / 1e3
                else:
                    other[name][e.key] = other[name].get(e.key, 0.0) + e.self_cpu_time_total / 1e3
    out = {}
    for name in fns:
        if kernel[name] <= 0:
            raise ValueError(f"{name!r} ran no GEMM or attention kernel: a ceiling is undefined")
        top = tuple((k, v / calls) for k, v in sorted(other[name].items(), key=lambda kv: -kv[1])[:5])
        out[name] = Ceiling(statistics.median(wall[name]) * 1e3, kernel[name] / calls, top,
                            profiled[name] * 1e3 / calls)
    return out


def kernel_ceiling(fn: Callable[[], Any], calls: int = 5, warmup: int = 2) -> Ceiling:
    """:func:`kernel_ceilings` of one function."""
    return kernel_ceilings({"fn": fn}, calls, warmup)["fn"]


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
    from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

    torch.manual_seed(0)
    x, g = torch.randn(swt.BATCH, swt.SEQ, swt.D), torch.randn(swt.BATCH, swt.SEQ, swt.D)
    moe = SwitchMoE(SwitchMoEConfig(dim=swt.D, ffn_dim=swt.HIDDEN, num_experts=8, capacity_factor=1.0,
                                    jitter_eps=0.0)).train()
    dense = FeedForward(swt.D, swt.HIDDEN, "relu", bias=False).train()
    cases["switch 8 experts cf 1.0 vs dense FFN"] = (swt._fwd_bwd(moe, x, g), swt._fwd_bwd(dense, x, g),
                                                     ">= 0.8x (overhead <= 25%)")
    return cases


def _gemm_bound_steps() -> dict[str, Callable[[], Any]]:
    """name -> our training step, for every ``gemm_bound`` row of the encoder, Funnel and Swin benches, built in
    the running precision pass (:mod:`paperzoo.bench.precision`: each step autocasts when it runs)."""
    from paperzoo.bench import encoder as enc
    from paperzoo.bench import funnel as fun
    from paperzoo.bench import swin as sw
    from paperzoo.bench.precision import autocast

    steps = {}
    hf, ours = enc.build_pair()
    for seq in (128, 512):
        fwd_o, _ = enc._cases(hf, ours, 8, seq)["stack"]
        steps[f"encoder stack fwd+bwd, 8 x {seq}"] = enc._train_step(fwd_o, [ours], torch.randn(8, seq, enc.DIM))
    for blocks, batch, seq in fun.CONFIGS:
        for hf_class in fun.MODELS:
            hf_f, ours_f = fun.build_pair(blocks, hf_class)
            steps[f"funnel {hf_class} {blocks} fwd+bwd, {batch} x {seq}"] = fun._fns(
                hf_f, ours_f, fun.inputs(batch, seq, fun.VOCAB))[2]
    _, ours_s = sw._pair(sw.CASES["swin-t 224x224"])
    ours_s.train()
    x = torch.randn(8, 3, 224, 224)

    def swin_step():
        ours_s.zero_grad(set_to_none=True)
        with autocast():
            loss = ours_s(pixel_values=x).last_hidden_state.float().square().mean()
        loss.backward()
    steps["swin swin-t fwd+bwd, 8 x 224x224"] = swin_step
    return steps


def peak_ceilings(steps: dict[str, Callable[[], Any]], calls: int = 5) -> list[dict[str, Any]]:
    """Per step, in the running precision pass: FLOPs, wall and kernel ms (:func:`kernel_ceilings` over
    :data:`PEAK_KERNELS`), the matmul peak, the fraction of peak reached and its ceiling (FLOPs over kernel time)."""
    from paperzoo.bench.precision import current, peak_gflops
    from paperzoo.measure import count_flops

    peak = peak_gflops()
    res = kernel_ceilings(steps, calls, kernels=PEAK_KERNELS)
    rows = []
    for name, step in steps.items():
        flops, c = count_flops(step), res[name]
        rows.append({"case": name, "precision": current().used, "flops": flops, "wall_ms": c.wall_ms,
                     "kernel_ms": c.kernel_ms, "peak_gflops": peak,
                     "fraction_of_peak": flops / (c.wall_ms * 1e-3) / (peak * 1e9),
                     "peak_ceiling": flops / (c.kernel_ms * 1e-3) / (peak * 1e9),
                     "top_other": c.top[:3]})
    return rows


def _peak_main(out: Path | None, calls: int) -> None:
    from paperzoo.bench.precision import passes, using
    from paperzoo.bench.results import bench_meta

    rows = ["| case | precision | GFLOP | wall ms (kernels) | % peak | kernels' % peak (ceiling) | 70% reachable "
            "| largest other ops (ms, profiled) |", "|---|---|---|---|---|---|---|---|"]
    skipped = []
    for name, prec, reason in passes("all"):
        if prec is None:
            skipped.append(reason)
            continue
        with using(prec):
            for r in peak_ceilings(_gemm_bound_steps(), calls):
                top = ", ".join(f"{k.removeprefix('aten::')} {v:.1f}" for k, v in r["top_other"])
                rows.append(f"| {r['case']} | {name} | {r['flops'] / 1e9:.1f} | {r['wall_ms']:.1f} "
                            f"({r['kernel_ms']:.1f}) | {100 * r['fraction_of_peak']:.0f}% | "
                            f"{100 * r['peak_ceiling']:.0f}% of {r['peak_gflops']:.0f} GFLOP/s | "
                            f"{'yes' if r['peak_ceiling'] >= 0.7 else '**no**'} | {top} |")
                print(rows[-1], flush=True)
    if out:
        meta = bench_meta("ceiling", "python -m paperzoo.bench.ceiling --peak --out " + str(out))
        head = (f"# peak ceilings of the GEMM-bound training steps\n\n- command: `{meta['command']}`\n"
                f"- date: {meta['date']}, commit {meta['git_commit']}\n- torch {torch.__version__} with "
                f"{torch.get_num_threads()} threads, load average {meta['load_average']}\n\n")
        notes = ("\n% peak = the step's FLOPs (torch.utils.flop_counter) / its median unprofiled wall time / the "
                 "matmul peak of its precision measured in this process. kernels' % peak = the same FLOPs / the "
                 "time in GEMM, convolution and attention kernels (profiled self time): the fraction of peak the "
                 "step would reach if every other op took no time, an upper bound for any implementation calling "
                 "these kernels at these shapes. 70% reachable: whether that bound is at least the target.\n"
                 + "".join(f"\n- {s}" for s in skipped))
        out.write_text(head + "\n".join(rows) + "\n" + notes + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="write a markdown table here")
    ap.add_argument("--calls", type=int, default=6, help="rounds: one unprofiled and one profiled call per side each")
    ap.add_argument("--peak", action="store_true", help="the fraction-of-peak ceilings of the GEMM-bound steps")
    args = ap.parse_args(argv)
    if args.peak:
        return _peak_main(args.out, args.calls)
    rows = ["| case | target | ours ms (kernels; profiled) | peer ms (kernels; profiled) | ratio | ceiling | "
            "with our kernels | largest other peer ops (ms, profiled) |", "|---|---|---|---|---|---|---|---|"]
    for name, (ours_fn, peer_fn, target) in _cases().items():
        res = kernel_ceilings({"ours": ours_fn, "peer": peer_fn}, args.calls)
        o, p = res["ours"], res["peer"]
        top = ", ".join(f"{k.removeprefix('aten::')} {v:.1f}" for k, v in p.top[:3])
        rows.append(f"| {name} | {target} | {o.wall_ms:.1f} ({o.kernel_ms:.1f}; {o.profiled_ms:.1f}) | "
                    f"{p.wall_ms:.1f} ({p.kernel_ms:.1f}; {p.profiled_ms:.1f}) | {p.wall_ms / o.wall_ms:.2f}x | "
                    f"{p.ceiling:.2f}x | {p.wall_ms / o.kernel_ms:.2f}x | {top} |")
        print(rows[-1], flush=True)
    if args.out:
        from paperzoo.bench.results import bench_meta

        meta = bench_meta("ceiling", "python -m paperzoo.bench.ceiling")
        head = (f"# ceilings\n\n- command: `{meta['command']}`\n- date: {meta['date']}, commit {meta['git_commit']}\n"
                f"- torch {torch.__version__} with {torch.get_num_threads()} threads, load average "
                f"{meta['load_average']}\n\n")
        notes = ("\nratio = peer / ours (median wall time of unprofiled calls, interleaved with the profiled ones). "
                 "ceiling = "
                 "peer wall / peer time in GEMM and attention kernels: the ratio ours would reach if it spent no "
                 "time outside the kernels the peer also runs (an upper bound). with our kernels = peer wall / our "
                 "kernel time: the best ratio with our current kernel choice.\n")
        args.out.write_text(head + "\n".join(rows) + "\n" + notes)


if __name__ == "__main__":
    main()
