"""``paperzoo reproduce electra``: ELECTRA vs MLM at equal measured pretraining FLOPs, judged on the mini-GLUE.

A job is one pretraining objective (``variant``) with one seed ``s``, in ``<run>/<variant>/seed-<s>/``:

1. a WordPiece vocabulary trained on the IMDB train-fold text (once per run, ``tokenizer.json``);
2. pretraining on ``[CLS] window [SEP]`` examples of that text: ELECTRA (generator 1/4 + discriminator, ``L_MLM +
   50 L_Disc``) for ``steps``; the MLM baseline (BERT-style, discriminator-sized, same masking) for as many steps as
   give the same FLOPs, both counted per step with ``torch.utils.flop_counter`` on the same batch;
3. fine-tuning the pretrained encoder on SST-2, CoLA, MR, SUBJ, MPQA, CR with seed ``s`` (layer-wise LR decay 0.8).

The claim is judged on the mini-GLUE average (Welch 95% interval of ELECTRA - MLM over seeds, margin 0).
Both recipes fine-tune a control without pretraining (the same encoder from its initialisation): the margin
of each pretrained encoder over it says whether pretraining helps at all at this fine-tuning budget.
``paperzoo reproduce electra-ablations`` runs the four ablations and the two references at equal steps.
Pretraining resumes through the engine's checkpoints, finished jobs from ``job.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.utils.data import TensorDataset

from paperzoo import recipes
from paperzoo.data.tokenizer import load_tokenizer, pack_documents, special_ids, train_wordpiece
from paperzoo.recipes import Beats, Job, all_of, run_jobs, smoke, start
from paperzoo.report import plot_bars_with_ci, plot_metrics, write_result
from paperzoo.train import TrainConfig, Trainer, seed_everything
from paperzoo.train.finetune import TASKS, FinetuneConfig, finetune_task, load_task
from paperzoo.train.optim import param_groups

from .evaluation import CONTEXT_LEARNED, context_verdict, token_state_cosine
from .finetune import classifier_fn
from .model import ElectraConfig, ElectraGenerator, build_generator_and_discriminator, mlm_config
from .objective import (
    DiscriminatorMLMHead,
    ElectraPretrainer,
    ObjectiveConfig,
    evaluate_pretrainer,
    pretrain_step_flops,
)

PAPER = "electra"
CLAIM = ("At equal pretraining compute, ELECTRA's replaced-token detection gives a better encoder than masked "
         "language modelling (paper: ELECTRA-Small 79.9 vs BERT-Small 75.1 GLUE dev); here: mini-GLUE (SST-2, CoLA, "
         "MR, SUBJ, MPQA, CR) after pretraining on IMDB train-fold text at equal measured FLOPs.")
ABLATION_CLAIM = ("Learning from all tokens drives ELECTRA's gain: ELECTRA beats ELECTRA 15% (discriminator loss "
                  "on masked tokens only) and BERT-style MLM at equal steps (paper Table 5: ELECTRA 85.0, All-Tokens "
                  "MLM 84.3, Replace MLM 82.4, ELECTRA 15% 82.4, BERT 82.2 GLUE).")


@dataclass(frozen=True, kw_only=True)
class Preset(recipes.Preset):
    """One scale of the recipes: ``train`` is the pretraining config; ``model.vocab_size`` is replaced by the
    trained vocabulary's size, the objective's token ids by the tokenizer's."""

    model: ElectraConfig
    finetune: FinetuneConfig
    vocab_size: int = 8000
    seq_len: int = 128
    docs: int | None = None  # IMDB train-fold reviews used (None: all 25000)
    eval_docs: int = 200  # held-out reviews (the last ones) for pretraining metrics
    tasks: tuple[str, ...] = TASKS
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    generator_lr: float = 1.0  # the generator's own parameters train at this fraction of train.lr (tables shared: 1)

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 < self.generator_lr <= 1.0:
            raise ValueError(f"Preset.generator_lr: expected a fraction in (0, 1], got {self.generator_lr}")


# ELECTRA-Small's 5e-4 is for batch 128; at batch 32 the discriminator collapses to a constant "original" output at
# 5e-4 and 1e-3 (held-out AUC 0.57 / 0.52, token-state cosine 0.98) but not at 2e-4 (AUC 0.83, cosine 0.71): see the
# README. MLM uses the same rate, as in the paper.
PRETRAIN_LR = 2e-4

# The configuration where the discriminator learns context at this scale, for the `context` presets (RoPE, no
# dropout, no constant token-type row, lr 1e-3, the search's vocabulary of 8,000). The committed search
# (docs/reports/electra-context, 3 seeds x 500 steps) chose rope-fast-slow-gen, these fields with the generator's own
# parameters at 1/4 of the rate: the first candidate whose AUC - id-AUC and probe intervals both lie above their
# margins (probe 0.707 / 0.648 / 0.686). rope-fast learned on seeds 0 and 2 only (probe 0.697 / 0.526 / 0.652).
CONTEXT_CANDIDATE = "rope-fast-slow-gen"
CONTEXT_MODEL = {"dropout": 0.0, "attn_dropout": 0.0, "type_vocab_size": 0, "position": "rotary"}
CONTEXT_LR = 1e-3
CONTEXT_GENERATOR_LR = 0.25

# the smoke test: seconds; asserts learning, not quality
TINY = Preset(
    model=ElectraConfig.preset("tiny", generator_size=0.25, max_len=64),
    train=TrainConfig(steps=40, batch_size=16, lr=2e-3, warmup_steps=4, schedule="linear", weight_decay=0.01,
                      eval_every=20, ckpt_every=20, log_every=10, device="cpu"),
    finetune=FinetuneConfig(lr=1e-3, max_steps=4, batch_size=16, max_len=32, max_train=64, max_test=64),
    vocab_size=1000, seq_len=64, docs=300, eval_docs=30, seeds=2)

PRESETS: dict[str, Preset] = {
    "tiny": TINY,
    # the committed report: ~2 h on 2 cores (0.6 s per pretraining step: 6 pretraining runs of ~15 min, 36 fine-tunings)
    "small": Preset(
        model=ElectraConfig.preset("small"),
        train=TrainConfig(steps=1500, batch_size=32, lr=PRETRAIN_LR, warmup_steps=150, schedule="linear",
                          weight_decay=0.01, eval_every=250, ckpt_every=250, log_every=25, device="cpu"),
        finetune=FinetuneConfig(lr=1e-3, epochs=2.0, max_steps=400, batch_size=32, max_len=64, max_train=8000),
        vocab_size=12000, seq_len=128, docs=None, seeds=3),
}
ABLATIONS_PRESETS: dict[str, Preset] = {
    "tiny": TINY,
    # the committed report: ~15 min per objective and seed on 2 cores (~0.3 s per pretraining step)
    "small": Preset(
        model=ElectraConfig.preset("small"),
        train=TrainConfig(steps=300, batch_size=32, lr=PRETRAIN_LR, warmup_steps=30, schedule="linear",
                          weight_decay=0.01, eval_every=100, ckpt_every=100, log_every=10, device="cpu"),
        finetune=FinetuneConfig(lr=1e-3, epochs=2.0, max_steps=200, batch_size=32, max_len=64, max_train=4000),
        vocab_size=8000, seq_len=128, docs=5000, seeds=3),
}


def _at_context(p: Preset, **train) -> Preset:
    """``p`` at the context configuration: ``CONTEXT_MODEL``, ``CONTEXT_LR``, ``CONTEXT_GENERATOR_LR``, the search's
    vocabulary of 8,000, bf16 where the CPU has it (pretraining and fine-tuning), ``train`` changes; the MLM baseline
    gets the same model and rate (it has no generator)."""
    return replace(p, model=replace(p.model, **CONTEXT_MODEL), vocab_size=8000, generator_lr=CONTEXT_GENERATOR_LR,
                   train=replace(p.train, lr=CONTEXT_LR, precision="auto", **train),
                   finetune=replace(p.finetune, precision="auto"))


PRESETS["context"] = _at_context(PRESETS["small"])
# 1,000 steps on every review: at 300 the context probe has not left 0.5
ABLATIONS_PRESETS["context"] = replace(_at_context(ABLATIONS_PRESETS["small"], steps=1000, warmup_steps=100,
                                                   eval_every=250, ckpt_every=250, log_every=25), docs=None)

ABLATION_MODES = ("electra", "all-tokens-mlm", "replace-mlm", "electra-15", "mlm")
DISCRIMINATOR_MODES = ("electra", "electra-15")  # the objectives with a replaced-token detector
CONTROL = "none"  # no pretraining: the discriminator-sized encoder fine-tuned from its initialisation
NAME_OF = {**{m: m for m in ABLATION_MODES}, CONTROL: "no pretraining (control)"}


# ----------------------------------------------------------------------------------------------------- data
def _imdb_texts(docs: int | None) -> list[str]:
    from paperzoo.data import load_imdb

    texts = load_imdb("train").texts
    return texts[:docs] if docs else texts


def _tokenizer(run_dir: Path, texts: list[str], preset: Preset):
    path = run_dir / "tokenizer.json"
    if path.is_file():
        return load_tokenizer(path)
    return train_wordpiece(texts, preset.vocab_size, path=path)


def _pretrain_data(tok, texts: list[str], preset: Preset) -> tuple[TensorDataset, TensorDataset]:
    cut = max(1, len(texts) - preset.eval_docs)
    ids, mask = pack_documents(tok, texts[:cut], preset.seq_len)
    e_ids, e_mask = pack_documents(tok, texts[cut:], preset.seq_len, max_examples=256)
    return TensorDataset(ids, mask), TensorDataset(e_ids, e_mask)


def prepare_pretraining(run_dir: Path, p):
    """(preset with the tokenizer's ids and vocabulary size, tokenizer, pretraining data, held-out windows), for
    any preset with ``docs``, ``vocab_size``, ``seq_len``, ``eval_docs``, ``model`` and ``objective``."""
    texts = _imdb_texts(p.docs)
    tok = _tokenizer(run_dir, texts, p)
    ids = special_ids(tok)
    obj = replace(p.objective, mask_token_id=ids["mask"], special_ids=(ids["pad"], ids["cls"], ids["sep"], ids["mask"]))
    p = replace(p, objective=obj, model=replace(p.model, vocab_size=tok.get_vocab_size()))
    train, held = _pretrain_data(tok, texts, p)
    return p, tok, train, held


def prepare(run_dir: Path, p: Preset):
    """(preset with the tokenizer's ids and vocabulary size, tokenizer, pretraining data, held-out windows, tasks)."""
    p, tok, train, held = prepare_pretraining(run_dir, p)
    data = {t: (load_task(t, "train"), load_task(t, "test")) for t in p.tasks}
    return p, tok, train, held, data


# ----------------------------------------------------------------------------------------------- pretraining
def build_pretrainer(mode: str, model: ElectraConfig, objective: ObjectiveConfig) -> ElectraPretrainer:
    """The model pretrained by ``mode`` ("mlm": a discriminator-sized MLM; otherwise generator + discriminator)."""
    obj = replace(objective, mode=mode)
    if mode == "mlm":
        return ElectraPretrainer(ElectraGenerator(mlm_config(model)), None, None, obj)
    gen, disc = build_generator_and_discriminator(model)
    if mode in ("electra", "electra-15"):
        return ElectraPretrainer(gen, disc.body, disc.head, obj)
    head = DiscriminatorMLMHead(disc.body.embeddings.word, model.dim, model.norm_eps, copy=mode == "all-tokens-mlm")
    return ElectraPretrainer(gen, disc.body, None, obj, mlm_head=head)


def generator_groups(model: ElectraPretrainer, cfg: TrainConfig, ratio: float) -> list[dict] | None:
    """AdamW groups with the generator's own parameters at ``ratio * cfg.lr`` (weight decay as usual); the tables
    it shares with the discriminator stay at the full rate. None (the engine's default groups) when ratio is 1."""
    if ratio == 1.0:
        return None
    shared = {id(p) for p in model.discriminator_body.parameters()}
    own = {id(p) for p in model.generator.parameters()} - shared
    groups = []
    for g in param_groups(model, cfg.weight_decay):
        mine = [p for p in g["params"] if id(p) in own]
        rest = [p for p in g["params"] if id(p) not in own]
        groups += [{**g, "params": rest, "lr": cfg.lr}] if rest else []
        groups += [{**g, "params": mine, "lr": cfg.lr * ratio}] if mine else []
    return groups


def _loss_fn(model, batch):
    ids, mask = batch
    out = model(ids, mask)
    return out.loss, out.metrics()


def pretrain(model: ElectraPretrainer, cfg: TrainConfig, train: TensorDataset, held_out: TensorDataset,
             out: Path, resume: bool, progress: bool = True, param_groups: list[dict] | None = None) -> dict:
    """Train ``model`` with ``cfg`` (checkpoints and ``metrics.jsonl`` in ``out``; AdamW over ``param_groups``
    when given); held-out metrics before/after."""
    before = evaluate_pretrainer(model.eval(), held_out)
    model.train()
    trainer = Trainer(model, cfg, train, _loss_fn, eval_fn=lambda m: evaluate_pretrainer(m, held_out),
                      out_dir=out, progress=progress, param_groups=param_groups)
    fit = trainer.fit(resume=resume)
    return {"steps": fit["step"], "before": before, "after": fit["eval"], "wall_time_s": fit["wall_time_s"]}


def step_flops(mode: str, p: Preset, batch: TensorDataset) -> int:
    """FLOPs of one pretraining step of ``mode`` on the first ``batch_size`` training examples."""
    torch.manual_seed(0)
    model = build_pretrainer(mode, p.model, p.objective)
    ids, mask = batch.tensors
    n = p.train.batch_size
    return pretrain_step_flops(model, {"input_ids": ids[:n], "attention_mask": mask[:n]})


def finetune_all(encoder_state: dict[str, torch.Tensor], p: Preset, tok, seed: int, data: dict) -> dict[str, float]:
    """Scores (x100) of the encoder on every task of ``p`` and their mean, ``mini-GLUE``."""
    scores = {t: 100.0 * finetune_task(classifier_fn(p.model, encoder_state, p.finetune), tok, t, p.finetune, seed,
                                       data)["score"] for t in p.tasks}
    return {**scores, "mini-GLUE": sum(scores.values()) / len(p.tasks)}


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: Preset, tok, train: TensorDataset,
              held: TensorDataset, data: dict) -> dict:
    """Pretrain ``job.variant`` for ``job.config`` steps with ``job.seed`` (``CONTROL``: none), save the encoder,
    measure its token-state cosine and fine-tune it on every task."""
    seed_everything(job.seed)
    mode = "mlm" if job.variant == CONTROL else job.variant
    model = build_pretrainer(mode, p.model, p.objective)
    cfg = replace(p.train, seed=job.seed, steps=job.config)
    groups = None if mode == "mlm" else generator_groups(model, cfg, p.generator_lr)  # MLM: no generator
    summary = {"steps": 0} if job.variant == CONTROL else pretrain(model, cfg, train, held, out, resume, progress,
                                                                   groups)
    encoder = model.encoder()
    state = {k: v.detach().contiguous() for k, v in encoder.state_dict().items()}
    save_file(state, str(out / "encoder.safetensors"))
    cosine = token_state_cosine(encoder, held)
    return {**summary, "token-state cosine": cosine, **finetune_all(state, p, tok, job.seed, data)}


# ------------------------------------------------------------------------------------------------- the recipes
NOTES = ("Seed s pretrains every model and fine-tunes it, so the intervals include pretraining variance. Scores are "
         "x100 (CoLA: Matthews correlation x100). FLOPs are counted by torch.utils.flop_counter (matmuls) on one "
         "training batch per model. Token-state cosine: mean pairwise cosine of the pretrained encoder's final "
         "hidden states over 1,024 held-out tokens (near 1: every token mapped to one vector, a collapsed encoder). "
         "Discriminator health, on the held-out windows after pretraining (paperzoo.papers.electra.evaluation): "
         "held-out disc AUC, with the masking and sampling seeds fixed; id-AUC, the AUC on the same positions of "
         "a context-free scorer (per id, the probability that the current generator's replacement shows that id, "
         "from its softmax on an independent masking of the other half of the windows); context probe AUC, the "
         "discriminator on the same windows with 15% of the non-special tokens replaced by draws from their own "
         "unigram distribution (0.5 for any context-free scorer). A discriminator counts as having learned context "
         "only when AUC - id-AUC (paired over seeds) and probe - 0.5 both have 95% intervals above 0.")


def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1,
        precision: str | None = None) -> Path:
    """ELECTRA vs MLM at equal FLOPs over ``seeds`` seeds; writes the report and returns the run folder."""
    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, "electra", precision=precision)
    p, tok, train, held, data = prepare(run_dir, p)
    flops = {mode: step_flops(mode, p, train) for mode in ("electra", "mlm")}
    steps = {"electra": p.train.steps, "mlm": max(1, round(p.train.steps * flops["electra"] / flops["mlm"]))}
    modes = ("electra", "mlm", CONTROL)  # the control never pretrains: its step count is unused
    jobs = [Job(mode, s, steps.get(mode, p.train.steps)) for s in range(p.seeds) for mode in modes]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress,
                   args=(p, tok, train, held, data))
    score = {(t, mode): res.values(mode, t) for t in (*p.tasks, "mini-GLUE") for mode in modes}
    verdict = smoke(Beats().judge(score["mini-GLUE", "electra"], score["mini-GLUE", "mlm"], "ELECTRA", "MLM"), name)
    # does pretraining help at all at this fine-tuning budget? each pretrained encoder against the untrained one
    vs_control = {mode: Beats().judge(score["mini-GLUE", mode], score["mini-GLUE", CONTROL], label,
                                      NAME_OF[CONTROL]) for mode, label in (("electra", "ELECTRA"), ("mlm", "MLM"))}
    measurements = {"mini-GLUE ELECTRA": score["mini-GLUE", "electra"], "mini-GLUE MLM": score["mini-GLUE", "mlm"],
                    f"mini-GLUE {NAME_OF[CONTROL]}": score["mini-GLUE", CONTROL],
                    "ELECTRA - MLM (mini-GLUE)": verdict.comparison,
                    "ELECTRA - no pretraining (mini-GLUE)": vs_control["electra"].comparison,
                    "MLM - no pretraining (mini-GLUE)": vs_control["mlm"].comparison,
                    **{f"{t} {mode}": score[t, mode] for mode in ("electra", "mlm") for t in p.tasks},
                    **{f"token-state cosine {NAME_OF[mode]}": res.values(mode, "token-state cosine") for mode in modes}}
    health, learned = _context_health(res, ("electra",))
    measurements.update(health)
    metrics = {f"{mode} seed {s}": run_dir / mode / f"seed-{s}" / "metrics.jsonl" for s in range(p.seeds)
               for mode in ("electra", "mlm")}
    plots = [plot_metrics(run_dir, metrics, x="step", ys=("mlm_loss",), path=run_dir / "mlm_loss.png"),
             plot_metrics(run_dir, {k: v for k, v in metrics.items() if k.startswith("electra")}, x="step",
                          ys=("disc_loss", "disc_acc"), path=run_dir / "discriminator.png"),
             _health_plot(run_dir, {k: v for k, v in metrics.items() if k.startswith("electra")}),
             plot_bars_with_ci({f"{t} {mode}": v for (t, mode), v in score.items()}, run_dir / "scores.png",
                               title="mini-GLUE dev scores (x100; CoLA: MCC)", ylabel="score")]
    details = {"preset": name, "vocab_size": p.model.vocab_size, "pretraining examples": len(train),
               "FLOPs per pretraining step": flops, "pretraining steps": steps,
               "pretraining FLOPs": {mode: flops[mode] * steps[mode] for mode in steps},
               "per-task ELECTRA - MLM": {t: str(Beats().judge(score[t, "electra"], score[t, "mlm"]).comparison)
                                          for t in p.tasks},
               "pretraining vs none (mini-GLUE)": {k: str(v.comparison) for k, v in vs_control.items()},
               "per task, no pretraining (control)": {t: score[t, CONTROL] for t in p.tasks},
               "held-out metrics after pretraining": _held_out(res, ("electra", "mlm")),
               "discriminator learned context": learned, "torch threads": torch.get_num_threads()}
    notes = NOTES + (" The MLM step count is chosen to match ELECTRA's total pretraining FLOPs. Control: the "
                     "discriminator-sized encoder fine-tuned from its random initialisation, no pretraining, with the "
                     "same seeds and fine-tuning budget: a pretrained encoder that does not beat it gained nothing "
                     "from pretraining that this fine-tuning budget can show.")
    write_result(run_dir, PAPER, CLAIM, measurements, verdict, details=details, notes=notes, plots=plots)
    return run_dir


def run_ablations(preset: str | None = None, seeds: int | None = None, out: Path | None = None,
                  resume: bool = False, progress: bool = True, workers: int = 1,
                  precision: str | None = None) -> Path:
    """ELECTRA, All-Tokens MLM, Replace MLM, ELECTRA 15% and MLM at equal steps, and the control; writes the report."""
    name, p, run_dir = start(PAPER, ABLATIONS_PRESETS, preset, seeds, out, "electra-ablations", precision=precision)
    p, tok, train, held, data = prepare(run_dir, p)
    flops = {mode: step_flops(mode, p, train) for mode in ABLATION_MODES}
    modes = (*ABLATION_MODES, CONTROL)
    jobs = [Job(mode, s, p.train.steps) for s in range(p.seeds) for mode in modes]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress,
                   args=(p, tok, train, held, data))
    glue = {mode: res.values(mode, "mini-GLUE") for mode in modes}
    vs = {mode: Beats().judge(glue["electra"], glue[mode], "ELECTRA", mode) for mode in ABLATION_MODES[1:]}
    verdict = smoke(all_of(vs["electra-15"], vs["mlm"]), name)
    measurements = {**{f"mini-GLUE {NAME_OF[m]}": glue[m] for m in modes},
                    **{f"token-state cosine {NAME_OF[m]}": res.values(m, "token-state cosine") for m in modes},
                    **{f"ELECTRA - {m}": vs[m].comparison for m in ("electra-15", "mlm")}}
    health, learned = _context_health(res, DISCRIMINATOR_MODES)
    measurements.update(health)
    plots = [plot_bars_with_ci({NAME_OF[m]: glue[m] for m in modes}, run_dir / "ablations.png",
                               title="mini-GLUE by pretraining objective (equal steps)", ylabel="mini-GLUE"),
             _health_plot(run_dir, {f"{m} seed {s}": run_dir / m / f"seed-{s}" / "metrics.jsonl"
                                    for m in DISCRIMINATOR_MODES for s in range(p.seeds)})]
    details = {"preset": name, "FLOPs per pretraining step": flops,
               "per task": {NAME_OF[m]: {t: res.values(m, t) for t in p.tasks} for m in modes},
               "ELECTRA vs All-Tokens MLM": str(vs["all-tokens-mlm"].comparison),
               "ELECTRA vs Replace MLM": str(vs["replace-mlm"].comparison),
               "held-out metrics after pretraining": _held_out(res, DISCRIMINATOR_MODES),
               "discriminator learned context": learned}
    notes = (NOTES + " Equal steps for every objective, as the paper's Table 5; their FLOPs per step differ and are "
             "listed. Control: the same encoder fine-tuned from its random initialisation, no pretraining.")
    write_result(run_dir, PAPER, ABLATION_CLAIM, measurements, verdict, details=details, notes=notes, plots=plots)
    return run_dir


def _held_out(res: recipes.Results, modes: tuple[str, ...]) -> dict[str, dict[str, list[float]]]:
    """Per mode, the main held-out pretraining metrics after training, one value per seed."""
    keys = ("eval_mlm_loss", "eval_gen_acc", "eval_disc_loss", "eval_disc_auc", "eval_id_auc", "eval_probe_auc",
            "eval_token_cosine", "eval_disc_acc", "eval_baseline_acc")
    return {mode: {k.removeprefix("eval_"): [round(r["after"][k], 4) for r in res.of(mode)]
                   for k in keys if k in res.of(mode)[0]["after"]} for mode in modes}


def _context_health(res: recipes.Results, modes: tuple[str, ...]) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Per discriminator mode, per seed, after pretraining: held-out AUC, id-AUC, their difference and the context
    probe (measurements), and whether the discriminator learned context (:func:`.evaluation.context_verdict`)."""
    m: dict[str, list[float]] = {}
    learned: dict[str, str] = {}
    for mode in modes:
        after = [r["after"] for r in res.of(mode)]
        if not all("eval_id_auc" in a for a in after):  # a job finished before these figures existed
            continue
        auc, ida, probe = ([a[k] for a in after] for k in ("eval_disc_auc", "eval_id_auc", "eval_probe_auc"))
        m.update({f"held-out disc AUC {mode}": auc, f"held-out id-AUC {mode}": ida,
                  f"AUC - id-AUC {mode}": [a - b for a, b in zip(auc, ida, strict=True)],
                  f"context probe AUC {mode}": probe})
        v = context_verdict(auc, ida, probe, NAME_OF[mode])
        learned[mode] = f"{CONTEXT_LEARNED[v.verdict]}: {v.reason}"
    return m, learned


def _health_plot(run_dir: Path, logs: dict[str, Path]) -> Path:
    """Held-out disc AUC, id-AUC, context probe and token-state cosine against the step, one line per job."""
    return plot_metrics(run_dir, logs, x="step", ys=("eval_disc_auc", "eval_id_auc", "eval_probe_auc",
                                                     "eval_token_cosine"), path=run_dir / "health.png")
