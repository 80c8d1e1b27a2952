"""``paperzoo bench perceiver``: (a) cost vs input length, Perceiver vs a transformer encoder of similar size;
(b) forward+backward against Hugging Face ``PerceiverForMaskedLM`` with the same weights.

(a) Both models read ``M`` input elements of ``C = 32`` channels (batch 1, training mode, cross-entropy on a
mean-pooled classifier) for ``M = 1k .. 64k``. Perceiver: 128 latents x 128, one cross-attend (1 head, qk = C),
4 latent self-attention layers (8 heads, MLP widening 4). Transformer: Linear(C, 128) then 4 pre-norm layers
(dim 128, 8 heads, FFN 512) over all ``M`` tokens, same classifier; about the same parameter count. The
transformer stops once its projected next step (quadratic extrapolation) would exceed a time budget
(``PAPERZOO_PERCEIVER_BUDGET_S``, default 120 s per fwd+bwd). Peak memory is the rise of the process's maximum
resident set during one fwd+bwd, measured in a fresh subprocess per case (``PAPERZOO_BENCH_MEMORY=0`` skips it).
Slopes are least-squares fits of log time on log M, from the best of the repeats (the machine is shared; medians
are in the meta too); FLOP slopes over 4k..64k for both models (counted on the meta device, no compute) give the
load-independent cost curve.

(b) bytes, 64 latents x 256, 4 self-attention layers, seq 2048, batch 8, byte width d_model 256 (HF's default
768 is selectable), HF's other defaults (8 cross-attention heads, qk width from the input), dropout 0, training
mode. Rows: the full model with logits
at all 2048 positions (the same computation on both sides), and the MLM training step with 15% of positions
labelled, where ours decodes only the labelled bytes (``decode_labelled_only``: exact, same loss) while HF
decodes all of them.
"""

from __future__ import annotations

import math
import os
import resource
import subprocess
import sys
from typing import Any

import torch
from torch import nn

from paperzoo.bench import precision
from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops, loglog_slope

__all__ = ["run", "scaling", "vs_hf", "build_scaling_models"]

LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768, 65536)
CHANNELS, DIM, DEPTH, HEADS, LATENTS = 32, 128, 4, 8, 128


class TransformerClassifier(nn.Module):
    """Linear(C, dim) -> TransformerEncoder (pre-norm) -> mean -> LayerNorm -> Linear: the quadratic baseline."""

    def __init__(self, in_dim: int, dim: int, depth: int, heads: int, ffn: int, num_classes: int = 10):
        super().__init__()
        from paperzoo.nn.transformer import TransformerConfig, TransformerEncoder

        self.proj = nn.Linear(in_dim, dim)
        self.encoder = TransformerEncoder(TransformerConfig(dim=dim, num_layers=depth, num_heads=heads, ffn_dim=ffn,
                                                            prenorm=True, final_norm=False))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.encoder(self.proj(x)).last_hidden_state.mean(1)))


def build_scaling_models(seed: int = 0) -> dict[str, nn.Module]:
    """{"perceiver": ..., "transformer": ...} for part (a), training mode."""
    from paperzoo.papers.perceiver.model import Perceiver, PerceiverConfig

    torch.manual_seed(seed)
    cfg = PerceiverConfig(input="features", input_shape=(1,), input_dim=CHANNELS, position="none", output="mean",
                          num_latents=LATENTS, latent_dim=DIM, scheme="io", num_blocks=1, self_per_block=DEPTH,
                          self_heads=HEADS, self_widening=4, cross_heads=1)
    perceiver = Perceiver(cfg)
    transformer = TransformerClassifier(CHANNELS, DIM, DEPTH, HEADS, 4 * DIM)
    return {"perceiver": perceiver.train(), "transformer": transformer.train()}


def _step(kind: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    def step():
        model.zero_grad(set_to_none=True)
        with autocast():
            logits = model(x).logits if kind == "perceiver" else model(x)
            loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
    return step


def _data(m: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, m, CHANNELS, generator=g), torch.randint(0, 10, (1,), generator=g)


def _peak_child(kind: str, m: int, used: str = "fp32") -> None:
    """In a fresh process: print the rise of max RSS (MiB) over one fwd+bwd of ``kind`` at length ``m`` in
    precision ``used``."""
    from paperzoo.train.precision import Precision

    torch.set_num_threads(int(os.environ.get("PAPERZOO_BENCH_THREADS", torch.get_num_threads())))
    model = build_scaling_models()[kind]
    x, y = _data(m)
    before = _hwm_kib()
    with precision.using(Precision(used, used, "the parent's pass")):
        _step(kind, model, x, y)()
    print((_hwm_kib() - before) / 1024.0)


def _hwm_kib() -> float:
    """This process's peak RSS in KiB: VmHWM from /proc (reset by exec, unlike ru_maxrss, which a child inherits
    from the process that forked it), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1])
    except OSError:
        pass
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def peak_memory_mib(kind: str, m: int, timeout: float = 600.0) -> float | None:
    """Peak-RSS rise of one fwd+bwd, measured in a subprocess (None if it failed, e.g. out of memory)."""
    code = (f"from paperzoo.bench.perceiver import _peak_child; "
            f"_peak_child({kind!r}, {m}, {precision.current().used!r})")
    env = {**os.environ, "PAPERZOO_BENCH_THREADS": str(torch.get_num_threads())}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    return float(out.stdout.strip().splitlines()[-1])


def _slope(lengths, values) -> float:
    """:func:`paperzoo.measure.loglog_slope`, or nan when fewer than two points were measured."""
    return loglog_slope(lengths, values) if len(lengths) >= 2 else math.nan


def flop_scaling(lengths=LENGTHS) -> dict[str, Any]:
    """fwd+bwd FLOPs of both models at every length, counted on the meta device (no compute, so also where the
    transformer was too slow to time), with their log-log slopes over 4k..64k: the load-independent cost curve."""
    models = {k: m.to("meta") for k, m in build_scaling_models().items()}
    flops: dict[str, dict[int, int]] = {k: {} for k in models}
    for m in lengths:
        x = torch.zeros(1, m, CHANNELS, device="meta")
        y = torch.zeros(1, dtype=torch.long, device="meta")
        for k, model in models.items():
            flops[k][m] = count_flops(_step(k, model, x, y))
    big = [m for m in lengths if 4096 <= m <= 65536]
    return {"flops": flops, **{f"{k}_flop_slope_4k_64k": _slope(big, [flops[k][m] for m in big])
                               for k in models}}


def scaling(lengths=LENGTHS, repeats: int | None = None, budget_s: float | None = None,
            memory: bool | None = None, peak: float | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Part (a): rows per length, ``ours`` = Perceiver, peer = transformer (absent where it was stopped)."""
    repeats = repeats or int(os.environ.get("PAPERZOO_BENCH_REPEATS", "3"))
    budget_s = budget_s or float(os.environ.get("PAPERZOO_PERCEIVER_BUDGET_S", "120"))
    memory = memory if memory is not None else os.environ.get("PAPERZOO_BENCH_MEMORY", "1") != "0"
    models = build_scaling_models()
    n_params = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
    rows, stopped_at, last_t, prev = [], None, 0.0, 1
    times, best = {"perceiver": {}, "transformer": {}}, {"perceiver": {}, "transformer": {}}
    for m in lengths:
        x, y = _data(m)
        steps = {k: _step(k, models[k], x, y) for k in models}
        run_tf = stopped_at is None and (last_t == 0.0 or last_t * (m / prev) ** 2 <= budget_s)
        if not run_tf and stopped_at is None:
            stopped_at = m
        fns = {"perceiver": steps["perceiver"], **({"transformer": steps["transformer"]} if run_tf else {})}
        slow = last_t > 5.0 and run_tf
        stats = time_interleaved(fns, warmup=0 if slow else 1, repeats=2 if slow else repeats)
        extra: dict[str, Any] = {"length": m, "perceiver_min_ms": stats["perceiver"].min * 1e3}
        for k in fns:  # (a bf16 pass also re-timed the Perceiver in fp32: in the row, not here)
            times[k][m] = stats[k].median
            best[k][m] = stats[k].min
        if run_tf:
            last_t, prev = stats["transformer"].min, m
            extra["transformer_min_ms"] = stats["transformer"].min * 1e3
            if m <= 4096:
                extra["transformer_flops"] = count_flops(steps["transformer"])
        if memory:
            extra["perceiver_peak_mib"] = peak_memory_mib("perceiver", m)
            if run_tf:
                extra["transformer_peak_mib"] = peak_memory_mib("transformer", m)
        rows.append(BenchResult.from_stats("scaling fwd+bwd (perceiver vs transformer)", f"M={m}, C={CHANNELS}",
                                           stats, flops=count_flops(steps["perceiver"]), peak_gflops=peak,
                                           **extra))
    p_range = [m for m in times["perceiver"] if 4096 <= m <= 65536]
    t_range = [m for m in times["transformer"] if m >= 2048]
    meta = {
        "params": n_params,
        "slopes_from": "best-of-repeats times (robust to other jobs on a shared machine); *_median from medians",
        "perceiver_slope_4k_64k": _slope(p_range, [best["perceiver"][m] for m in p_range]),
        "transformer_slope": _slope(t_range, [best["transformer"][m] for m in t_range]),
        "perceiver_slope_4k_64k_median": _slope(p_range, [times["perceiver"][m] for m in p_range]),
        "transformer_slope_median": _slope(t_range, [times["transformer"][m] for m in t_range]),
        "transformer_slope_range": [min(t_range), max(t_range)] if t_range else None,
        "perceiver_slope_all": _slope(list(times["perceiver"]), list(times["perceiver"].values())),
        "transformer_stopped_at": stopped_at,
        **flop_scaling(lengths),
        "transformer_budget_s": budget_s,
        "median_s": times,
        "best_s": best,
    }
    return rows, meta


def build_hf_pair(seed: int = 0, d_model: int = 768):
    """(HF PerceiverForMaskedLM, ours converted) for part (b): bytes, 64 latents x 256, 4 self-attention layers."""
    import transformers

    from paperzoo.hf import from_hf

    torch.manual_seed(seed)
    cfg = transformers.PerceiverConfig(num_latents=64, d_latents=256, d_model=d_model, num_blocks=1,
                                       num_self_attends_per_block=4, max_position_embeddings=2048,
                                       attention_probs_dropout_prob=0.0)
    hf = transformers.PerceiverForMaskedLM(cfg).train()
    return hf, from_hf(hf).train()


def vs_hf(batch: int = 8, seq: int = 2048, repeats: int | None = None, d_model: int | None = None,
          peak: float | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Part (b): ours vs HF PerceiverForMaskedLM, fwd+bwd, same weights."""
    repeats = repeats or int(os.environ.get("PAPERZOO_BENCH_REPEATS", "3"))
    d_model = d_model or int(os.environ.get("PAPERZOO_PERCEIVER_D_MODEL", "256"))
    hf, ours = build_hf_pair(d_model=d_model)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 262, (batch, seq), generator=g)
    labels = torch.where(torch.rand(batch, seq, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    mask = torch.ones(batch, seq, dtype=torch.long)

    def train_step(model, **kw):
        def step():
            model.zero_grad(set_to_none=True)
            with autocast():
                loss = model(inputs=ids, attention_mask=mask, labels=labels, **kw).loss
            loss.backward()
        return step

    with torch.no_grad():
        l_hf = hf(inputs=ids, attention_mask=mask, labels=labels)
        l_ours = ours(inputs=ids, attention_mask=mask, labels=labels)
        l_sparse = ours(inputs=ids, attention_mask=mask, labels=labels, decode_labelled_only=True)
    checks = {"logits_max_abs_diff": float((l_hf.logits - l_ours.logits).abs().max()),
              "loss_abs_diff_full": abs(float(l_hf.loss - l_ours.loss)),
              "loss_abs_diff_labelled_only": abs(float(l_hf.loss - l_sparse.loss))}
    del l_hf, l_ours, l_sparse
    rows = []
    case = f"bytes, batch {batch} x seq {seq}, 64 latents x 256, 4 self-attn layers, d_model {d_model}"
    for name, kw in (("mlm fwd+bwd, logits at all positions", {}),
                     ("mlm fwd+bwd, ours decodes only the 15% labelled bytes", {"decode_labelled_only": True})):
        fo, fh = train_step(ours, **kw), train_step(hf)
        stats = time_interleaved({"ours": fo, "transformers": fh}, warmup=1, repeats=repeats)
        rows.append(BenchResult.from_stats(name, case, stats, flops=count_flops(fo), peak_gflops=peak,
                                           peer_flops=count_flops(fh), ours_min_ms=stats["ours"].min * 1e3,
                                           peer_min_ms=stats["transformers"].min * 1e3, identical_math=not kw))
    return rows, {"max_abs_diff_vs_hf": checks, "labelled_fraction": float((labels != -100).float().mean())}


def run() -> tuple[list[BenchResult], dict[str, Any]]:
    """Both parts; ``PAPERZOO_PERCEIVER_PARTS`` (``scaling,hf``) selects them."""
    parts = os.environ.get("PAPERZOO_PERCEIVER_PARTS", "scaling,hf").split(",")
    peak = peak_gflops()
    rows: list[BenchResult] = []
    meta: dict[str, Any] = {"peak_gflops": peak, "threads": torch.get_num_threads()}
    if "hf" in parts:
        r, m = vs_hf(peak=peak)
        rows += r
        meta["hf"] = m
    if "scaling" in parts:
        r, m = scaling(peak=peak)
        rows += r
        meta["scaling"] = m
    meta["notes"] = (
        "Part (b): ratio = HF time / ours, fwd+bwd of PerceiverForMaskedLM vs paperzoo.hf.from_hf of it (same "
        "weights, training mode, dropout 0); the second row lets ours decode only labelled bytes (exact: same "
        "loss), HF has no such option. Part (a): ours = Perceiver, peer = transformer encoder of similar size "
        "(ratio = transformer / Perceiver); the transformer stops where its projected step time exceeds the "
        "budget; peak memory columns are the max-RSS rise of one fwd+bwd in a fresh process. Slopes in meta.")
    return rows, meta


if __name__ == "__main__":
    print(scaling(lengths=tuple(int(a) for a in sys.argv[1:]) or (1024, 2048), memory=False))
