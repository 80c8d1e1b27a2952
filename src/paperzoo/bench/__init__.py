"""Benchmarks: interleaved timing of ours vs a peer, FLOP counts, the machine's matmul peak, tables and JSON.

A paper's bench function (registered in its ``Paper.benches``) typically does::

    stats = time_interleaved({"ours": lambda: ours(x), "transformers": lambda: hf(x)})
    flops = count_flops(lambda: ours(x))
    return [BenchResult.from_stats("electra-small fwd", "batch 8 x 128", stats, flops=flops)], {}

and ``paperzoo bench NAME`` prints the ratios and writes ``NAME.json`` and ``.md`` into a fresh
``runs/bench/NAME/<stamp>/``; ``--commit`` writes the committed ``benchmarks/NAME.json`` and ``.md`` instead, and
regenerates ``benchmarks/README.md`` (:mod:`paperzoo.bench.summary`).

The runner calls the function once per precision (fp32, then bf16 where it is fast): forwards run under
``paperzoo.bench.precision.autocast()``, timings go through its ``time_interleaved`` and rates are against its
``peak_gflops()`` (see :mod:`paperzoo.bench.precision`).
"""

from paperzoo.bench.results import BenchResult, as_rows, bench_meta, markdown_table, print_table, write_json
from paperzoo.bench.runner import BENCHES, all_benches, run_bench
from paperzoo.measure import (
    Stats,
    best_matmul,
    count_flops,
    cuda_sync,
    machine_peak_gflops,
    matmul_peak_gflops,
    time_interleaved,
)

__all__ = [
    "BENCHES", "BenchResult", "Stats", "all_benches", "as_rows", "bench_meta", "best_matmul", "count_flops",
    "cuda_sync", "machine_peak_gflops", "markdown_table", "matmul_peak_gflops", "print_table", "run_bench",
    "time_interleaved", "write_json",
]
