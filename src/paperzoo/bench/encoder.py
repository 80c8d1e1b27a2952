"""``paperzoo bench encoder``: our transformer encoder vs Hugging Face ``BertModel`` (sdpa), same weights.

Rows, at batch 8 x seq 128 and x seq 512 (hidden 256, 4 layers, 4 heads, FFN 1024, BERT's vocabulary), for one
layer (``TransformerBlock`` vs ``BertLayer``), the stack (``TransformerEncoder`` vs ``BertEncoder``) and the whole
model (``TextEncoder`` vs ``BertModel``, with embeddings and pooler), each forward and forward+backward. Models are
in training mode with dropout 0 (so backward is a real training backward and both sides compute the same thing);
the layer/stack inputs require grad, as inside a network. ``ratio = HF time / our time``.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops, profile_tables

__all__ = ["encoder", "build_pair", "profile_encoder"]

SIZES = ((8, 128), (8, 512))
DIM, DEPTH, HEADS, FFN, VOCAB = 256, 4, 4, 1024, 30522


def build_pair(dim: int = DIM, depth: int = DEPTH, heads: int = HEADS, ffn: int = FFN, vocab: int = VOCAB,
               max_len: int = 512, seed: int = 0):
    """(HF BertModel with sdpa attention, our TextEncoder converted from it), both in train mode, dropout 0."""
    import transformers

    from paperzoo.hf import from_hf

    torch.manual_seed(seed)
    cfg = transformers.BertConfig(vocab_size=vocab, hidden_size=dim, num_hidden_layers=depth, num_attention_heads=heads,
                                  intermediate_size=ffn, max_position_embeddings=max_len, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, attn_implementation="sdpa")
    hf = transformers.BertModel(cfg).train()
    return hf, from_hf(hf).train()


def _cases(hf, ours, batch: int, seq: int) -> dict[str, tuple[Any, Any]]:
    """name -> (our forward fn, HF forward fn); each returns (batch, seq, dim)."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, seq, hf.config.hidden_size, generator=g).requires_grad_()
    ids = torch.randint(0, hf.config.vocab_size, (batch, seq), generator=g)
    return {
        "layer": (lambda: ours.encoder.layers[0](x), lambda: hf.encoder.layer[0](x)),
        "stack": (lambda: ours.encoder(x).last_hidden_state, lambda: hf.encoder(x).last_hidden_state),
        "model": (lambda: ours(input_ids=ids).last_hidden_state, lambda: hf(input_ids=ids).last_hidden_state),
    }


def _forward(fwd):
    def f():
        with autocast():
            return fwd().detach()
    return f


def _train_step(fwd, modules, grad):
    def step():
        for m in modules:
            m.zero_grad(set_to_none=True)
        with autocast():
            out = fwd()
        out.backward(grad.to(out.dtype))
    return step


def encoder(sizes=SIZES, repeats: int | None = None, min_time: float | None = None,
            parts=("layer", "stack", "model")) -> tuple[list[BenchResult], dict[str, Any]]:
    """Run the benchmark; ``repeats`` (default env ``PAPERZOO_BENCH_REPEATS`` or 20) interleaved timed calls."""
    repeats = repeats or int(os.environ.get("PAPERZOO_BENCH_REPEATS", "20"))
    peak = peak_gflops()
    hf, ours = build_pair(max_len=max(s for _, s in sizes))
    rows, checks = [], {}
    for batch, seq in sizes:
        case = f"batch {batch} x seq {seq}"
        for part, (f_ours, f_hf) in _cases(hf, ours, batch, seq).items():
            if part not in parts:
                continue
            with torch.no_grad(), autocast():
                checks[f"{part} {seq}"] = float((f_ours().float() - f_hf().float()).abs().max())
            grad = torch.randn(batch, seq, DIM, generator=torch.Generator().manual_seed(2))
            for mode in ("fwd", "fwd+bwd"):
                if mode == "fwd":
                    fo, fh = _forward(f_ours), _forward(f_hf)
                else:
                    fo, fh = _train_step(f_ours, [ours], grad), _train_step(f_hf, [hf], grad)
                stats = time_interleaved({"ours": fo, "transformers": fh}, warmup=3, repeats=repeats,
                                         min_time=min_time)
                rows.append(BenchResult.from_stats(f"encoder {part} {mode}", case, stats, flops=count_flops(fo),
                                                   peak_gflops=peak, ours_min_ms=stats["ours"].min * 1e3,
                                                   peer_min_ms=stats["transformers"].min * 1e3, identical_math=True,
                                                   gemm_bound=mode == "fwd+bwd" and part == "stack"))
    meta = {
        "peak_gflops": peak,
        "threads": torch.get_num_threads(),
        "config": {"hidden": DIM, "layers": DEPTH, "heads": HEADS, "ffn": FFN, "vocab": VOCAB, "dropout": 0.0,
                   "mode": "train", "attn_implementation": "sdpa"},
        "repeats": repeats,
        "max_abs_diff_vs_hf": checks,
        "notes": ("Peer: transformers.BertModel(attn_implementation='sdpa') and its BertLayer/BertEncoder; ours: "
                  "paperzoo.hf.from_hf of the same model (TextEncoder / TransformerEncoder / TransformerBlock), "
                  "same weights. Training mode, dropout 0; forward+backward times include zero_grad and the "
                  "backward of a fixed random output gradient. Times are medians of interleaved calls; FLOPs "
                  "from torch.utils.flop_counter (matmuls and attention only)."),
    }
    return rows, meta


def profile_encoder(batch: int = 8, seq: int = 128, steps: int = 3, row_limit: int = 20, part: str = "stack") -> str:
    """torch.profiler tables (self CPU time) of one forward+backward ``part`` for ours and HF, for finding hot ops."""
    hf, ours = build_pair(max_len=max(seq, 512))
    f_ours, f_hf = _cases(hf, ours, batch, seq)[part]
    grad = torch.randn(batch, seq, DIM)
    return profile_tables({"ours": _train_step(f_ours, [ours], grad), "transformers": _train_step(f_hf, [hf], grad)},
                          f"{part}, batch {batch} x seq {seq}, fwd+bwd", steps, row_limit)

if __name__ == "__main__":
    import sys

    print(profile_encoder(seq=int(sys.argv[1]) if len(sys.argv) > 1 else 128))
