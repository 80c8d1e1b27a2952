"""``paperzoo reproduce funnel``: Funnel vs a standard Transformer of the same width at matched measured FLOPs.

Both models are the same code (:mod:`.model`): the standard Transformer is a single-block, decoder-free config
(:func:`.pretrain.standard_config`), so they differ only by pooling between blocks (and Funnel's upsampling decoder
during pretraining). Per run folder:

1. a WordPiece vocabulary trained on the IMDB train-fold text (``tokenizer.json``, :mod:`paperzoo.data.tokenizer`);
2. the baseline's depth: the smallest whose forward FLOPs per token, counted by :func:`paperzoo.measure.count_flops`,
   are >= the Funnel encoder's at both the pretraining and the fine-tuning length (:func:`matched_depth`);
3. per (architecture, seed) job (``<arch>/seed-<k>/``): ELECTRA pretraining (ELECTRA's objective, unchanged:
   generator 1/4 + discriminator, ``L_MLM + 50 L_Disc``) on ``[CLS] window [SEP]`` examples of that text, then
   fine-tuning on SST-2, CoLA, MR, SUBJ, MPQA, CR with the shared mini-GLUE loop and layer-wise LR decay
   (:mod:`.finetune`). Equal pretraining compute: by default the baseline's step count is set so that its total
   measured pretraining FLOPs are >= Funnel's (``budget="flops"``); ``budget="steps"`` gives both the same steps
   (the paper's protocol);
4. a token-level probe (:func:`replaced_token_probe`): each discriminator scores the same held-out windows with
   15% of the non-special tokens replaced by draws from their own unigram distribution (fixed seeds): accuracy and
   ROC AUC, 0.5 for any context-free scorer; with the held-out id-AUC (the best context-free scorer of the
   discriminator's own task) it says whether a discriminator learned context (:mod:`.electra.evaluation`).

The claim is judged on the mini-GLUE average (:class:`paperzoo.recipes.Beats`: the Welch 95% interval of Funnel -
standard over seeds above 0). Wall-clock costs of the two encoders (ms per step, activation memory) and the
paper-scale FLOP table are benchmarks: ``paperzoo bench funnel-costs`` (:mod:`paperzoo.bench.funnel`).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model
from torch.utils.data import TensorDataset

from paperzoo.data.tokenizer import load_tokenizer, pack_documents, special_ids, train_wordpiece
from paperzoo.measure import count_flops
from paperzoo.papers.electra.evaluation import CONTEXT_LEARNED, context_verdict, replaced_token_probe
from paperzoo.papers.electra.objective import (
    ElectraPretrainer,
    ObjectiveConfig,
    evaluate_pretrainer,
    pretrain_step_flops,
)
from paperzoo.recipes import Beats, Job, Preset, cached, run_jobs, smoke, start
from paperzoo.train import TrainConfig, Trainer, seed_everything
from paperzoo.train.finetune import TASKS, FinetuneConfig, finetune_task, load_task

from .finetune import classifier_fn
from .model import FunnelBase, FunnelConfig, FunnelModel
from .pretrain import base_from_pretrained, build_pretrainer, is_standard, standard_config

__all__ = ["PAPER", "CLAIM", "ARCHS", "FunnelPreset", "PRESETS", "forward_flops_per_token", "matched_depth",
           "replaced_token_probe", "train_job", "run"]

PAPER = "funnel"
CLAIM = ("With comparable or fewer FLOPs, a Funnel encoder (sequence pooled to half length at each block, pooled "
         "queries attending to full-length keys) beats a standard Transformer of the same width on sequence-level "
         "tasks (paper Tables 1-2: B6-6-6 vs L12 after ELECTRA pretraining, GLUE); here: mini-GLUE (SST-2, CoLA, MR, "
         "SUBJ, MPQA, CR) after ELECTRA pretraining of both on IMDB train-fold text at equal measured FLOPs.")
ARCHS = ("funnel", "standard")
BUDGETS = {
    "flops": "equal measured FLOPs (the standard model's step count is ceil(steps x F_funnel / F_standard), FLOPs "
             "per step counted on one training batch including the generator and heads)",
    "steps": "equal steps (the paper's protocol); FLOPs per step differ",
}


@dataclass(frozen=True, kw_only=True)
class FunnelPreset(Preset):
    """One scale of the recipe. ``model``: the Funnel, whose ``vocab_size`` is the size of the WordPiece vocabulary
    to train (the trained vocabulary's size replaces it); ``train``: the ELECTRA pretraining; ``finetune``: mini-GLUE.

    ``budget``: "flops" (the baseline pretrains ``ceil(steps * F_funnel / F_standard)`` steps, so that its measured
    pretraining FLOPs are >= Funnel's) or "steps" (both pretrain ``train.steps``, the paper's protocol).
    """

    model: FunnelConfig
    finetune: FinetuneConfig
    generator_size: float = 0.25
    generator_depth: int = 2
    seq_len: int = 128
    docs: int | None = None  # IMDB train-fold reviews used (None: all 25000)
    eval_docs: int = 200  # held-out reviews (the last ones) for pretraining metrics and the probe
    eval_windows: int = 256
    tasks: tuple[str, ...] = TASKS
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    budget: str = "flops"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.model, FunnelConfig):
            raise ValueError(f"FunnelPreset.model must be a FunnelConfig, got {type(self.model).__name__}")
        if self.budget not in BUDGETS:
            raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {self.budget!r}")
        if is_standard(self.model):
            raise ValueError("the preset's Funnel config must pool (several blocks) or have a decoder")


PRESETS: dict[str, FunnelPreset] = {
    # the smoke test: well under a minute on one thread; asserts learning, not quality
    "tiny": FunnelPreset(
        model=FunnelConfig.preset("tiny", vocab_size=1000, pad_token_id=0, dropout=0.0, attn_dropout=0.0),
        train=TrainConfig(steps=40, batch_size=16, lr=2e-3, warmup_steps=4, schedule="linear", weight_decay=0.01,
                          eval_every=20, ckpt_every=20, log_every=10, device="cpu"),
        finetune=FinetuneConfig(lr=1e-3, max_steps=4, batch_size=16, max_len=32, max_train=64, max_test=64),
        generator_size=0.5, generator_depth=1, seq_len=64, docs=300, eval_docs=30, eval_windows=64, seeds=2,
        tasks=("SST-2", "MR")),
    # the committed reproduction on a 2-core CPU (--workers 2: 106 min): B2-2-2 (+2 decoder layers) vs a standard
    # Transformer (depth matched: 4) at d 128, the paper's B6-6-6 vs L12 at a third of the depth. Pretraining lr 2e-4:
    # ELECTRA's at batch 32 (5e-4 and 1e-3 collapse the discriminator there, see the ELECTRA README).
    "small": FunnelPreset(
        model=FunnelConfig.preset("small"),
        train=TrainConfig(steps=1200, batch_size=32, lr=2e-4, warmup_steps=120, schedule="linear",
                          weight_decay=0.01, eval_every=400, ckpt_every=200, log_every=20, device="cpu"),
        finetune=FinetuneConfig(lr=1e-3, epochs=2.0, max_steps=300, batch_size=32, max_len=64, max_train=6000),
        generator_depth=4, seq_len=128, docs=None, seeds=3),
    # the paper's base scale: B6-6-6 (+2 decoder layers) at d 768 vs its matched standard depth; a GPU machine
    "base": FunnelPreset(
        model=FunnelConfig.preset("base", pad_token_id=0),
        train=TrainConfig(steps=100_000, batch_size=128, lr=2e-4, warmup_steps=10_000, schedule="linear",
                          weight_decay=0.01, eval_every=5000, ckpt_every=2000, log_every=100, device="auto"),
        finetune=FinetuneConfig(lr=1e-4, epochs=3.0, batch_size=32, max_len=128),
        generator_size=1 / 3, generator_depth=12, seq_len=512, docs=None, eval_docs=500, eval_windows=512, seeds=5),
}


# ------------------------------------------------------------------------------------------------------- FLOPs
def forward_flops_per_token(cfg: FunnelConfig, seq_len: int, decoder: bool = False) -> float:
    """Forward FLOPs per token of the encoder (``decoder=True``: with Funnel's decoder, as in pretraining), counted by
    :func:`paperzoo.measure.count_flops` on the meta device for one sequence of ``seq_len`` (matmuls incl. the
    relative positional and token-type terms; embeddings, norms and softmax count 0)."""
    with torch.device("meta"):
        model = FunnelModel(cfg) if decoder and not is_standard(cfg) else FunnelBase(cfg)
        ids = torch.zeros(1, seq_len, dtype=torch.long)
        return count_flops(lambda: model(ids)) / seq_len


def matched_depth(cfg: FunnelConfig, seq_lens: int | tuple[int, ...], max_depth: int | None = None
                  ) -> tuple[int, dict[int, tuple[float, float]]]:
    """The smallest depth ``L`` whose standard Transformer (same width, :func:`.pretrain.standard_config`) has forward
    FLOPs per token >= the Funnel encoder's (no decoder: the fine-tuned model) at every length in ``seq_lens``.

    Returns ``(L, {seq_len: (funnel FLOPs/token, standard FLOPs/token)})``.
    """
    lens = (seq_lens,) if isinstance(seq_lens, int) else tuple(seq_lens)
    target = {t: forward_flops_per_token(cfg, t) for t in lens}
    max_depth = max_depth or 4 * sum(n * r for n, r in zip(cfg.block_sizes, cfg.block_repeats, strict=True))
    for depth in range(1, max_depth + 1):
        std = {t: forward_flops_per_token(standard_config(cfg, depth), t) for t in lens}
        if all(std[t] >= target[t] for t in lens):
            return depth, {t: (target[t], std[t]) for t in lens}
    raise ValueError(f"no standard depth <= {max_depth} reaches the Funnel's FLOPs")


def _pretraining_steps(p: FunnelPreset, step_flops: dict[str, int]) -> dict[str, int]:
    """Steps per architecture: Funnel's ``train.steps``; the baseline's as many, or enough for Funnel's FLOPs."""
    std = p.train.steps
    if p.budget == "flops":
        std = math.ceil(p.train.steps * step_flops["funnel"] / step_flops["standard"])
    return {"funnel": p.train.steps, "standard": std}


def _flop_costs(cfgs: dict[str, FunnelConfig], lens: tuple[int, ...], p: FunnelPreset, step_flops: dict[str, int],
                steps: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per architecture: measured forward FLOPs per token of the encoder at each length and of the pretraining
    discriminator (Funnel with its decoder), pretraining FLOPs per step and in all, encoder parameters."""
    out = {}
    for arch, cfg in cfgs.items():
        with torch.device("meta"):
            params = sum(q.numel() for q in FunnelBase(cfg).parameters())
        out[arch] = {"blocks": cfg.blocks, "decoder layers": cfg.num_decoder_layers,
                     **{f"encoder fwd MFLOP/token, seq {t}": forward_flops_per_token(cfg, t) / 1e6 for t in lens},
                     "pretraining discriminator fwd MFLOP/token":
                         forward_flops_per_token(cfg, p.seq_len, decoder=True) / 1e6,
                     "pretraining GFLOP/step": step_flops[arch] / 1e9, "steps": steps[arch],
                     "pretraining TFLOP": step_flops[arch] * steps[arch] / 1e12, "encoder params (M)": params / 1e6}
    return out


# -------------------------------------------------------------------------------------------------------- data
@functools.lru_cache(maxsize=2)
def _texts(docs: int | None) -> tuple[str, ...]:
    from paperzoo.data import load_imdb

    texts = load_imdb("train").texts
    return tuple(texts[:docs] if docs else texts)


def _vocabulary(run_dir: Path, p: FunnelPreset) -> tuple[Any, FunnelPreset]:
    """The run's WordPiece vocabulary (trained once, then read back) and the preset with the model's vocabulary size,
    pad id and the objective's [MASK] and special ids taken from it."""
    path = run_dir / "tokenizer.json"
    tok = load_tokenizer(path) if path.is_file() else train_wordpiece(list(_texts(p.docs)), p.model.vocab_size,
                                                                      path=path)
    ids = special_ids(tok)
    objective = replace(p.objective, mask_token_id=ids["mask"],
                        special_ids=(ids["pad"], ids["cls"], ids["sep"], ids["mask"]))
    model = replace(p.model, vocab_size=tok.get_vocab_size(), pad_token_id=ids["pad"])
    return tok, replace(p, model=model, objective=objective)


@functools.lru_cache(maxsize=2)
def _corpus(run_dir: str, docs: int | None, eval_docs: int, seq_len: int, eval_windows: int
            ) -> tuple[TensorDataset, TensorDataset]:
    """Training windows and held-out windows (from the last ``eval_docs`` reviews), once per process."""
    texts = _texts(docs)
    tok = load_tokenizer(Path(run_dir) / "tokenizer.json")
    cut = max(1, len(texts) - eval_docs)
    ids, mask = pack_documents(tok, texts[:cut], seq_len)
    e_ids, e_mask = pack_documents(tok, texts[cut:], seq_len, max_examples=eval_windows)
    return TensorDataset(ids, mask), TensorDataset(e_ids, e_mask)


@functools.lru_cache(maxsize=1)
def _task_data(tasks: tuple[str, ...]) -> dict:
    return {t: (load_task(t, "train"), load_task(t, "test")) for t in tasks}


# -------------------------------------------------------------------------------------------------------- jobs
def _device(p: FunnelPreset) -> torch.device:
    """The training device of the preset ("auto": CUDA when available)."""
    dev = p.train.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(dev)


def _on(data: TensorDataset, device: torch.device) -> TensorDataset:
    return data if device.type == "cpu" else TensorDataset(*(t.to(device) for t in data.tensors))


def _loss_fn(model, batch):
    ids, mask = batch
    out = model(ids, mask)
    return out.loss, out.metrics()


def _new_pretrainer(cfg: FunnelConfig, p: FunnelPreset) -> ElectraPretrainer:
    return build_pretrainer(cfg, p.generator_size, p.generator_depth, max_len=p.seq_len, objective=p.objective)


def _pretrain(model: ElectraPretrainer, job: Job, out: Path, p: FunnelPreset, steps: int, resume: bool,
              progress: bool, train: TensorDataset, held: TensorDataset) -> dict[str, Any]:
    """ELECTRA pretraining of ``model`` for ``steps`` steps (the engine's checkpoints in ``out/pretrain``), the
    weights saved to ``out/pretrainer.safetensors``, the held-out metrics before and after and the probe."""
    held_dev = _on(held, next(model.parameters()).device)
    before = evaluate_pretrainer(model.eval(), held_dev)
    model.train()
    trainer = Trainer(model, replace(p.train, steps=steps, seed=job.seed), train, _loss_fn,
                      eval_fn=lambda m: evaluate_pretrainer(m, held_dev), out_dir=out / "pretrain", progress=progress)
    fit = trainer.fit(resume=resume)
    save_model(model, str(out / "pretrainer.safetensors"))
    done = fit["step"] - (fit["resumed_from"] or 0)
    return {"arch": job.variant, "seed": job.seed, "steps": fit["step"], "before": before, "after": fit["eval"],
            "probe": replaced_token_probe(model, held), "wall_time_s": fit["wall_time_s"],
            "s_per_step": fit["wall_time_s"] / done if done else None, "config": job.config}


def train_job(job: Job, out: Path, resume: bool, progress: bool, run_dir: str, p: FunnelPreset,
              steps: dict[str, int]) -> dict[str, Any]:
    """Pretrain ``job.config`` (the job's architecture) with seed ``job.seed``, probe it, fine-tune it on every task.

    The stages are cached in ``out`` like the job itself: ``pretrain/job.json`` (with the engine's checkpoints and
    ``metrics.jsonl`` beside it, and ``pretrainer.safetensors``) and ``finetune/<task>/job.json``; with ``resume`` a
    finished stage is read back and an unfinished pretraining continues from its checkpoint.
    """
    tok = load_tokenizer(Path(run_dir) / "tokenizer.json")
    train, held = _corpus(run_dir, p.docs, p.eval_docs, p.seq_len, p.eval_windows)
    dev = _device(p)
    seed_everything(job.seed)
    model = _new_pretrainer(job.config, p).to(dev)
    pre = cached(out / "pretrain", resume,
                 lambda: _pretrain(model, job, out, p, steps[job.variant], resume, progress, train, held))
    load_model(model, str(out / "pretrainer.safetensors"), device=str(dev))  # trained here or read back
    base_state = {k: v.cpu() for k, v in base_from_pretrained(model.cpu()).state_dict().items()}
    ft, data = p.finetune, _task_data(tuple(p.tasks))
    build = classifier_fn(job.config, base_state, ft.lr, ft.layer_decay, ft.weight_decay)
    t0 = time.perf_counter()
    done = {t: cached(out / "finetune" / t, resume, lambda t=t: finetune_task(build, tok, t, ft, job.seed, data))
            for t in p.tasks}
    scores = {t: 100.0 * done[t]["score"] for t in p.tasks}
    scores["mini-GLUE"] = sum(scores.values()) / len(p.tasks)
    return {"arch": job.variant, "seed": job.seed, "pretrain": pre, "finetune": done, "scores": scores,
            "finetune_wall_time_s": time.perf_counter() - t0}


# ------------------------------------------------------------------------------------------------------ recipe
def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1,
        precision: str | None = None) -> Path:
    """Funnel vs the FLOP-matched standard Transformer over the preset's seeds; writes the report, returns the
    run folder. ``workers > 1`` runs that many (architecture, seed) jobs at once in separate processes."""
    from paperzoo.report import compare, write_result

    t_start = time.perf_counter()
    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, precision=precision)
    tok, p = _vocabulary(run_dir, p)
    lens = tuple(sorted({p.seq_len, p.finetune.max_len}))
    depth, _ = matched_depth(p.model, lens)  # the baseline: the shallowest with >= Funnel's FLOPs per token
    cfgs = {"funnel": p.model, "standard": standard_config(p.model, depth)}
    train, _ = _corpus(str(run_dir), p.docs, p.eval_docs, p.seq_len, p.eval_windows)
    batch = {"input_ids": train.tensors[0][:p.train.batch_size].to(_device(p)),
             "attention_mask": train.tensors[1][:p.train.batch_size].to(_device(p))}
    step_flops = {a: _step_flops(c, p, batch) for a, c in cfgs.items()}
    steps = _pretraining_steps(p, step_flops)  # equal pretraining compute, or equal steps
    jobs = [Job(arch, s, cfgs[arch]) for s in range(p.seeds) for arch in ARCHS]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress,
                   args=(str(run_dir), p, steps))

    glue = {a: [r["scores"]["mini-GLUE"] for r in res.of(a)] for a in ARCHS}
    verdict = smoke(Beats().judge(glue["funnel"], glue["standard"], "Funnel", "standard (mini-GLUE)"), name)
    per_task = {t: compare([r["scores"][t] for r in res.of("funnel")], [r["scores"][t] for r in res.of("standard")])
                for t in p.tasks}
    details = {
        "preset": name, "vocab_size": p.model.vocab_size, "pretraining examples": len(train),
        "standard depth": depth, "pretraining budget": p.budget, "pretraining steps": steps,
        "pretraining FLOPs per step": step_flops,
        "measured FLOPs and parameters": _flop_costs(cfgs, lens, p, step_flops, steps),
        "per-task Funnel - standard": {t: {"difference": c.diff, "CI low": c.lo, "CI high": c.hi,
                                           "verdict": c.verdict} for t, c in per_task.items()},
        "held-out pretraining metrics after training": {f"{j}": res[j.variant, j.seed]["pretrain"]["after"]
                                                        for j in jobs},
        "probe": {f"{j}": res[j.variant, j.seed]["pretrain"]["probe"] for j in jobs},
        "discriminator learned context": _context_learned(res),
        "configs": cfgs, "torch threads": torch.get_num_threads(), "workers": workers,
        "total wall time s": time.perf_counter() - t_start,
    }
    notes = (f"Seed s pretrains and fine-tunes both models, so the intervals include pretraining variance. Scores are "
             f"x100 (CoLA: MCC x100).\n\nFLOP matching: the standard Transformer (same code, one block of {depth} "
             "layers, no pooling, no decoder) is the shallowest whose measured forward FLOPs per token "
             "(torch.utils.flop_counter: matmuls, incl. the relative-attention terms) are >= the Funnel encoder's "
             f"at seq {', '.join(map(str, lens))}. Pretraining budget: {BUDGETS[p.budget]}.\n\nToken-level probe: "
             "both discriminators score the same held-out windows with 15% of the non-special tokens replaced by "
             "draws from their own unigram distribution (fixed seeds; a draw equal to the original counts as "
             "replaced); AUC over the non-special, non-pad tokens: 0.5 for any context-free scorer. id-AUC: the AUC "
             "of the best context-free scorer of the discriminator's own held-out task (per id, the probability "
             "that the current generator replaces a token shown as that id, from its softmax on an independent "
             "masking). A discriminator counts as having learned context only when AUC - id-AUC (paired over "
             "seeds) and probe - 0.5 both have 95% intervals above 0. Funnel's token-level output comes from its "
             "upsampling decoder, where the paper expects it to be comparatively weaker.")
    write_result(run_dir, PAPER, CLAIM, _measurements(res, p, verdict.comparison), verdict, details=details,
                 notes=notes, plots=_plots(run_dir, p, res))
    return run_dir


def _step_flops(cfg: FunnelConfig, p: FunnelPreset, batch: dict[str, torch.Tensor]) -> int:
    """Measured FLOPs of one pretraining step (generator, discriminator and heads, forward and backward)."""
    torch.manual_seed(0)
    return pretrain_step_flops(_new_pretrainer(cfg, p).to(_device(p)), batch)


def _finite(values: list) -> bool:
    return all(x is not None and math.isfinite(x) for x in values)


def _measurements(res, p: FunnelPreset, glue_diff) -> dict[str, Any]:
    """The report's per-seed figures: mini-GLUE (the claim), per task, the probe, the held-out RTD AUC."""
    by = {a: res.of(a) for a in ARCHS}
    m: dict[str, Any] = {"mini-GLUE Funnel": [r["scores"]["mini-GLUE"] for r in by["funnel"]],
                         "mini-GLUE standard": [r["scores"]["mini-GLUE"] for r in by["standard"]],
                         "Funnel - standard (mini-GLUE)": glue_diff}
    m.update({f"{t} {a}": [r["scores"][t] for r in by[a]] for t in p.tasks for a in ARCHS})
    auc = {a: [r["pretrain"]["probe"]["probe_auc"] for r in by[a]] for a in ARCHS}
    if _finite(auc["funnel"] + auc["standard"]):
        m.update({"probe AUC Funnel": auc["funnel"], "probe AUC standard": auc["standard"],
                  "Funnel - standard (probe AUC)": Beats().judge(auc["funnel"], auc["standard"]).comparison})
    m.update({f"probe accuracy {a}": [r["pretrain"]["probe"]["probe_acc"] for r in by[a]] for a in ARCHS})
    m.update({f"held-out RTD AUC (own generator) {a}": [r["pretrain"]["after"].get("eval_disc_auc") for r in by[a]]
              for a in ARCHS})
    m.update({f"held-out id-AUC {a}": [r["pretrain"]["after"].get("eval_id_auc") for r in by[a]] for a in ARCHS})
    m.update({f"AUC - id-AUC {a}": [r["pretrain"]["after"]["eval_disc_auc"] - r["pretrain"]["after"]["eval_id_auc"]
                                    for r in by[a]] for a in ARCHS if _has_health(by[a])})
    m.update({f"token-state cosine {a}": [r["pretrain"]["after"].get("eval_token_cosine") for r in by[a]]
              for a in ARCHS})
    m.update({f"pretraining s/step {a} (in training)": [r["pretrain"]["s_per_step"] for r in by[a]] for a in ARCHS})
    return {k: v for k, v in m.items() if not isinstance(v, list) or _finite(v)}


def _has_health(rows: list[dict]) -> bool:
    return all("eval_id_auc" in r["pretrain"]["after"] for r in rows)


def _context_learned(res) -> dict[str, str]:
    """Per architecture: whether its discriminator learned context (:func:`.electra.evaluation.context_verdict`)."""
    out = {}
    for a in ARCHS:
        rows = res.of(a)
        if not _has_health(rows):  # a job finished before these figures existed
            continue
        after = [r["pretrain"]["after"] for r in rows]
        v = context_verdict([x["eval_disc_auc"] for x in after], [x["eval_id_auc"] for x in after],
                            [r["pretrain"]["probe"]["probe_auc"] for r in rows], a)
        out[a] = f"{CONTEXT_LEARNED[v.verdict]}: {v.reason}"
    return out


def _plots(run_dir: Path, p: FunnelPreset, res) -> list[Path]:
    from paperzoo.report import plot_bars_with_ci, plot_metrics

    logs = {str(j): j.folder(run_dir) / "pretrain" / "metrics.jsonl" for j in res.jobs}
    logs = {k: v for k, v in logs.items() if v.is_file()}
    plots = []
    if logs:
        plots.append(plot_metrics(run_dir, logs, x="step", ys=("disc_loss", "mlm_loss"),
                                  path=run_dir / "pretraining.png"))
        plots.append(plot_metrics(run_dir, logs, x="step", ys=("eval_disc_auc", "eval_id_auc", "eval_probe_auc",
                                                               "eval_token_cosine"), path=run_dir / "health.png"))
    plots.append(plot_bars_with_ci({f"{t} {a}": [r["scores"][t] for r in res.of(a)] for t in (*p.tasks, "mini-GLUE")
                                    for a in ARCHS}, run_dir / "scores.png",
                                   title="mini-GLUE dev scores (x100; CoLA: MCC)", ylabel="score"))
    return plots

