"""``paperzoo bench funnel``: our Funnel vs Hugging Face ``FunnelModel`` / ``FunnelBaseModel`` with the same weights.

Configs: dim 256, 4 heads x 64, FFN 1024, vocabulary 30522, ``rel_shift`` attention, and

* blocks 2-2 (+ 2 decoder layers for ``FunnelModel``) at batch 8 x seq 128;
* blocks 4-4-4 (+ 2 decoder layers) at batch 8 x seq 512.

Each model (``FunnelModel``: encoder + decoder, full-length output; ``FunnelBaseModel``: encoder only, pooled output)
is timed forward and forward+backward. HF builds the model from a random config; ours is ``paperzoo.hf.from_hf`` of
it (same weights). Both are in training mode with every dropout 0 (so backward is a real training backward and the
two sides compute the same function); the inputs carry padding (rows of random length) and token types.
Forward+backward includes ``zero_grad`` and the backward of a fixed random output gradient, the 30522-row embedding
gradient included. ``ratio = HF time / our time``.

``paperzoo bench funnel-costs`` (:func:`costs`) measures what the reproduction (``paperzoo reproduce funnel``)
compares, at one of its presets: the Funnel and its FLOP-matched standard Transformer, ms per ELECTRA pretraining
step and per fine-tuning step (interleaved; ``ratio = standard time / Funnel time``), the bytes autograd saves for
backward, parameters; and, in the meta, the paper-scale FLOP table (:func:`flop_table`: B6-6-6 vs L8/L11/L12 at d 768).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import torch

from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import activation_bytes, count_flops, profile_tables

__all__ = ["CONFIGS", "build_pair", "inputs", "run", "profile_funnel", "flop_table", "costs"]

DIM, NUM_HEADS, HEAD_DIM, FFN_DIM, VOCAB = 256, 4, 64, 1024, 30522
# (blocks, batch, seq)
CONFIGS: tuple[tuple[str, int, int], ...] = (("2-2", 8, 128), ("4-4-4", 8, 512))
MODELS = ("FunnelModel", "FunnelBaseModel")


def build_pair(blocks: str = "2-2", hf_class: str = "FunnelModel", dim: int = DIM, num_heads: int = NUM_HEADS,
               head_dim: int = HEAD_DIM, ffn_dim: int = FFN_DIM, vocab: int = VOCAB, num_decoder_layers: int = 2,
               seed: int = 0):
    """(HF ``hf_class`` from a random config, our converted model), both in train mode with all dropout 0."""
    import transformers

    from paperzoo.hf import from_hf
    from paperzoo.papers.funnel.hf import config_to_hf
    from paperzoo.papers.funnel.model import FunnelConfig

    cfg = FunnelConfig(vocab_size=vocab, blocks=blocks, dim=dim, num_heads=num_heads, head_dim=head_dim,
                       ffn_dim=ffn_dim, num_decoder_layers=num_decoder_layers, dropout=0.0, attn_dropout=0.0,
                       activation_dropout=0.0)
    torch.manual_seed(seed)
    hf = getattr(transformers, hf_class)(config_to_hf(cfg)).train()
    return hf, from_hf(hf).train()


def inputs(batch: int, seq: int, vocab: int, seed: int = 1) -> dict[str, torch.Tensor]:
    """``input_ids`` ([CLS] = 2 first), ``attention_mask`` (row 0 full, others of random length >= seq/2) and
    ``token_type_ids`` (two segments) of shape (batch, seq)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    ids[:, 0] = 2
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    pos = torch.arange(seq)
    mask = (pos < lengths[:, None]).long()
    types = (pos >= (lengths // 2)[:, None]).long() * mask
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types}


def _fns(hf, ours, batch_inputs: dict[str, torch.Tensor], seed: int = 2):
    """(our forward, HF forward, our train step, HF train step); steps backward a fixed random gradient."""
    with torch.no_grad():
        shape = ours(**batch_inputs).last_hidden_state.shape
    grad = torch.randn(shape, generator=torch.Generator().manual_seed(seed))

    def fwd(m):
        def f():
            with torch.no_grad(), autocast():
                return m(**batch_inputs).last_hidden_state
        return f

    def step(m):
        def f():
            m.zero_grad(set_to_none=True)
            with autocast():
                out = m(**batch_inputs).last_hidden_state
            out.backward(grad.to(out.dtype))
        return f

    return fwd(ours), fwd(hf), step(ours), step(hf)


def _check(hf, ours, batch_inputs: dict[str, torch.Tensor]) -> dict[str, float]:
    """Max |ours - HF| of the output (all positions) and of the parameter gradients, in the bench setup."""
    o = ours(**batch_inputs).last_hidden_state
    h = hf(**batch_inputs).last_hidden_state
    out_diff = float((o - h).detach().abs().max())
    g = torch.randn(o.shape, generator=torch.Generator().manual_seed(3))
    ours.zero_grad(set_to_none=True)
    hf.zero_grad(set_to_none=True)
    (o * g).sum().backward()
    (h * g).sum().backward()
    hp = dict(hf.named_parameters())
    grad_diff = max(float((p.grad - hp[n].grad).abs().max()) for n, p in ours.named_parameters() if p.grad is not None)
    ours.zero_grad(set_to_none=True)
    hf.zero_grad(set_to_none=True)
    return {"output": out_diff, "grad": grad_diff}


def run(configs: tuple[tuple[str, int, int], ...] = CONFIGS, models: tuple[str, ...] = MODELS,
        repeats: int | None = None, warmup: int = 2, dim: int = DIM, num_heads: int = NUM_HEADS,
        head_dim: int = HEAD_DIM, ffn_dim: int = FFN_DIM, vocab: int = VOCAB, peak: float | None = None
        ) -> tuple[list[BenchResult], dict[str, Any]]:
    """Run the benchmark; ``repeats`` (default env ``PAPERZOO_BENCH_REPEATS`` or 10) interleaved timed calls per row.

    Keyword arguments shrink it for tests (``peak`` skips measuring the matmul peak)."""
    repeats = repeats or int(os.environ.get("PAPERZOO_BENCH_REPEATS", "10"))
    peak = peak if peak is not None else peak_gflops()
    rows, checks = [], {}
    for blocks, batch, seq in configs:
        x = inputs(batch, seq, vocab)
        for hf_class in models:
            hf, ours = build_pair(blocks, hf_class, dim, num_heads, head_dim, ffn_dim, vocab)
            label = f"{hf_class} {blocks}{' + 2 dec' if hf_class == 'FunnelModel' else ''}"
            checks[f"{label} seq {seq}"] = _check(hf, ours, x)
            f_ours, f_hf, s_ours, s_hf = _fns(hf, ours, x)
            # forward FLOPs counted with autograd on (the counter's module hooks need it); timed under no_grad
            flops = {"fwd": count_flops(lambda m=ours, x=x: m(**x).last_hidden_state), "fwd+bwd": count_flops(s_ours)}
            case = f"batch {batch} x seq {seq}, d {dim}"
            for mode, fo, fh in (("fwd", f_ours, f_hf), ("fwd+bwd", s_ours, s_hf)):
                stats = time_interleaved({"ours": fo, "transformers": fh}, warmup=warmup, repeats=repeats)
                rows.append(BenchResult.from_stats(f"funnel {label} {mode}", case, stats, flops=flops[mode],
                                                   peak_gflops=peak, ours_min_ms=stats["ours"].min * 1e3,
                                                   peer_min_ms=stats["transformers"].min * 1e3, identical_math=True,
                                                   gemm_bound=mode == "fwd+bwd"))
    meta = {
        "peak_gflops": peak,
        "threads": torch.get_num_threads(),
        "config": {"dim": dim, "num_heads": num_heads, "head_dim": head_dim, "ffn_dim": ffn_dim, "vocab": vocab,
                   "attention_type": "rel_shift", "dropout": 0.0, "mode": "train",
                   "configs": [{"blocks": b, "batch": n, "seq": s} for b, n, s in configs]},
        "repeats": repeats,
        "max_abs_diff_vs_hf": checks,
        "notes": ("Peer: transformers.FunnelModel / FunnelBaseModel built from a random config; ours: "
                  "paperzoo.hf.from_hf of the same model. Training mode, dropout 0; inputs with padding and two "
                  "token types. Forward times run under no_grad; forward+backward includes zero_grad and the "
                  "backward of a fixed random output gradient. Medians of interleaved calls; FLOPs of our side "
                  "from torch.utils.flop_counter (matmuls, incl. the relative-attention terms)."),
    }
    return rows, meta


def profile_funnel(blocks: str = "2-2", hf_class: str = "FunnelModel", batch: int = 8, seq: int = 128,
                   steps: int = 3, row_limit: int = 25) -> str:
    """torch.profiler tables (self CPU time) of ``steps`` forward+backward calls, ours then HF, for finding hot ops."""
    hf, ours = build_pair(blocks, hf_class)
    _, _, s_ours, s_hf = _fns(hf, ours, inputs(batch, seq, VOCAB))
    return profile_tables({"ours": s_ours, "transformers": s_hf}, f"{hf_class} {blocks}, batch {batch} x seq {seq}, "
                          "fwd+bwd", steps, row_limit)


# ---------------------------------------------------------------------------------- the reproduction's costs
PAPER_LAYOUTS = ("B6-6-6", "B6-6-6+dec", "B6-3x2-3x2", "B4-4-4", "L8", "L11", "L12")


def flop_table(dim: int = 768, num_heads: int = 12, head_dim: int = 64, ffn_dim: int = 3072,
               seq_lens: tuple[int, ...] = (128, 512), layouts: tuple[str, ...] = PAPER_LAYOUTS
               ) -> list[dict[str, Any]]:
    """Measured forward FLOPs per token (GFLOP) of Funnel layouts (``"B6-6-6"``; ``"+dec"``: with the 2-layer
    decoder) and standard encoders (``"L12"``) of one width, at each length: rows ``{model, seq, gflop_per_token,
    vs_L12}`` (``vs_L12``: the ratio to the L12 row at that length, when it is in ``layouts``)."""
    from paperzoo.papers.funnel.model import FunnelConfig
    from paperzoo.papers.funnel.pretrain import standard_config
    from paperzoo.papers.funnel.recipe import forward_flops_per_token

    base = FunnelConfig(dim=dim, num_heads=num_heads, head_dim=head_dim, ffn_dim=ffn_dim, num_decoder_layers=2)

    def flops(name: str, t: int) -> float:
        if name.startswith("L"):
            return forward_flops_per_token(standard_config(base, int(name[1:])), t)
        blocks = name[1:].removesuffix("+dec")
        return forward_flops_per_token(replace(base, blocks=blocks), t, decoder=name.endswith("+dec"))

    rows = []
    for t in seq_lens:
        f = {name: flops(name, t) for name in layouts}
        rows += [{"model": k, "seq": t, "gflop_per_token": v / 1e9, "vs_L12": v / f["L12"] if "L12" in f else None}
                 for k, v in f.items()]
    return rows


def _autocast_loss(clf, batch):
    with autocast():
        return clf(**batch).loss


def costs(preset: str = "small", repeats: int = 5, warmup: int = 1, paper_table: bool = True
          ) -> tuple[list[BenchResult], dict[str, Any]]:
    """The reproduction's Funnel ("ours") and its FLOP-matched standard Transformer (the peer) at recipe preset
    ``preset``, freshly initialised on the CPU: one ELECTRA pretraining step (generator, discriminator, heads;
    forward and backward) on a (batch, seq_len) batch, and one fine-tuning step of the classifier on a padded
    (batch, max_len) batch. Rows carry the measured FLOPs of both sides, the bytes autograd saves for backward
    (:func:`paperzoo.measure.activation_bytes`) and the encoder parameters. Random token ids stand in for the
    trained vocabulary (the costs depend on shapes only)."""
    from paperzoo.papers.electra.objective import pretrain_step_flops
    from paperzoo.papers.funnel.model import FunnelClassifier
    from paperzoo.papers.funnel.pretrain import build_pretrainer, standard_config
    from paperzoo.papers.funnel.recipe import PRESETS, matched_depth

    p = PRESETS[preset]
    depth, _ = matched_depth(p.model, tuple(sorted({p.seq_len, p.finetune.max_len})))
    cfgs = {"funnel": p.model, "standard": standard_config(p.model, depth)}
    # the ids paperzoo's WordPiece vocabularies give [PAD], [CLS], [SEP], [MASK]
    objective = replace(p.objective, mask_token_id=4, special_ids=(0, 2, 3, 4))
    b, vocab = p.train.batch_size, p.model.vocab_size
    ids = torch.randint(5, vocab, (b, p.seq_len), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 2, 3
    mask = torch.ones_like(ids)
    ft = inputs(p.finetune.batch_size, p.finetune.max_len, vocab)
    ft = {"input_ids": ft["input_ids"], "attention_mask": ft["attention_mask"],
          "labels": torch.arange(p.finetune.batch_size) % 2}
    pre, fine, extra = {}, {}, {}
    for arch, cfg in cfgs.items():
        torch.manual_seed(0)
        pt = build_pretrainer(cfg, p.generator_size, p.generator_depth, max_len=p.seq_len, objective=objective)
        clf = FunnelClassifier(replace(cfg, num_labels=2)).train()
        masked = pt.train().mask(ids, mask, torch.Generator().manual_seed(0))

        def pre_fwd(pt=pt, masked=masked):
            with autocast():
                return pt(ids, mask, masked=masked, noise_generator=torch.Generator().manual_seed(0)).loss

        def pre_step(pt=pt, fwd=pre_fwd):
            pt.zero_grad(set_to_none=True)
            fwd().backward()

        def ft_step(clf=clf):
            clf.zero_grad(set_to_none=True)
            with autocast():
                loss = clf(**ft).loss
            loss.backward()

        pre[arch], fine[arch] = pre_step, ft_step
        extra[arch] = {"pretrain_flops": pretrain_step_flops(pt, {"input_ids": ids, "attention_mask": mask}),
                       "finetune_flops": count_flops(ft_step),
                       "pretrain_activation_MiB": activation_bytes(pre_fwd) / 2**20,
                       "finetune_activation_MiB": activation_bytes(lambda clf=clf: _autocast_loss(clf, ft)) / 2**20,
                       "encoder_params_M": sum(q.numel() for q in clf.funnel.parameters()) / 1e6}
    rows = []
    peak = peak_gflops()
    for step, fns, case in (("pretrain", pre, f"batch {b} x seq {p.seq_len}"),
                            ("finetune", fine, f"batch {p.finetune.batch_size} x seq {p.finetune.max_len}")):
        stats = time_interleaved(fns, warmup=warmup, repeats=repeats)
        rows.append(BenchResult.from_stats(
            f"funnel {p.model.blocks} vs L{depth} {step} step", f"{case}, d {p.model.dim}", stats,
            flops=extra["funnel"][f"{step}_flops"], peak_gflops=peak, peer_flops=extra["standard"][f"{step}_flops"],
            ours_activation_MiB=extra["funnel"][f"{step}_activation_MiB"],
            peer_activation_MiB=extra["standard"][f"{step}_activation_MiB"],
            ours_encoder_params_M=extra["funnel"]["encoder_params_M"],
            peer_encoder_params_M=extra["standard"]["encoder_params_M"]))
    table = flop_table() if paper_table else []
    meta = {"preset": preset, "standard_depth": depth, "threads": torch.get_num_threads(), "repeats": repeats,
            "configs": {a: c for a, c in cfgs.items()}, "paper_flop_table": table,
            "notes": ("Ours: the reproduction's Funnel; peer: its FLOP-matched standard Transformer (same code, one "
                      "block, no pooling, no decoder), both freshly initialised, training mode. Pretraining step: "
                      "ELECTRA's generator + discriminator + heads, forward and backward, fixed masking; fine-tuning "
                      "step: the classifier on padded rows. Paper-scale forward GFLOP/token (d 768; +dec: with the "
                      "2-layer decoder): " + "; ".join(f"{r['model']} at {r['seq']}: {r['gflop_per_token']:.4f} "
                                                       f"({r['vs_L12']:.2f}x L12)" for r in table))}
    return rows, meta


if __name__ == "__main__":
    import sys

    print(profile_funnel(*(sys.argv[1:3] or ())))
