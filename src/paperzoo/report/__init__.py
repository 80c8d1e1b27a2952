"""Reports: run folders, confidence intervals over seeds, verdicts, plots, ``report.md`` and the runs index.

A recipe typically does::

    run_dir = new_run_dir("electra", out)
    write_config(run_dir, config)
    ...  # train each seed; the engine writes run_dir/metrics.jsonl
    cmp = compare(ours_per_seed, baseline_per_seed, higher_is_better=True)
    write_result(run_dir, "electra", "ELECTRA-Small beats BERT-Small on GLUE", {"glue": ours_per_seed},
                 verdict_from(cmp), details={"vs BERT-Small": cmp}, plots=[plot_metrics(run_dir, ...)])
"""

from paperzoo.report.index import build_index
from paperzoo.report.machine import machine_info
from paperzoo.report.plots import plot_bars_with_ci, plot_metrics, read_metrics
from paperzoo.report.result import write_result
from paperzoo.report.run import new_run_dir, runs_root, write_config
from paperzoo.report.stats import CI, VERDICTS, Comparison, compare, mean_ci, t_cdf, t_quantile, verdict_from

__all__ = [
    "CI", "VERDICTS", "Comparison", "build_index", "compare", "machine_info", "mean_ci", "new_run_dir",
    "plot_bars_with_ci", "plot_metrics", "read_metrics", "runs_root", "t_cdf", "t_quantile",
    "verdict_from", "write_config", "write_result",
]
