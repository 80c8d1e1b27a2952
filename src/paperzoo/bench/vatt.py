"""``paperzoo bench vatt``: VATT's training step against DropToken's keep rate, interleaved in one process.

There is no complete PyTorch VATT to compare against, so the peer of every row is the same model without DropToken
(keep 1.0) on the same batch: ratio = its step time / the row's (> 1: DropToken saves that much). Rows:

* ``train step keep-k`` (the CPU ``small`` model, batch 32, in each precision of the bench's passes; then a
  ``wide`` model, d 256, 4 layers, 512 video + 256 audio tokens, batch 8, whose step the matmuls and attention
  dominate): forward + backward of NCE + MIL-NCE, with counted FLOPs, the fraction of the machine's matmul peak, the
  activation memory of the step (bytes autograd saves) and the memory a materialised softmax attention would need at
  that token count (batch x heads x n^2 per layer, video + audio; the fused kernels never hold it);
* in the meta, ``mbs_video_forward_counted``: the paper's ViT-Medium video backbone on one clip of 32 x 224 x 224,
  FLOPs counted on the meta device (nothing runs), against the paper's Table 7 (785 / 574 / 375 / 188 GFLOPs at keep
  1 / 0.75 / 0.5 / 0.25).

Also in the meta: the log-log slope of step time against kept tokens (the cost slope).
Environment: ``PAPERZOO_BENCH_QUICK=1`` runs the ``tiny`` model with few repeats (a smoke test).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from paperzoo.bench import precision
from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import activation_bytes, count_flops, loglog_slope
from paperzoo.papers.vatt import VATT, VATTConfig, VATTLoss
from paperzoo.papers.vatt.model import DropToken, backbone

KEEP_RATES = (1.0, 0.75, 0.5, 0.25)
PAPER_GFLOPS = {1.0: 784.8, 0.75: 574.2, 0.5: 375.4, 0.25: 188.1}  # Table 7, VATT-MBS


def _batch(cfg: VATTConfig, b: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    text = torch.randint(2, cfg.vocab_size, (b, 3, 12), generator=g)
    return {"video": torch.rand(b, cfg.channels, cfg.frames, cfg.size, cfg.size, generator=g) * 2 - 1,
            "audio": torch.rand(b, cfg.audio_samples, generator=g) * 2 - 1, "text": text}


def _attention_mib(cfg: VATTConfig, b: int, keep: float) -> float:
    """Bytes of the attention probabilities a non-fused softmax would hold, all layers of video and audio (bf16)."""
    total = 0
    for n_max, t in ((cfg.video_grid[0] * cfg.video_grid[1] * cfg.video_grid[2], cfg.video),
                     (cfg.audio_tokens, cfg.audio)):
        n = 1 + min(n_max, max(1, int(keep * n_max)))  # [AGG] + kept tokens
        total += t.num_layers * b * t.num_heads * n * n * 2
    return total / 2**20


def _keep_rate_rows(cfg: VATTConfig, case: str, b: int, n: int, amp, peak: float) -> tuple[list[BenchResult],
                                                                                          list[float], list[int]]:
    """Rows ``train step keep-k`` of one model (the same weights at every rate), each interleaved with keep 1.0."""
    loss = VATTLoss()
    models = {}
    for k in KEEP_RATES:
        torch.manual_seed(0)
        m = VATT(dataclasses.replace(cfg, keep_rate=k)).train()
        if models:
            m.load_state_dict(models[1.0].state_dict())  # the same weights at every rate
        models[k] = m
    x = _batch(models[1.0].cfg, b)

    def step(m):
        def f():
            m.zero_grad(set_to_none=True)
            with autocast():
                out = loss(m(**x))[0]
            out.backward()
        return f

    def forward(m):
        def f():
            with autocast():
                return loss(m(**x))[0]
        return f

    rows: list[BenchResult] = []
    times, kept, steps = [], [], {}
    for k, m in models.items():
        steps[k] = step(m)
        flops = count_flops(steps[k])
        act = activation_bytes(forward(m)) / 2**20
        pair = {f"keep-{k}": steps[k]} if k == 1.0 else {f"keep-{k}": steps[k], "keep-1.0": steps[1.0]}
        stats = time_interleaved(pair, warmup=1, repeats=n)
        times.append(stats[f"keep-{k}"].median)
        kept.append(m.video_in.drop.keep + m.audio_in.drop.keep)
        rows.append(BenchResult.from_stats(
            f"vatt train step keep-{k}", f"{case}, batch {b}, {amp.used}, fwd+bwd NCE + MIL-NCE",
            stats, flops=flops, peak_gflops=peak, gemm_bound=case.startswith("wide"),
            video_tokens=m.video_in.drop.keep, audio_tokens=m.audio_in.drop.keep, activation_mib=round(act, 2),
            softmax_attention_mib=round(_attention_mib(m.cfg, b, k), 2), repeats=n))
    return rows, times, kept


def run(repeats: int | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time every keep rate; returns ``(rows, meta)`` for :func:`paperzoo.bench.run_bench`."""
    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    amp = precision.current()
    peak = peak_gflops()
    n = repeats or (2 if quick else 8)
    rows, times, kept = _keep_rate_rows(VATTConfig.preset("tiny" if quick else "small"),
                                        "tiny model" if quick else "small model", 8 if quick else 32, n, amp, peak)
    slopes = {"small": round(loglog_slope(kept, times), 3)}
    if not quick:  # a model big enough for the matmuls and attention to dominate: where DropToken's saving shows
        wide = dataclasses.replace(VATTConfig.preset("small"), frames=16, size=64, audio_samples=32768,
                                   video=backbone((4, 256, 4, 1024), dropout=0.0),
                                   audio=backbone((4, 256, 4, 1024), dropout=0.0),
                                   text=backbone((1, 256, 4, 1024), position="t5", dropout=0.0), word_dim=256,
                                   post_dim=256)
        more, t2, k2 = _keep_rate_rows(wide, "wide model (d 256, 4 layers, 512 video + 256 audio tokens)", 8,
                                       max(2, n // 2), amp, peak)
        rows += more
        slopes["wide"] = round(loglog_slope(k2, t2), 3)
    mbs = {}

    # the paper's video backbone, built once (small audio and text towers: only the video side is counted)
    cfg = VATTConfig.preset("mbs", audio=backbone((1, 64, 1, 64)), vocab_size=16,
                            text=backbone((1, 64, 1, 64), position="t5"), audio_samples=1280)
    m = VATT(cfg).to("meta").train()
    video = torch.empty(1, 3, 32, 224, 224, device="meta")
    for k in KEEP_RATES:
        m.video_in.drop = DropToken(k, m.video_in.drop.max_tokens).train()
        mbs[k] = count_flops(lambda: m.encode_video(video)) / 1e9
    mbs_rows = {f"keep-{k}": {"gflops": round(g, 1), "ratio to keep 1": round(g / mbs[1.0], 3),
                              "paper gflops": PAPER_GFLOPS[k],
                              "paper ratio": round(PAPER_GFLOPS[k] / PAPER_GFLOPS[1.0], 3)} for k, g in mbs.items()}
    meta = {"torch_threads": torch.get_num_threads(), "precision": amp.to_dict(), "peak_gflops": peak,
            "time_vs_kept_tokens_loglog_slope": slopes,
            "mbs_video_forward_counted": mbs_rows,
            "notes": ("Peer = the same model and weights without DropToken (keep 1.0), interleaved. FLOPs counted by "
                      "paperzoo.measure.count_flops (matmuls and attention). Activation memory = bytes autograd "
                      "saves in one step. The MBS figures are counted on the meta device (nothing runs). Shared 2-core "
                      "machine: medians of interleaved repeats.")}
    return rows, meta
