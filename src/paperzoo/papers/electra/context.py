"""``paperzoo reproduce electra-context``: a laptop-scale configuration where replaced-token detection learns context.

At the recipes' configuration (learned absolute positions, lr 2e-4) the discriminator's held-out AUC tracks its
id-AUC and the context probe stays at 0.5: it learns which ids the generator likes, not the sentence (README,
"Does the discriminator learn context?"). The copy task located the causes: absolute positions, a low rate, the
projection amplifying the shared token-type row. This recipe tests, on the real objective (generator +
discriminator on IMDB, the recipes' small model), candidate configurations one knob at a time from the copy
task's winner, each with ``seeds`` seeds, pretraining only:

1. ``today``: the recipes' configuration (learned absolute positions, dropout 0.1, a token-type row, lr 2e-4);
2. ``learned-fast``: lr 1e-3, no dropout, no token-type row, still learned positions (isolates the positions);
3. ``rope-fast``, ``t5-fast``: the same with RoPE / T5's relative bias (the copy task's winners);
4. on ``rope-fast``: a weaker generator (``small-gen``: 1/8 of the discriminator's width instead of 1/4), a slower
   one (``slow-gen``: its own parameters at 1/4 of the rate; the shared tables stay at the full rate), no
   factorised projection (``no-projection``: embeddings as wide as the hidden states).

Every ``eval_every`` steps the held-out evaluation records AUC, id-AUC, the context probe and the token-state
cosine (:mod:`.evaluation`), so each candidate's curve says when, if ever, the probe leaves 0.5. A candidate has
learned context when AUC - id-AUC and probe - 0.5 both have 95% intervals above 0 over seeds
(:func:`.evaluation.context_verdict`); the claim holds when one candidate has. The first candidate in the
preset's order that has is ``details["chosen"]``, for the ``electra`` and ``electra-ablations`` re-runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch
from torch.utils.data import TensorDataset

from paperzoo import recipes
from paperzoo.recipes import Job, run_jobs, smoke, start
from paperzoo.report import plot_metrics, read_metrics, write_result
from paperzoo.report.verdict import Verdict
from paperzoo.train import TrainConfig, seed_everything

from .evaluation import CONTEXT_LEARNED, context_verdict
from .model import ElectraConfig
from .objective import ObjectiveConfig
from .recipe import PAPER, build_pretrainer, generator_groups, prepare_pretraining, pretrain

CLAIM = ("At laptop scale some configuration of ELECTRA's pretraining (positions, rate, generator size or speed, "
         "embedding projection) gives a discriminator that learns context: held-out AUC above its id-AUC and the "
         "context probe above 0.5, each with a 95% interval over seeds.")
# what "the probe has left 0.5" means on one seed's curve (a description of the curve, not the verdict)
PROBE_LEFT = 0.55


@dataclass(frozen=True)
class Candidate:
    """One configuration: ``ElectraConfig`` / ``ObjectiveConfig`` / ``TrainConfig`` fields it changes, and
    ``generator_lr``, the fraction of the learning rate for the generator's own parameters (not the tables it
    shares with the discriminator)."""

    name: str
    model: dict = field(default_factory=dict)
    objective: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    generator_lr: float = 1.0

    def __post_init__(self):  # field names checked here: a typo fails when the preset is built
        for what, cls, changes in (("model", ElectraConfig, self.model), ("objective", ObjectiveConfig,
                                   self.objective), ("train", TrainConfig, self.train)):
            valid = {f.name for f in fields(cls)}
            unknown = sorted(set(changes) - valid)
            if unknown:
                raise ValueError(f"Candidate {self.name!r}: unknown {what} fields {unknown}; valid: {sorted(valid)}")
        if "mode" in self.objective:
            raise ValueError(f"Candidate {self.name!r}: the objective's mode is ELECTRA's here; leave 'mode' out")
        if not (isinstance(self.generator_lr, int | float) and 0 < self.generator_lr <= 1):
            raise ValueError(f"Candidate {self.name!r}: generator_lr must be in (0, 1], got {self.generator_lr!r}")


@dataclass(frozen=True, kw_only=True)
class Preset(recipes.Preset):
    """The recipes' pretraining (``model``, ``train``, the data's sizes) and the candidates changing it."""

    model: ElectraConfig
    candidates: tuple[Candidate, ...]
    vocab_size: int = 8000
    seq_len: int = 128
    docs: int | None = None
    eval_docs: int = 200
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)

    def __post_init__(self):
        super().__post_init__()
        names = [c.name for c in self.candidates]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"Preset.candidates: expected distinct candidate names, got {names}")


# the copy task's winner at the recipes' scale (README): a rate of 1e-3, no dropout, no (constant) token-type row
FAST = {"dropout": 0.0, "attn_dropout": 0.0, "type_vocab_size": 0}


def _candidates(small_dim: int) -> tuple[Candidate, ...]:
    rope = {**FAST, "position": "rotary"}
    return (
        Candidate("today"),
        Candidate("learned-fast", model=FAST, train={"lr": 1e-3}),
        Candidate("rope-fast", model=rope, train={"lr": 1e-3}),
        Candidate("t5-fast", model={**FAST, "position": "t5"}, train={"lr": 1e-3}),
        Candidate("rope-fast-small-gen", model={**rope, "generator_size": 0.125}, train={"lr": 1e-3}),
        Candidate("rope-fast-slow-gen", model=rope, train={"lr": 1e-3}, generator_lr=0.25),
        Candidate("rope-fast-no-projection", model={**rope, "embedding_dim": small_dim}, train={"lr": 1e-3}),
    )


PRESETS: dict[str, Preset] = {
    # seconds: two candidates, asserts the plumbing, not the finding
    "tiny": Preset(
        model=ElectraConfig.preset("tiny", generator_size=0.25, max_len=64),
        train=TrainConfig(steps=20, batch_size=16, lr=2e-3, warmup_steps=4, schedule="linear", weight_decay=0.01,
                          eval_every=10, ckpt_every=10, log_every=10, device="cpu"),
        candidates=(Candidate("today"), Candidate("rope-slow-gen", model={"position": "rotary"}, generator_lr=0.5)),
        vocab_size=1000, seq_len=64, docs=300, eval_docs=30, seeds=2),
    # ~80 min on 2 cores with --workers 2 where the CPU has no fast bf16, less with it (7 candidates x 3 seeds x 500
    # steps; fp32 on an AVX2 EPYC: ~1.0 s a step per single-thread worker, ~7 min a cell with its evaluations; the
    # committed run took 1 h 17 min): the recipes' small model and batch, on every IMDB train review (5x the
    # ablations' text). 500 steps: in a 1,500-step seed-0 run rope-fast's probe was 0.56 at step 250 and 0.80 at
    # 1,000; 1,000-step cells do not fit a session there, and 2 seeds would make every interval 3.6x wider (t 12.7
    # vs 4.3)
    "small": Preset(
        model=ElectraConfig.preset("small"),
        train=TrainConfig(steps=500, batch_size=32, lr=2e-4, warmup_steps=100, schedule="linear", weight_decay=0.01,
                          eval_every=125, ckpt_every=250, log_every=25, device="cpu", precision="auto"),
        candidates=_candidates(ElectraConfig.preset("small").dim),
        vocab_size=8000, seq_len=128, docs=None, eval_docs=200, seeds=3),
}


# --------------------------------------------------------------------------------------------------- one job
def configure(p: Preset, c: Candidate) -> tuple[ElectraConfig, ObjectiveConfig, TrainConfig]:
    """The candidate's model, objective and training configs: the preset's with the candidate's fields."""
    return replace(p.model, **c.model), replace(p.objective, **c.objective), replace(p.train, **c.train)


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: Preset, train: TensorDataset,
              held: TensorDataset) -> dict:
    """Pretrain candidate ``job.config`` with ``job.seed``; the held-out health figures after, and along, training."""
    c: Candidate = job.config
    model_cfg, obj, cfg = configure(p, c)
    seed_everything(job.seed)
    model = build_pretrainer("electra", model_cfg, obj)
    cfg = replace(cfg, seed=job.seed)
    summary = pretrain(model, cfg, train, held, out, resume, progress, generator_groups(model, cfg, c.generator_lr))
    curve = [r for r in read_metrics(out / "metrics.jsonl") if r.get("event") == "eval" and "eval_probe_auc" in r]
    left = next((r["step"] for r in curve if r["eval_probe_auc"] > PROBE_LEFT), None)
    return {**summary, "probe first above": left,
            "curve": [{k: r.get(k) for k in ("step", "eval_disc_auc", "eval_id_auc", "eval_probe_auc",
                                             "eval_token_cosine")} for r in curve]}


# ------------------------------------------------------------------------------------------------ the recipe
def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1, precision: str | None = None) -> Path:
    """Every candidate over ``seeds`` seeds; writes the report and returns the run folder."""
    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, "electra-context", precision=precision)
    p, _, train, held = prepare_pretraining(run_dir, p)
    jobs = [Job(c.name, s, c) for s in range(p.seeds) for c in p.candidates]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress,
                   args=(p, train, held))
    measurements, verdicts, learned, first = {}, {}, {}, {}
    for c in p.candidates:
        after = [r["after"] for r in res.of(c.name)]
        auc, ida, probe = ([a[k] for a in after] for k in ("eval_disc_auc", "eval_id_auc", "eval_probe_auc"))
        measurements.update({f"AUC {c.name}": auc, f"id-AUC {c.name}": ida,
                             f"AUC - id-AUC {c.name}": [a - b for a, b in zip(auc, ida, strict=True)],
                             f"context probe AUC {c.name}": probe,
                             f"token-state cosine {c.name}": [a["eval_token_cosine"] for a in after]})
        verdicts[c.name] = context_verdict(auc, ida, probe, c.name)
        learned[c.name] = f"{CONTEXT_LEARNED[verdicts[c.name].verdict]}: {verdicts[c.name].reason}"
        first[c.name] = [r["probe first above"] for r in res.of(c.name)]
    chosen = next((c for c in p.candidates if verdicts[c.name].verdict == "reproduced"), None)
    verdict = smoke(_any_of(verdicts), name)
    logs = {f"{c.name} seed {s}": run_dir / c.name / f"seed-{s}" / "metrics.jsonl"
            for c in p.candidates for s in range(p.seeds)}
    plots = [plot_metrics(run_dir, logs, x="step", ys=("eval_disc_auc", "eval_id_auc", "eval_probe_auc",
                                                       "eval_token_cosine"), path=run_dir / "health.png")]
    details = {"preset": name, "vocab_size": p.model.vocab_size, "pretraining examples": len(train),
               "candidates (changes to the preset)": {c.name: _changes(c) for c in p.candidates},
               "discriminator learned context": learned,
               f"first evaluated step with probe > {PROBE_LEFT} (per seed; None: never)": first,
               "curves, seed 0 (step: AUC / id-AUC / probe / cosine)": {
                   c.name: "; ".join(f"{r['step']}: {r['eval_disc_auc']:.3f} / {r['eval_id_auc']:.3f} / "
                                     f"{r['eval_probe_auc']:.3f} / {r['eval_token_cosine']:.3f}"
                                     for r in res.of(c.name)[0]["curve"]) for c in p.candidates},
               "chosen": chosen.name if chosen else None, "torch threads": torch.get_num_threads()}
    notes = ("Pretraining only (no fine-tuning): the figures are the held-out discriminator health of "
             "paperzoo.papers.electra.evaluation after the last step, one value per seed; every candidate sees the "
             "same windows in the same order per seed. 'chosen' is the first candidate in the listed order whose "
             "discriminator learned context (both intervals above their margins).")
    write_result(run_dir, PAPER, CLAIM, measurements, verdict, details=details, notes=notes, plots=plots)
    return run_dir


def _changes(c: Candidate) -> str:
    """``"position=rotary, lr=0.001, generator lr x0.25"``: what the candidate changes, in one line."""
    parts = [f"{k}={v}" for d in (c.model, c.objective, c.train) for k, v in d.items()]
    parts += [f"generator lr x{c.generator_lr:g}"] if c.generator_lr != 1.0 else []
    return ", ".join(parts) or "nothing (the preset itself)"


def _any_of(verdicts: dict[str, Verdict]) -> Verdict:
    """Reproduced when one candidate learned context; not reproduced when none may have; inconclusive otherwise."""
    kinds = {v.verdict for v in verdicts.values()}
    v = "reproduced" if "reproduced" in kinds else "not reproduced" if kinds == {"not reproduced"} else "inconclusive"
    won = [n for n, x in verdicts.items() if x.verdict == "reproduced"]
    return Verdict(v, f"learned context: {', '.join(won) if won else 'none of ' + str(len(verdicts))} candidates")
