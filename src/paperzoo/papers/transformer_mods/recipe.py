"""``paperzoo reproduce transformer-mods``: every variant of the declared grid pretrained on the same tokens in the
same order with the same seeds, then scored like the paper's Table 1.

A job is one (variant, seed) in ``<run>/<variant>/seed-<s>/``:

1. a WordPiece vocabulary trained once per run on the IMDB train-fold text (``tokenizer.json``);
2. LM pretraining (``causal``: next token; ``mlm``: BERT-style masked tokens) on full ``[CLS] window [SEP]`` windows
   of that text for ``steps`` steps of ``batch_size`` windows: the same token budget and, for a seed, the same
   batch order for every variant (the engine draws the order from the seed alone);
3. held-out IMDB loss at 1/8 of the budget ("early", as the paper's 65,536 of 524,288 steps) and at the end
   ("final"); WikiText-2 valid and test perplexity per WordPiece token (``mlm``: of the masked tokens, one fixed
   masking) on about the first ``wiki_tokens`` tokens of each split, in windows framed as the training ones;
4. fine-tuning on the preset's mini-GLUE tasks (the shared :mod:`paperzoo.train.finetune` loop, as ELECTRA and
   Funnel use it) with seed ``s``.

Parameters are counted, FLOPs per token counted by :func:`paperzoo.measure.count_flops` on one training step, steps/s
measured by the engine. The table, the paper comparison and the verdict are :mod:`.analysis`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

from paperzoo import recipes
from paperzoo.data.tokenizer import load_tokenizer, pack_documents, special_ids, train_wordpiece
from paperzoo.measure import count_flops
from paperzoo.recipes import Job, run_jobs, smoke, start
from paperzoo.report import write_result
from paperzoo.report.serial import dumps, to_jsonable, write_text_atomic
from paperzoo.train import TrainConfig, Trainer, no_decay_names, seed_everything
from paperzoo.train.checkpoint import checkpoint_file, checkpoint_path, load_checkpoint
from paperzoo.train.finetune import FinetuneConfig, finetune_task, load_task
from paperzoo.train.precision import resolve_precision

from . import analysis
from .grid import DEFAULT_GRID, build_configs, load_grid
from .model import ModsClassifier, ModsConfig, ModsLM

PAPER = "transformer-mods"


@dataclass(frozen=True, kw_only=True)
class Preset(recipes.Preset):
    """``model``: the baseline at this size (``vocab_size`` replaced by the tokenizer's; ``max_len`` is the window);
    ``grid``: the grid file; ``variants``: the names to run (None: all; the baseline always runs, first);
    ``objective``: causal or mlm for the whole grid; ``docs``/``eval_docs``: IMDB train-fold reviews used / held out;
    ``held_windows``: held-out windows scored; ``wiki_tokens``: WikiText-2 tokens scored per split."""

    model: ModsConfig
    finetune: FinetuneConfig
    grid: str = DEFAULT_GRID.name  # a file, or a grid shipped beside grid.py (see load_grid)
    variants: tuple[str, ...] | None = None
    objective: str = "causal"
    vocab_size: int = 4096
    docs: int | None = None
    eval_docs: int = 200
    held_windows: int = 64
    wiki_tokens: int = 16384
    tasks: tuple[str, ...] = ("SST-2", "MR", "SUBJ")

    @property
    def tokens(self) -> int:
        """The token budget of every variant: steps x batch x window."""
        return self.train.steps * self.train.batch_size * self.model.max_len


# the most informative variants for the headline claim: the GLU family and GeLU, RMSNorm, the ones the paper found
# harmful (ReZero, Fixup, block sharing), parameters at equal FLOPs (Switch); the rows with paper numbers first
SMALL_VARIANTS = ("vanilla", "gelu", "swish", "swiglu", "geglu", "reglu", "glu", "liglu", "rmsnorm", "rezero", "fixup",
                  "deep_narrow", "block_sharing", "switch")

# every variant of the grid a causal LM can be (Funnel pools neighbouring positions: mlm only)
FULL_VARIANTS = tuple(n for n in load_grid().variants if n != "funnel")

PRESETS: dict[str, Preset] = {
    # tests: seconds; a smoke test of the whole pipeline (its verdict carries no evidence)
    "tiny": Preset(
        model=ModsConfig.preset("tiny"),
        train=TrainConfig(steps=30, batch_size=8, lr=3e-3, warmup_steps=3, schedule="cosine", min_lr_ratio=0.1,
                          weight_decay=0.01, eval_every=0, ckpt_every=15, log_every=5, device="cpu"),
        finetune=FinetuneConfig(lr=1e-3, max_steps=6, batch_size=16, max_len=32, max_train=64, max_test=64),
        variants=("vanilla", "swiglu", "rmsnorm"), vocab_size=300, docs=200, eval_docs=20, held_windows=8,
        wiki_tokens=512, tasks=("SST-2",), seeds=2),
    # the laptop grid: 14 variants x 3 seeds at 2.5M tokens a cell (1220 steps of 32 x 64), ~0.35 s a step on one
    # thread in bf16, ~8 min a cell, ~3 h of the 2-core machine with --workers 2 (resumable across sessions); 5-10M
    # tokens a cell (the range) would take 6-12 h here: see the README's accounting
    "small": Preset(
        model=ModsConfig.preset("small"),
        train=TrainConfig(steps=1220, batch_size=32, lr=2e-3, warmup_steps=60, schedule="cosine", min_lr_ratio=0.1,
                          weight_decay=0.01, eval_every=0, ckpt_every=100, log_every=50, device="cpu",
                          precision="auto"),
        # 200 fine-tuning steps: at 40 (the grid's first protocol) SST-2 stayed at chance for every variant (vanilla
        # seed 0: 52%); from the same checkpoint 200 steps reach 71% and 400 reach 74%
        finetune=FinetuneConfig(lr=1e-3, epochs=1.0, max_steps=200, batch_size=32, max_len=64, max_train=6400,
                                max_test=600, precision="auto"),
        variants=SMALL_VARIANTS, vocab_size=4096, docs=10000, tasks=("SST-2", "SUBJ"), seeds=3),
    # a bigger machine or a GPU: every variant of the grid, d 512, 8 layers, bf16 where the hardware has it
    "full": Preset(
        model=ModsConfig.preset("full"),
        train=TrainConfig(steps=20000, batch_size=128, lr=1e-3, warmup_steps=1000, schedule="cosine",
                          min_lr_ratio=0.1, weight_decay=0.01, eval_every=0, ckpt_every=1000, log_every=100,
                          device="auto", precision="auto"),
        finetune=FinetuneConfig(lr=3e-4, epochs=3.0, batch_size=32, max_len=128, device="auto", precision="auto"),
        variants=FULL_VARIANTS, vocab_size=16000, docs=None, wiki_tokens=262144, held_windows=512,
        tasks=("SST-2", "CoLA", "MR", "SUBJ", "MPQA", "CR"), seeds=3),
}
# the first grid (its report is in git history, commit 65e7e19): 10 variants x 3 seeds at 246k tokens a cell, ~15 min
# of the machine; it fine-tuned with small's first protocol (40 steps), this preset now with small's current one
PRESETS["quick"] = dataclasses.replace(
    PRESETS["small"], train=dataclasses.replace(PRESETS["small"].train, steps=120, warmup_steps=12, ckpt_every=60,
                                                log_every=20),
    variants=("vanilla", "gelu", "swiglu", "geglu", "reglu", "glu", "rmsnorm", "rezero", "fixup", "switch"), docs=6000)
# the same with the bidirectional masked-LM objective: every variant, Funnel included
PRESETS["full-mlm"] = dataclasses.replace(PRESETS["full"], objective="mlm", variants=None)


# ----------------------------------------------------------------------------------------------------- data
@dataclass
class Data:
    """Everything the jobs share: tokenizer, training windows, held-out windows, WikiText windows, task data."""

    tok: object
    train: TensorDataset
    held: torch.Tensor
    wiki: dict[str, torch.Tensor]
    tasks: dict


def wiki_windows(tok, text: str, length: int, tokens: int) -> torch.Tensor:
    """WikiText-2 split ``text`` as evaluation windows framed exactly as the training ones, ``[CLS] w [SEP]``
    (:func:`paperzoo.data.tokenizer.pack_documents`, full windows only), about ``tokens`` tokens of it. Framing
    matters: every training window starts with ``[CLS]``, so a model with relative positions may use it as its
    anchor, and windows without it score far worse (measured: WikiText perplexity 23.8M instead of 507 for one GeLU
    seed whose IMDB held-out loss was 5.1)."""
    ids, _ = pack_documents(tok, [text], length, min_tokens=length - 2, max_examples=max(1, tokens // (length - 2)))
    return ids


def prepare(run_dir: Path, p: Preset) -> tuple[Preset, Data]:
    """(preset with the tokenizer's vocabulary and ids, the shared data)."""
    from paperzoo.data import load_imdb, load_wikitext2

    texts = load_imdb("train").texts
    texts = texts[: p.docs] if p.docs else texts
    path = run_dir / "tokenizer.json"
    tok = load_tokenizer(path) if path.is_file() else train_wordpiece(texts[: len(texts) - p.eval_docs],
                                                                      p.vocab_size, path=path)
    ids = special_ids(tok)
    model = dataclasses.replace(p.model, vocab_size=tok.get_vocab_size(), objective=p.objective,
                                mask_token_id=ids["mask"], special_ids=(ids["pad"], ids["cls"], ids["sep"],
                                                                        ids["mask"]))
    p = dataclasses.replace(p, model=model)
    L = model.max_len
    cut = len(texts) - p.eval_docs
    train, _ = pack_documents(tok, texts[:cut], L, min_tokens=L - 2)  # full windows only: no padding anywhere
    held, _ = pack_documents(tok, texts[cut:], L, min_tokens=L - 2, max_examples=p.held_windows)
    wiki = {s: wiki_windows(tok, load_wikitext2(s), L, p.wiki_tokens) for s in ("valid", "test")}
    tasks = {t: (load_task(t, "train"), load_task(t, "test")) for t in p.tasks}
    return p, Data(tok, TensorDataset(train), held, wiki, tasks)


# ----------------------------------------------------------------------------------------------------- training
def loss_fn(model: ModsLM, batch) -> tuple[torch.Tensor, dict]:
    """One training batch (batch, seq) of ids: the causal or masked LM loss (+ Switch balance loss)."""
    ids = batch[0] if isinstance(batch, list | tuple) else batch
    if model.config.causal:
        out = model(ids, labels=ids)
    else:
        inputs, labels = model.mask(ids)  # the global RNG: checkpointed, so resume is exact
        out = model(inputs, labels=labels)
    return out.loss, {"lm_loss": float(out.lm_loss.detach()), "aux_loss": float(out.aux_loss.detach())}


@torch.no_grad()
def lm_loss(model: ModsLM, windows: torch.Tensor, batch: int = 32, precision: str = "fp32") -> float:
    """Mean LM loss per predicted token over ``windows`` (n, seq): next-token loss (causal) or the loss of one
    fixed masking (mlm, generator seed 0), the same tokens for every variant. Eval mode."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    gen = torch.Generator().manual_seed(0)
    total, count = 0.0, 0
    with resolve_precision(precision, dev).autocast(dev):
        for i in range(0, len(windows), batch):
            ids = windows[i:i + batch]
            if model.config.causal:
                labels, inputs = ids, ids
                n = ids.shape[0] * (ids.shape[1] - 1)
            else:
                inputs, labels = model.mask(ids, generator=gen)
                n = int((labels != -100).sum())
            out = model(inputs.to(dev), labels=labels.to(dev))
            total += float(out.lm_loss) * n
            count += n
    model.train(was)
    return total / count


def step_flops(cfg: ModsConfig, batch: torch.Tensor) -> int:
    """FLOPs of one training step (forward + backward) of a fresh ``ModsLM(cfg)`` on ``batch`` (RNG untouched)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = ModsLM(cfg)
        return count_flops(lambda: loss_fn(model, batch)[0].backward())


def classifier_fn(cfg: ModsConfig, state: dict, ft: FinetuneConfig):
    """For :func:`paperzoo.train.finetune.finetune_task`: the pretrained body with a fresh head, AdamW groups with
    the shared no-decay rule (no layer-wise decay: it is ELECTRA's choice, not this paper's)."""

    def build(num_labels: int) -> tuple[nn.Module, list[dict]]:
        model = ModsClassifier(cfg, num_labels=num_labels, dropout=ft.dropout)
        model.body.load_state_dict(state, strict=True)
        skip = no_decay_names(model)
        params = list(model.named_parameters())
        return model, [{"params": [p for n, p in params if n not in skip], "weight_decay": ft.weight_decay},
                       {"params": [p for n, p in params if n in skip], "weight_decay": 0.0}]

    return build


def _events(path: Path, event: str) -> list[dict]:
    return [r for r in (json.loads(line) for line in path.read_text().splitlines()) if r.get("event") == event]


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: Preset, data: Data) -> dict:
    """Pretrain ``job.config`` with ``job.seed``, evaluate, fine-tune on every task; a JSON-ready summary."""
    cfg: ModsConfig = job.config
    tc = dataclasses.replace(p.train, seed=job.seed, eval_every=max(1, p.train.steps // 8))
    flops = step_flops(cfg, data.train.tensors[0][: tc.batch_size])
    seed_everything(job.seed)
    model = ModsLM(cfg)
    trainer = Trainer(model, tc, data.train, loss_fn,
                      eval_fn=lambda m: {"held_loss": lm_loss(m, data.held, precision=tc.precision)},
                      out_dir=out, progress=progress)
    fit = trainer.fit(resume=resume)
    evals = {r["step"]: r["held_loss"] for r in _events(out / "metrics.jsonl", "eval")}
    early_step = tc.eval_every
    wiki = {s: math.exp(lm_loss(model, w, precision=tc.precision)) for s, w in data.wiki.items()}
    scores = finetune_scores(cfg, {k: v.detach().clone() for k, v in model.state_dict().items()}, p, data, job.seed)
    tokens = tc.batch_size * cfg.max_len
    return {"variant": job.variant, "seed": job.seed, "params": model.num_parameters(),
            "flops_per_token": flops / tokens, "steps": fit["step"], "tokens": fit["step"] * tokens,
            "steps_per_s": fit["steps_per_s"], "early_loss": evals.get(early_step), "final_loss": evals[fit["step"]],
            "train_loss": fit["loss"], "wiki_valid_ppl": wiki["valid"], "wiki_test_ppl": wiki["test"],
            **scores, "finetune": to_jsonable(p.finetune), "resumed_from": fit["resumed_from"],
            "precision": fit["precision"]}


def finetune_scores(cfg: ModsConfig, state: dict, p: Preset, data: Data, seed: int, progress: bool = False) -> dict:
    """``{"task T": score x100 for each of the preset's tasks, "downstream": their mean}`` of the pretrained body
    ``state``, fine-tuned with seed ``seed``."""
    scores = {f"task {t}": 100.0 * finetune_task(classifier_fn(cfg, state, p.finetune), data.tok, t, p.finetune, seed,
                                                 data.tasks, progress=progress)["score"] for t in p.tasks}
    return {**scores, "downstream": sum(scores.values()) / len(scores)}


# ----------------------------------------------------------------------------------------------------- the recipe
def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1, precision: str | None = None) -> Path:
    """Train every (variant, seed) of the preset's grid, write the table, the comparison and the verdict."""
    _, chosen = recipes.pick(PRESETS, preset, PAPER, seeds, precision=precision)
    grid = load_grid(chosen.grid)  # validated before anything runs or is written
    names = grid.select(chosen.variants)
    build_configs(grid, dataclasses.replace(chosen.model, objective=chosen.objective), names)
    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, precision=precision)
    p, data = prepare(run_dir, p)
    configs = build_configs(grid, p.model, names)
    jobs = [Job(v, s, configs[v]) for s in range(p.seeds) for v in names]
    res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress, args=(p, data))
    results = {v: res.of(v) for v in names}
    table = analysis.Table(results, grid, p.tasks)
    verdict = smoke(table.verdict(), name)
    plots = [analysis.plot_deltas(table, run_dir / "delta_vs_baseline.png"),
             analysis.plot_vs_paper(table, run_dir / "ours_vs_paper.png")]
    details = {"preset": name, "objective": p.objective, "token budget per variant": p.tokens,
               "windows": f"{len(data.train)} training windows of {p.model.max_len} tokens",
               "vocab_size": p.model.vocab_size, "configs": {v: _changed(configs[v], p.model) for v in names},
               "torch threads": torch.get_num_threads()}
    if any("finetune_before" in r for rs in results.values() for r in rs):
        details["fine-tuning"] = ("re-run from each cell's final checkpoint with this config (refinetune); each "
                                  "job.json keeps the scores it replaced under finetune_before")
    write_result(run_dir, PAPER, analysis.CLAIM, table.measurements(), verdict, details=details,
                 notes=table.markdown(p), plots=plots)
    return run_dir


# ----------------------------------------------------------------------------------------------------- re-fine-tuning
def refinetune(run_dir: Path, workers: int = 1, progress: bool = True) -> Path:
    """Fine-tune every cell of the finished grid in ``run_dir`` again, from its final checkpoint, with its preset's
    current ``finetune`` and ``tasks``; then rewrite the table, the verdict and the report. Pretraining is not
    repeated (it is deterministic per seed, and the checkpoint is its end).

    For a grid whose fine-tuning protocol changed after it pretrained. Everything else in the run's
    ``config.json`` must equal the preset's, or a ValueError names what differs. Each ``job.json`` keeps the scores
    it replaces under ``finetune_before``, with the config they came from; a cell already fine-tuned with the
    current config is skipped, so an interrupted re-fine-tuning resumes. Returns the run folder."""
    from paperzoo.report.run import lock_run_dir
    from paperzoo.train.parallel import run_jobs as parallel

    run_dir = Path(run_dir)
    doc = _read_run_config(run_dir)
    name = doc["config"].get("preset")
    if name not in PRESETS:
        raise ValueError(f"{run_dir}/config.json names preset {name!r}; valid: {', '.join(PRESETS)}")
    p = PRESETS[name]
    now = json.loads(dumps({"preset": name, **{f.name: getattr(p, f.name) for f in dataclasses.fields(p)}}))
    changed = sorted(k for k in (now.keys() | doc["config"].keys()) - {"precision"}
                     if k not in ("finetune", "tasks") and now.get(k) != doc["config"].get(k))
    if changed:
        raise ValueError(f"{run_dir} was pretrained with another config than preset {name!r} now has (differs in "
                         f"{', '.join(changed)}): refinetune redoes fine-tuning only; run the grid again instead")
    lock_run_dir(run_dir)  # no other run writes here meanwhile
    p, data = prepare(run_dir, p)
    grid = load_grid(p.grid)
    names = grid.select(p.variants)
    configs = build_configs(grid, p.model, names)
    cells = [(run_dir / v / f"seed-{s}", configs[v], p, data, doc["config"]["finetune"], progress and workers == 1)
             for s in range(p.seeds) for v in names]
    missing = [str(c[0]) for c in cells if not (c[0] / recipes.JOB_FILE).is_file()]
    if missing:
        raise ValueError(f"refinetune needs a finished grid; no {recipes.JOB_FILE} in {', '.join(missing)}: finish "
                         f"it with paperzoo reproduce {PAPER} --preset {name} --out {run_dir} --resume")
    parallel(_refinetune_cell, cells, workers, label=lambda c: f"{c[0].parent.name} {c[0].name}")
    # the run's config.json takes the preset's fine-tuning; its table and report are rewritten from the job.json files
    doc["config"] |= {"finetune": now["finetune"], "tasks": now["tasks"]}
    write_text_atomic(run_dir / "config.json", dumps(doc))
    return run(name, out=run_dir, resume=True, progress=progress)


def _refinetune_cell(folder: Path, cfg: ModsConfig, p: Preset, data: Data, run_finetune: dict,
                     progress: bool) -> None:
    path = folder / recipes.JOB_FILE
    job = json.loads(path.read_text())
    want = json.loads(dumps(p.finetune))
    if job.get("finetune") == want and all(f"task {t}" in job for t in p.tasks):
        return
    ckpt = checkpoint_file(checkpoint_path(folder, job["steps"]), "the final pretraining")
    scores = finetune_scores(cfg, load_checkpoint(ckpt)["model"], p, data, job["seed"], progress)
    before = {"finetune": job.pop("finetune", run_finetune), "downstream": job.pop("downstream")}
    before |= {k: job.pop(k) for k in list(job) if k.startswith("task ")}
    job.setdefault("finetune_before", before)  # the first protocol's scores stay
    job |= {**scores, "finetune": want}
    write_text_atomic(path, dumps(job))


def _read_run_config(run_dir: Path) -> dict:
    path = run_dir / "config.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ValueError(f"{run_dir} has no config.json: not a run folder of {PAPER}") from e
    except ValueError as e:
        raise ValueError(f"{path} is damaged ({e}); rerun the grid into a new folder") from e


def _changed(cfg: ModsConfig, base: ModsConfig) -> dict:
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
            if getattr(cfg, f.name) != getattr(base, f.name)}
