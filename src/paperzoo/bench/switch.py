"""``paperzoo bench switch``: the Switch MoE layer, forward + backward, against HF and a FLOP-matched dense FFN.

Cases: d_model 256, d_ff 1024, 8 x 128 tokens, 8 / 32 / 128 experts.

* vs ``transformers`` ``SwitchTransformersSparseMLP`` with the same weights and the same semantics: HF routes each
  sequence as a group with a fixed capacity, so ours runs converted from it (``route_per_sequence``, capacity
  ``floor(1.25 * 128 / E)``); outputs are checked equal before timing. Training mode, jitter and dropout 0.
* vs a dense FFN (256 -> 1024 -> 256, ReLU, no bias: the FLOPs per token of one expert): ours with the whole batch
  as one routing group at capacity factor 1.0 (the expert matmuls then do exactly the dense FLOPs, so the
  difference is the routing overhead: router, softmax, positions, gathers, gate, aux losses) and at the paper's
  training factor 1.25 (25 % more expert FLOPs by construction). ``overhead = ours / dense - 1``.
* at 8 experts, the expert matmuls alone on an already dispatched buffer vs the dense FFN: the part of the overhead
  no routing code can remove (8 GEMMs of T/8 rows and 8x the weight gradients instead of one GEMM of T rows).
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops, machine_peak_gflops, time_interleaved

D, HIDDEN, BATCH, SEQ = 256, 1024, 8, 128
EXPERTS = (8, 32, 128)


def _fwd_bwd(module: torch.nn.Module, x: torch.Tensor, g: torch.Tensor):
    def run() -> None:
        xx = x.detach().requires_grad_(True)
        y = module(xx)
        y = y[0] if isinstance(y, tuple) else y
        y.backward(g)
        module.zero_grad(set_to_none=True)
    return run


class _Experts(torch.nn.Module):
    """A :class:`SwitchMoE`'s expert computation alone: (E, n, D) -> (E, n, D)."""

    def __init__(self, moe: torch.nn.Module):
        super().__init__()
        self.moe = moe

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.moe.experts(h)


def run(experts: tuple[int, ...] = EXPERTS, repeats: int = 8, warmup: int = 1,
        threads: int | None = None) -> tuple[list[BenchResult], dict]:
    """Rows: ours vs HF per expert count, ours vs dense per expert count (capacity factor 1.0, and 1.25 at 8).

    ``threads`` (default ``$PAPERZOO_BENCH_THREADS``, else torch's default) sets the intra-op threads for the
    run; one thread gives steadier figures on a shared, loaded machine.
    """
    threads = threads or int(os.environ.get("PAPERZOO_BENCH_THREADS", "0")) or None
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        rows, meta = _run(experts, repeats, warmup)
        meta["peak_gflops"] = machine_peak_gflops()  # at the thread count the rows ran with
        return rows, meta
    finally:
        torch.set_num_threads(before)


def _run(experts: tuple[int, ...], repeats: int, warmup: int) -> tuple[list[BenchResult], dict]:
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
    rows: list[BenchResult] = []
    extra: dict[str, Any] = {}
    case = f"{BATCH}x{SEQ} tokens, d {D}, d_ff {HIDDEN}, fwd+bwd"
    for E in experts:
        cap = math.floor(1.25 * SEQ / E)
        cfg = SwitchTransformersConfig(d_model=D, d_ff=HIDDEN, num_experts=E, expert_capacity=cap,
                                       router_jitter_noise=0.0, dropout_rate=0.0, dense_act_fn="relu")
        hf = SwitchTransformersSparseMLP(cfg).train()
        ours = from_hf(hf).train()
        with torch.no_grad():
            err = (ours(x).hidden_states - hf(x.clone())).abs().max().item()
        if err > 1e-4:
            raise RuntimeError(f"ours and HF disagree by {err} at {E} experts; not timing different functions")
        stats = time_interleaved({"ours": _fwd_bwd(ours, x, g), "transformers": _fwd_bwd(hf, x, g)},
                                 warmup=warmup, repeats=repeats if E <= 32 else max(3, repeats // 2))
        rows.append(BenchResult.from_stats(f"switch vs HF, {E} experts", f"{case}, capacity {cap}/sequence", stats,
                                           flops=count_flops(_fwd_bwd(ours, x, g)), experts=E, max_abs_diff=err))

        for cf in (1.0, 1.25) if E == 8 else (1.0,):
            moe = SwitchMoE(SwitchMoEConfig(dim=D, ffn_dim=HIDDEN, num_experts=E, capacity_factor=cf,
                                          jitter_eps=0.0)).train()
            stats = time_interleaved({"ours": _fwd_bwd(moe, x, g), "dense FFN": _fwd_bwd(dense, x, g)},
                                     warmup=warmup, repeats=repeats)
            row = BenchResult.from_stats(f"switch vs dense, {E} experts, cf {cf}", f"{case}, batch-wide routing",
                                         stats, flops=dense_flops, experts=E, capacity_factor=cf)
            row.extra["overhead"] = row.ours_ms / row.peer_ms - 1
            extra[f"overhead_{E}_cf{cf}"] = row.extra["overhead"]
            rows.append(row)
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
    meta = {"threads": torch.get_num_threads(), "targets": "faster than HF at 8/32/128 experts; overhead vs dense "
            "<= 25% at 8 experts", **extra,
            "notes": "flops of the vs-dense rows are the dense FFN's (useful FLOPs); of the vs-HF rows, ours counted "
                     "(capacity padding included). overhead = ours / dense - 1."}
    return rows, meta
