"""``paperzoo bench switch``: the Switch MoE layer, forward + backward, against HF and a FLOP-matched dense FFN.

Cases: 8 x 128 tokens; d_model 256 / d_ff 1024 at 8 / 32 / 128 experts, and the realistic widths d 512 / 2048 and
d 768 / 3072 at 8 and 32 experts (vs dense only).

* vs ``transformers`` ``SwitchTransformersSparseMLP`` with the same weights and the same semantics (d 256 only): HF
  routes each sequence as a group with a fixed capacity, so ours runs converted from it (``route_per_sequence``,
  capacity ``floor(1.25 * 128 / E)``); outputs are checked equal (in fp32) before timing. Training mode, jitter and
  dropout 0.
* vs a dense FFN (d -> d_ff -> d, ReLU, no bias: the FLOPs per token of one expert): ours with the whole batch
  as one routing group at capacity factor 1.0 (the expert matmuls then do exactly the dense FLOPs, so the
  difference is the routing overhead: router, softmax, positions, gathers, gate, aux losses) and at the paper's
  training factor 1.25 (25 % more expert FLOPs by construction, d 256 only). ``overhead = ours / dense - 1``.
* at 8 experts, the expert matmuls alone on an already dispatched buffer vs the dense FFN: the part of the overhead
  no routing code can remove (8 GEMMs of T/8 rows and 8x the weight gradients instead of one GEMM of T rows).
* every vs-dense row carries ``floor_overhead``: the memory-traffic floor of that overhead. E experts hold E times
  the dense FFN's ``2 d d_ff`` weights, and each step must read them in the forward, read them again for the input
  gradient and write their gradient; under bf16 autocast also cast them to bf16 and the bf16 gradient back to fp32.
  So an MoE step moves at least ``(E - 1) * 2 d d_ff * b`` more bytes than the dense one, ``b`` = 12 bytes per
  weight in fp32 (4 + 4 + 4) and 18 in bf16 (cast 4 + 2, forward 2, input gradient 2, weight gradient 2, its cast
  2 + 4); ``floor_overhead`` = those bytes / the measured memory bandwidth / the dense step's time. At 32 experts,
  where that traffic dominates, the target is the overhead beyond this floor (``overhead - floor_overhead``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from paperzoo.bench.precision import autocast, current, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops, memory_bandwidth_gbs

D, HIDDEN, BATCH, SEQ = 256, 1024, 8, 128
EXPERTS = (8, 32, 128)
WIDE = ((512, 2048), (768, 3072))  # realistic widths: vs dense at 8 and 32 experts
WIDE_EXPERTS = (8, 32)
BYTES_PER_WEIGHT = {"fp32": 12, "bf16": 18}  # extra traffic per expert weight per step (see the module doc)


def _fwd_bwd(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor):
    def run() -> None:
        xx = x.detach().requires_grad_(True)
        with autocast():
            y = module(xx)
            y = y[0] if isinstance(y, tuple) else y
        y.backward(g.to(y.dtype))
        module.zero_grad(set_to_none=True)
    return run


def floor_overhead(experts: int, dim: int, ffn_dim: int, dense_ms: float, bandwidth_gbs: float,
                   precision: str = "fp32") -> float:
    """The memory-traffic floor of the MoE step's overhead over the dense step (see the module doc):
    ``(E - 1) * 2 * d * d_ff * bytes_per_weight / bandwidth / dense time``."""
    if precision not in BYTES_PER_WEIGHT:
        raise ValueError(f"precision must be one of {tuple(BYTES_PER_WEIGHT)}, got {precision!r}")
    if experts < 1 or dense_ms <= 0 or bandwidth_gbs <= 0:
        raise ValueError(f"experts >= 1, dense_ms > 0 and bandwidth_gbs > 0 expected, got {experts}, {dense_ms}, "
                         f"{bandwidth_gbs}")
    extra = (experts - 1) * 2 * dim * ffn_dim * BYTES_PER_WEIGHT[precision]
    return extra / (bandwidth_gbs * 1e9) / (dense_ms * 1e-3)


class _Experts(torch.nn.Module):
    """A :class:`SwitchMoE`'s expert computation alone: (E, n, D) -> (E, n, D)."""

    def __init__(self, moe: torch.nn.Module):
        super().__init__()
        self.moe = moe

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.moe.experts(h)


def run(experts: tuple[int, ...] = EXPERTS, repeats: int = 8, warmup: int = 1, threads: int | None = None,
        wide: tuple[tuple[int, int], ...] = WIDE, wide_experts: tuple[int, ...] = WIDE_EXPERTS
        ) -> tuple[list[BenchResult], dict]:
    """Rows: ours vs HF per expert count, ours vs dense per expert count (capacity factor 1.0, and 1.25 at 8),
    then ours vs dense at each ``wide`` (d, d_ff) for ``wide_experts``.

    ``threads`` (default ``$PAPERZOO_BENCH_THREADS``, else torch's default) sets the intra-op threads for the
    run; one thread gives steadier figures on a shared, loaded machine.
    """
    threads = threads or int(os.environ.get("PAPERZOO_BENCH_THREADS", "0")) or None
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        rows, meta = _run(experts, repeats, warmup, wide, wide_experts)
        meta["peak_gflops"] = peak_gflops()  # at the thread count the rows ran with
        return rows, meta
    finally:
        torch.set_num_threads(before)


def _vs_dense(E: int, dim: int, ffn: int, x, g, dense, dense_flops: int, cfs: tuple[float, ...], repeats: int,
              warmup: int, bandwidth: float, extra: dict[str, Any]) -> list[BenchResult]:
    from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

    rows = []
    case = f"{BATCH}x{SEQ} tokens, d {dim}, d_ff {ffn}, fwd+bwd, batch-wide routing"
    tag = "" if (dim, ffn) == (D, HIDDEN) else f"_d{dim}"
    for cf in cfs:
        torch.manual_seed(0)
        moe = SwitchMoE(SwitchMoEConfig(dim=dim, ffn_dim=ffn, num_experts=E, capacity_factor=cf,
                                        jitter_eps=0.0)).train()
        stats = time_interleaved({"ours": _fwd_bwd(moe, x, g), "dense FFN": _fwd_bwd(dense, x, g)},
                                 warmup=warmup, repeats=repeats)
        name = f"switch vs dense, {E} experts, cf {cf}" + (f", d {dim}" if tag else "")
        row = BenchResult.from_stats(name, case, stats, flops=dense_flops, experts=E, capacity_factor=cf, dim=dim,
                                     ffn_dim=ffn)
        row.extra["overhead"] = row.ours_ms / row.peer_ms - 1
        row.extra["floor_overhead"] = floor_overhead(E, dim, ffn, row.peer_ms, bandwidth, current().used)
        extra[f"overhead_{E}_cf{cf}{tag}"] = row.extra["overhead"]
        rows.append(row)
        del moe
    return rows


def _run(experts: tuple[int, ...], repeats: int, warmup: int, wide: tuple[tuple[int, int], ...],
         wide_experts: tuple[int, ...]) -> tuple[list[BenchResult], dict]:
    from transformers import SwitchTransformersConfig
    from transformers.models.switch_transformers.modeling_switch_transformers import SwitchTransformersSparseMLP

    from paperzoo.nn.ffn import FeedForward
    from paperzoo.papers.switch.hf import from_hf
    from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, D)
    g = torch.randn(BATCH, SEQ, D)
    dense = FeedForward(D, HIDDEN, "relu", bias=False).train()
    dense_flops = count_flops(_fwd_bwd(dense, x, g))
    bandwidth = memory_bandwidth_gbs()
    rows: list[BenchResult] = []
    extra: dict[str, Any] = {"memory_bandwidth_gbs": bandwidth}
    case = f"{BATCH}x{SEQ} tokens, d {D}, d_ff {HIDDEN}, fwd+bwd"
    for E in experts:
        cap = math.floor(1.25 * SEQ / E)
        cfg = SwitchTransformersConfig(d_model=D, d_ff=HIDDEN, num_experts=E, expert_capacity=cap,
                                       router_jitter_noise=0.0, dropout_rate=0.0, dense_act_fn="relu")
        hf = SwitchTransformersSparseMLP(cfg).train()
        ours = from_hf(hf).train()
        with torch.no_grad():  # the semantics check, in fp32 whatever the pass
            err = (ours(x).hidden_states - hf(x.clone())).abs().max().item()
        if err > 1e-4:
            raise RuntimeError(f"ours and HF disagree by {err} at {E} experts; not timing different functions")
        stats = time_interleaved({"ours": _fwd_bwd(ours, x, g), "transformers": _fwd_bwd(hf, x, g)},
                                 warmup=warmup, repeats=repeats if E <= 32 else max(3, repeats // 2))
        rows.append(BenchResult.from_stats(f"switch vs HF, {E} experts", f"{case}, capacity {cap}/sequence", stats,
                                           flops=count_flops(_fwd_bwd(ours, x, g)), experts=E, max_abs_diff=err,
                                           identical_math=True))
        rows += _vs_dense(E, D, HIDDEN, x, g, dense, dense_flops, (1.0, 1.25) if E == 8 else (1.0,), repeats, warmup,
                          bandwidth, extra)
        if E == 8:
            # The floor under any routing: the same layer's expert matmuls alone on an already dispatched
            # (E, T/E, D) buffer (no router, gathers, gate or losses) against the dense FFN.
            moe = SwitchMoE(SwitchMoEConfig(dim=D, ffn_dim=HIDDEN, num_experts=E, jitter_eps=0.0)).train()
            buf, gbuf = x.reshape(E, -1, D), g.reshape(E, -1, D)
            stats = time_interleaved({"ours": _fwd_bwd(_Experts(moe), buf, gbuf), "dense FFN": _fwd_bwd(dense, x, g)},
                                     warmup=warmup, repeats=repeats)
            row = BenchResult.from_stats(f"switch expert matmuls only vs dense, {E} experts",
                                         f"{case}, {E} x {BATCH * SEQ // E} dispatched rows, no routing", stats,
                                         flops=dense_flops, experts=E)
            row.extra["overhead"] = row.ours_ms / row.peer_ms - 1
            extra[f"overhead_{E}_experts_only"] = row.extra["overhead"]
            rows.append(row)
    for dim, ffn in wide:
        torch.manual_seed(0)
        xw, gw = torch.randn(BATCH, SEQ, dim), torch.randn(BATCH, SEQ, dim)
        dense_w = FeedForward(dim, ffn, "relu", bias=False).train()
        flops_w = count_flops(_fwd_bwd(dense_w, xw, gw))
        for E in wide_experts:
            rows += _vs_dense(E, dim, ffn, xw, gw, dense_w, flops_w, (1.0,), max(3, repeats // 2), warmup, bandwidth,
                              extra)
    meta = {"threads": torch.get_num_threads(), "targets": "faster than HF at 8/32/128 experts; overhead vs dense "
            "<= 25% at 8 experts at d 512 / 2048 and d 768 / 3072; at 32 experts, overhead beyond the "
            "memory-traffic floor <= 25%", **extra,
            "notes": "flops of the vs-dense rows are the dense FFN's (useful FLOPs); of the vs-HF rows, ours counted "
                     "(capacity padding included). overhead = ours / dense - 1; floor_overhead = the extra weight "
                     "traffic of E experts / measured memory bandwidth / dense time (module doc)."}
    return rows, meta
