"""``paperzoo bench electra``: one joint ELECTRA pretraining step, ours vs the same step assembled from Hugging Face.

The step: generator forward on the masked input, MLM loss, Gumbel-max sampling at the masked positions, the
discriminator on the corrupted input, ``L = L_MLM + 50 L_Disc``, backward. Both sides get the same weights (ours
converted with ``to_hf``; HF's generator shares the discriminator's embeddings and ties its LM head to them, as
ours), the same masked batch, and the same sampler. The difference is where the work goes: HF's
``ElectraForMaskedLM`` computes the vocabulary head (and its softmax) at every position, ours only at the ~15%
masked positions, as the official TF code does (``gather_positions`` before the head).

Size: discriminator hidden 256, 4 layers, 4 heads, FFN 1024, embeddings 128, generator 1/4
(hidden 64), vocab 30522, batch 8 x 128, dropout 0.1, on CPU in each precision of the bench's passes.
"""

from __future__ import annotations

from typing import Any

import torch

from paperzoo.bench.precision import autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops

__all__ = ["build", "hf_pretrain_step", "run"]


def build(hidden: int = 256, layers: int = 4, embedding: int = 128, vocab: int = 30522, generator_size: float = 0.25,
          dropout: float = 0.1, seed: int = 0):
    """(our ElectraPretrainer, HF ElectraForMaskedLM, HF ElectraForPreTraining) with the same weights."""
    from paperzoo.hf import to_hf
    from paperzoo.papers.electra.model import ElectraConfig, build_generator_and_discriminator
    from paperzoo.papers.electra.objective import ElectraPretrainer, ObjectiveConfig

    torch.manual_seed(seed)
    cfg = ElectraConfig(vocab_size=vocab, embedding_dim=embedding, dim=hidden, num_layers=layers,
                        num_heads=max(1, hidden // 64), ffn_dim=4 * hidden, max_len=512, dropout=dropout,
                        attn_dropout=dropout, generator_size=generator_size)
    gen, disc = build_generator_and_discriminator(cfg)
    ours = ElectraPretrainer(gen, disc.body, disc.head, ObjectiveConfig())
    hf_gen, hf_disc = to_hf(gen), to_hf(disc)
    hf_gen.electra.embeddings = hf_disc.electra.embeddings  # shared tables and LayerNorm, as ours
    hf_gen.generator_lm_head.weight = hf_disc.electra.embeddings.word_embeddings.weight
    return ours.train(), hf_gen.train(), hf_disc.train()


def hf_pretrain_step(hf_gen, hf_disc, input_ids: torch.Tensor, attention_mask: torch.Tensor, masked,
                     disc_weight: float = 50.0, temperature: float = 1.0,
                     noise_generator: torch.Generator | None = None) -> torch.Tensor:
    """The ELECTRA loss assembled from HF's two models (what a user of ``transformers`` writes); returns the loss."""
    from paperzoo.papers.electra.objective import gumbel_sample

    pos = masked.is_masked
    labels = torch.where(pos, input_ids, torch.full_like(input_ids, -100))
    g = hf_gen(input_ids=masked.input_ids, attention_mask=attention_mask, labels=labels)  # logits (b, s, vocab)
    sampled = gumbel_sample(g.logits[pos], temperature, noise_generator)
    fake = input_ids.masked_scatter(pos, sampled)
    d = hf_disc(input_ids=fake, attention_mask=attention_mask, labels=(fake != input_ids).long())
    return g.loss + disc_weight * d.loss


def _batch(batch: int, seq: int, vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    for i, n in enumerate(lengths.tolist()):
        ids[i, n - 1] = 3
        ids[i, n:] = 0
        mask[i, n:] = 0
    ids[:, 0] = 2
    return ids, mask


def run(batch: int = 8, seq: int = 128, hidden: int = 256, layers: int = 4, vocab: int = 30522, repeats: int = 8,
        warmup: int = 2) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time the joint step (forward + backward) and its forward alone, at torch's thread count and at 1 thread
    (small matmuls on a shared machine often run better on one); rows carry our FLOPs and HF's."""
    ours, hf_gen, hf_disc = build(hidden=hidden, layers=layers, vocab=vocab)
    ids, mask = _batch(batch, seq, vocab)
    masked = ours.mask(ids, mask, torch.Generator().manual_seed(1))
    hf_params = list({id(p): p for m in (hf_gen, hf_disc) for p in m.parameters()}.values())

    def ours_step():
        ours.zero_grad(set_to_none=True)
        with autocast():
            loss = ours(ids, mask, masked=masked).loss
        loss.backward()

    def hf_step():
        for p in hf_params:
            p.grad = None
        with autocast():
            loss = hf_pretrain_step(hf_gen, hf_disc, ids, mask, masked)
        loss.backward()

    def ours_fwd():
        with torch.no_grad(), autocast():
            ours(ids, mask, masked=masked)

    def hf_fwd():
        with torch.no_grad(), autocast():
            hf_pretrain_step(hf_gen, hf_disc, ids, mask, masked)

    f_ours, f_hf = count_flops(ours_step), count_flops(hf_step)
    # forward FLOPs counted with autograd on (the counter's module hooks need it); timed under no_grad below
    f_ours_fwd = count_flops(lambda: ours(ids, mask, masked=masked))
    f_hf_fwd = count_flops(lambda: hf_pretrain_step(hf_gen, hf_disc, ids, mask, masked))
    case = (f"batch {batch} x {seq}, hidden {hidden}, {layers} layers, generator 1/4, vocab {vocab}, "
            f"{ours.config.mask_prob:.0%} masked ({masked.num_masked} positions)")
    rows = []
    peak = peak_gflops()
    old = torch.get_num_threads()
    try:
        for threads in sorted({1, old}, reverse=True):
            torch.set_num_threads(threads)
            tag = f", {threads} thread{'s' if threads > 1 else ''}"
            step = time_interleaved({"ours": ours_step, "transformers": hf_step}, warmup=warmup, repeats=repeats)
            fwd = time_interleaved({"ours": ours_fwd, "transformers": hf_fwd}, warmup=warmup, repeats=repeats)
            for label, st, f, pf in (("fwd+bwd", step, f_ours, f_hf), ("forward", fwd, f_ours_fwd, f_hf_fwd)):
                rows.append(BenchResult.from_stats(f"electra joint step {label}", case + tag, st, flops=f,
                                                   peak_gflops=peak, peer_flops=pf, threads=threads,
                                                   ours_min_ms=st["ours"].min * 1e3,
                                                   peer_min_ms=st["transformers"].min * 1e3))
    finally:
        torch.set_num_threads(old)
    meta = {"torch_threads": torch.get_num_threads(), "repeats": repeats, "warmup": warmup,
            "notes": ("Peer: transformers ElectraForMaskedLM + ElectraForPreTraining with our weights (to_hf), "
                      "embeddings shared and LM head tied, sdpa attention; same masked batch and Gumbel sampler. "
                      "FLOPs are counted by torch.utils.flop_counter for each side (peer_flops: HF's, which computes "
                      "the vocabulary head at all positions); GFLOP/s columns use our FLOPs for both, i.e. useful "
                      "work per second. Rows at 1 thread are timed too: on a loaded 2-core machine, OpenMP barriers "
                      "make 2-thread timings of these small matmuls erratic.")}
    return rows, meta
