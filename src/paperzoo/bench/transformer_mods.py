"""``paperzoo bench transformer-mods``: one training step (forward + backward) of each variant of the small grid
against the dense baseline, interleaved in one process, at the ``small`` preset's size and batch.

Each row: the variant (ours) vs ``vanilla`` (peer) on the same batch of 32 x 64 tokens, in each precision of the
bench's passes (fp32, then bf16 autocast where the CPU computes it fast: the recipe's ``auto``); FLOPs counted by
``count_flops`` on the variant's step, the fraction of the measured matmul peak of that precision, and the measured
steps/s. GLU variants are matched to the baseline's parameters, so their FLOPs per token match too; the Switch row
has the dense FLOPs per token (each expert the dense FFN's size) plus the router, with twice the parameters: its
ratio is the cost of routing. ``ratio`` = baseline time / variant time (> 1: the variant is faster).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from paperzoo.bench import precision
from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops

VARIANTS = ("gelu", "swiglu", "geglu", "reglu", "glu", "rmsnorm", "rezero", "rezero_layernorm", "fixup",
            "deep_narrow", "block_sharing", "switch", "pos_rotary", "pos_learned_concat")
BATCH, VOCAB = 32, 4096


def run(variants: tuple[str, ...] = VARIANTS, repeats: int = 12, warmup: int = 3, threads: int | None = None,
        size: str = "small", batch: int = BATCH) -> tuple[list[BenchResult], dict[str, Any]]:
    """Rows: each variant's training step vs the baseline's, at the ``size`` preset's model (tests: ``tiny``).
    ``threads`` (default ``$PAPERZOO_BENCH_THREADS``, else torch's default) sets the intra-op threads."""
    from paperzoo.papers.transformer_mods.grid import build_configs, load_grid
    from paperzoo.papers.transformer_mods.model import ModsConfig, ModsLM
    from paperzoo.papers.transformer_mods.recipe import loss_fn

    threads = threads or int(os.environ.get("PAPERZOO_BENCH_THREADS", "0")) or None
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        grid = load_grid()
        names = grid.select(variants)
        base = ModsConfig.preset(size, vocab_size=VOCAB)
        cfgs = build_configs(grid, base, names)
        prec = precision.current()
        peak = peak_gflops()
        x = torch.randint(5, VOCAB, (batch, base.max_len), generator=torch.Generator().manual_seed(0))
        models = {}
        for n in names:
            torch.manual_seed(0)
            models[n] = ModsLM(cfgs[n]).train()

        def step(m):
            def go() -> None:
                with autocast():
                    loss = loss_fn(m, x)[0]
                loss.backward()
                m.zero_grad(set_to_none=True)
            return go

        flops = {n: count_flops(step(m)) for n, m in models.items()}
        rows = []
        tokens = batch * base.max_len
        for n in names[1:]:
            stats = time_interleaved({n: step(models[n]), grid.baseline: step(models[grid.baseline])},
                                     warmup=warmup, repeats=repeats)
            row = BenchResult.from_stats(f"{n} vs {grid.baseline}", f"train step, {batch}x{base.max_len} tokens, "
                                         f"d {base.dim}, {prec.used}", stats, flops=flops[n], peak_gflops=peak)
            row.extra.update(params=models[n].num_parameters(), flops_per_token=flops[n] / tokens,
                             baseline_flops_per_token=flops[grid.baseline] / tokens, steps_per_s=1e3 / row.ours_ms,
                             baseline_steps_per_s=1e3 / row.peer_ms,
                             baseline_fraction_of_peak=flops[grid.baseline] / (row.peer_ms * 1e-3) / 1e9 / peak)
            rows.append(row)
        meta = {"threads": torch.get_num_threads(), "precision": prec.to_dict(), "peak_gflops": peak,
                "baseline_params": models[grid.baseline].num_parameters(),
                "notes": "ours = the variant, peer = the vanilla baseline on the same batch; FLOPs counted per "
                         "variant; % peak against the measured matmul peak of the precision used."}
        return rows, meta
    finally:
        torch.set_num_threads(before)
