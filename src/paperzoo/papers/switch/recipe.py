"""``paperzoo reproduce switch``: Switch LMs (8 and 32 experts) vs the FLOP-matched dense LM at equal steps.

Data: IMDB train fold (language modelling on the review text, ``<br />`` removed), byte-level BPE trained on
its first ``tokenizer_docs`` reviews; evaluation on the first ``eval_tokens`` tokens of the IMDB test fold.
Per seed: dense, Switch-E for each E in ``experts``; for the first seed also Switch-``ablation_experts`` without
the balancing loss and at each capacity factor of ``cf_sweep`` (train factor; eval factor stays 2.0).
Measured: validation perplexity vs steps and vs wall-clock, final perplexities with 95% CIs over seeds, the
step-speedup (dense steps / first Switch eval step whose perplexity is at or below the dense model's final),
expert-load histograms with and without the balancing loss, fraction dropped per capacity factor.
Verdict: the paired per-seed difference "dense ppl - Switch-E ppl" (smallest E) must have a 95% CI above 0.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from paperzoo.papers.switch.model import SwitchLM, SwitchLMConfig
from paperzoo.recipes import Job, Paired, Preset, Results, run_jobs, smoke, start
from paperzoo.train import TrainConfig

PAPER = "switch"
EOS = "<|endoftext|>"
CLAIM = ("At equal FLOPs per token and equal training steps, a Switch Transformer LM reaches a lower validation "
         "perplexity than its dense baseline and reaches the dense model's final perplexity in fewer steps "
         "(Fedus et al. 2021, Fig. 1/4: up to 7x step speedup at scale).")


@dataclass(frozen=True, kw_only=True)
class SwitchPreset(Preset):
    """``model``: the Switch LM of the main runs; its ``max_len`` is the training sequence length and its
    ``vocab_size`` the tokenizer's. ``train``: every run's schedule (the seed is each job's).

    ``experts``: the Switch sizes trained per seed (the first one is judged); ``ablation_experts``: the size of the
    seed-0 ablations (``no_balance``: without the balancing loss; ``cf_sweep``: training capacity factors).
    ``tokenizer_docs``/``train_docs``: IMDB train reviews for the BPE / for training (None: all);
    ``eval_tokens``: IMDB test-fold tokens evaluated, ``eval_batch`` sequences at a time.
    """

    experts: tuple[int, ...] = (8, 32)
    ablation_experts: int = 8
    no_balance: bool = True
    cf_sweep: tuple[float, ...] = (1.0, 1.25, 2.0)
    tokenizer_docs: int = 5000
    train_docs: int | None = None
    eval_tokens: int = 131072
    eval_batch: int = 32


def _train(steps: int, batch_size: int, lr: float, warmup_steps: int, eval_every: int) -> TrainConfig:
    """AdamW (weight decay 0.01), cosine schedule, on the CPU; a checkpoint every 5 evals, 4 logs per eval."""
    return TrainConfig(steps=steps, batch_size=batch_size, lr=lr, warmup_steps=warmup_steps, weight_decay=0.01,
                       eval_every=eval_every, ckpt_every=eval_every * 5, log_every=max(1, eval_every // 4),
                       device="cpu")


PRESETS = {
    # smoke test, about a minute on CPU
    "tiny": SwitchPreset(model=SwitchLMConfig.preset("tiny", max_len=32), train=_train(60, 16, 3e-3, 5, 20),
                         seeds=1, experts=(4,), ablation_experts=4, cf_sweep=(1.0, 1.25), tokenizer_docs=200,
                         train_docs=400, eval_tokens=4096),
    # 3 seeds of a 2-layer 64-d model, minutes
    "mini": SwitchPreset(model=SwitchLMConfig.preset("tiny", vocab_size=2048, max_len=64),
                         train=_train(400, 16, 2e-3, 20, 50), seeds=3, experts=(8,), cf_sweep=(1.0, 2.0),
                         tokenizer_docs=2000, train_docs=4000, eval_tokens=16384),
    # the committed CPU reproduction: d 128, ~2 h with --workers 2 (step times at 1 thread, batch 32 x 128,
    # AdamW: 0.76 s dense, 0.65 s Switch-8, 0.69 s Switch-32)
    "small": SwitchPreset(model=SwitchLMConfig.preset("small", max_len=128), train=_train(1000, 32, 1e-3, 50, 100),
                          seeds=3, eval_tokens=65536),
    # d 256 for 2000 steps: ~15-20 CPU hours, or a GPU
    "medium": SwitchPreset(model=SwitchLMConfig.preset("medium", max_len=128),
                           train=_train(2000, 32, 1e-3, 100, 100), seeds=3),
}


# ----------------------------------------------------------------------------------------------------- data
def _clean(text: str) -> str:
    return text.replace("<br />", " ").replace("<br/>", " ")


def build_data(p: SwitchPreset, run_dir: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(train ids (n, seq_len), eval ids (m, seq_len)), cached in ``run_dir/tokens.pt`` with the tokenizer."""
    cache = run_dir / "tokens.pt"
    if cache.is_file():
        d = torch.load(cache)
        return d["train"], d["eval"]
    from tokenizers import ByteLevelBPETokenizer

    from paperzoo.data import load_imdb

    train = [_clean(t) for t in load_imdb("train").texts[:p.train_docs]]
    test = [_clean(t) for t in load_imdb("test").texts]
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(train[:p.tokenizer_docs], vocab_size=p.model.vocab_size, min_frequency=2,
                            special_tokens=[EOS], show_progress=False)
    tok.save(str(run_dir / "tokenizer.json"))
    eos, seq_len = tok.token_to_id(EOS), p.model.max_len

    def ids(texts: list[str], limit: int | None = None) -> torch.Tensor:
        out: list[int] = []
        for i in range(0, len(texts), 1000):
            for e in tok.encode_batch(texts[i:i + 1000]):
                out.extend(e.ids)
                out.append(eos)
            if limit is not None and len(out) >= limit:
                break
        t = torch.tensor(out[:limit] if limit else out, dtype=torch.long)
        n = t.numel() // seq_len
        return t[:n * seq_len].view(n, seq_len)  # (n, seq_len): the stream cut into sequences

    train_ids, eval_ids = ids(train), ids(test, p.eval_tokens)
    torch.save({"train": train_ids, "eval": eval_ids}, cache)
    return train_ids, eval_ids


# ----------------------------------------------------------------------------------------------------- jobs
def jobs(p: SwitchPreset) -> list[Job]:
    """Per seed: dense and Switch-E for each E; for seed 0 also the ablations (no balancing loss, capacity factors
    other than the main runs')."""
    main = {"dense": p.model.dense(),
            **{f"switch-{e}": dataclasses.replace(p.model, num_experts=e) for e in p.experts}}
    e = p.ablation_experts
    ablations = {f"switch-{e}-nobalance": dataclasses.replace(p.model, num_experts=e, balance_coef=0.0)
                 } if p.no_balance else {}
    ablations |= {f"switch-{e}-cf{cf:g}": dataclasses.replace(p.model, num_experts=e, capacity_factor=cf)
                  for cf in p.cf_sweep if not (cf == p.model.capacity_factor and e in p.experts)}
    return ([Job(v, s, cfg) for s in range(p.seeds) for v, cfg in main.items()]
            + [Job(v, 0, cfg) for v, cfg in ablations.items()])


def _loss_fn(model, batch) -> tuple[torch.Tensor, dict[str, float]]:
    (ids,) = batch
    out = model(ids, labels=ids)
    m = {"lm_loss": out.lm_loss.detach(), "aux_loss": out.aux_loss.detach()}
    if out.router:
        m["fraction_dropped"] = sum(float(a["fraction_dropped"]) for a in out.router) / len(out.router)
    return out.loss, m


def _eval_fn(eval_ids: torch.Tensor, batch: int):
    def run(model) -> dict[str, float]:
        device = next(model.parameters()).device
        nll, n, dropped, loads = 0.0, 0, [], []
        for i in range(0, eval_ids.shape[0], batch):
            ids = eval_ids[i:i + batch].to(device)
            out = model(ids, labels=ids)
            k = ids[:, 1:].numel()
            nll += float(out.lm_loss) * k
            n += k
            for a in out.router or ():
                dropped.append(float(a["fraction_dropped"]))
                loads.append(a["expert_load"].cpu())
        m = {"ppl": math.exp(nll / n), "nll": nll / n}
        if loads:
            load = torch.stack(loads).mean(0)
            m["fraction_dropped"] = sum(dropped) / len(dropped)
            m["load_max_x_E"] = float(load.max() * load.numel())  # 1.0 = uniform
        return m
    return run


def expert_load(model: SwitchLM, eval_ids: torch.Tensor, batch: int) -> list[list[float]]:
    """Per Switch layer, the fraction of eval tokens whose top-1 choice is each expert."""
    model.eval()
    sums: list[torch.Tensor] = []
    with torch.no_grad():
        for i in range(0, eval_ids.shape[0], batch):
            out = model(eval_ids[i:i + batch])
            for j, a in enumerate(out.router or ()):
                if len(sums) <= j:
                    sums.append(torch.zeros_like(a["expert_load"]))
                sums[j] += a["expert_load"]
    return [(s / s.sum()).tolist() for s in sums]


def train_job(job: Job, out: Path, resume: bool, progress: bool, p: SwitchPreset, train_ids: torch.Tensor,
              eval_ids: torch.Tensor) -> dict[str, Any]:
    """Train one variant (``job.config`` is its SwitchLMConfig) in ``out``; returns its summary and eval curve."""
    from paperzoo.report import read_metrics
    from paperzoo.train import Trainer, seed_everything

    seed_everything(job.seed)
    model = SwitchLM(job.config)
    trainer = Trainer(model, dataclasses.replace(p.train, seed=job.seed), TensorDataset(train_ids), _loss_fn,
                      _eval_fn(eval_ids, p.eval_batch), out_dir=out, progress=progress)
    fit = trainer.fit(resume=resume)
    records = read_metrics(out / "metrics.jsonl")
    train_dropped = [r["fraction_dropped"] for r in records if r.get("event") == "train" and "fraction_dropped" in r]
    return {"ppl": fit["eval"]["ppl"], "wall_time_s": fit["wall_time_s"], "params": model.num_parameters(),
            "params_per_token": model.num_parameters(per_token=True),
            "fraction_dropped": fit["eval"].get("fraction_dropped"),
            "train_fraction_dropped": train_dropped[-1] if train_dropped else None,
            "expert_load": expert_load(model, eval_ids, p.eval_batch) if job.config.num_experts else None,
            "curve": [r for r in records if r.get("event") == "eval"], "model": job.config}


def crossing(curve: list[dict], target: float, key: str = "step") -> float | None:
    """``key`` (step or time) at which the eval curve first reaches ``ppl <= target``, interpolated linearly in
    log-perplexity between the two evals around the crossing (evals are ``eval_every`` steps apart, so the raw first
    eval step would quantise the speedup); the first eval's value if it is already below; None if never."""
    prev = None
    for r in curve:
        if r["ppl"] <= target:
            if prev is None or prev["ppl"] == r["ppl"]:
                return float(r[key])
            a = (math.log(prev["ppl"]) - math.log(target)) / (math.log(prev["ppl"]) - math.log(r["ppl"]))
            return prev[key] + a * (r[key] - prev[key])
        prev = r
    return None


def step_speedup(dense_final: float, curve: list[dict], steps: int) -> float | None:
    """``steps / step at which the curve's ppl reaches dense_final`` (interpolated, see :func:`crossing`; None if
    never)."""
    at = crossing(curve, dense_final)
    return steps / at if at else None


# ----------------------------------------------------------------------------------------------------- report
def run(preset: str | None = None, seeds: int | None = None, out: Path | None = None, resume: bool = False,
        progress: bool = True, workers: int = 1,
        precision: str | None = None) -> Path:
    """Train every job, judge the smallest Switch model against dense per seed, write the report; returns the
    run folder."""
    from paperzoo.report import plot_bars_with_ci, plot_metrics, write_result

    name, p, run_dir = start(PAPER, PRESETS, preset, seeds, out, precision=precision)
    train_ids, eval_ids = build_data(p, run_dir)
    res = run_jobs(train_job, jobs(p), run_dir, resume=resume, workers=workers, progress=progress,
                   args=(p, train_ids, eval_ids))
    main = [f"switch-{e}" for e in p.experts]
    ppl = {v: res.values(v, "ppl") for v in ["dense", *main]}
    measurements: dict[str, Any] = {"dense ppl": ppl["dense"]}
    for v in main:
        measurements[f"{v} ppl"] = ppl[v]
        measurements[f"{v} step speedup to dense final ppl"] = [
            step_speedup(d, res[v, s]["curve"], p.train.steps) or 0.0 for s, d in enumerate(ppl["dense"])]
    verdict = smoke(Paired(higher_is_better=False).judge(ppl[main[0]], ppl["dense"], main[0], "dense"), name)
    curves = {f"{j.variant}/seed{j.seed}": res[j.variant, j.seed]["curve"] for j in res.jobs}
    plots = [plot_metrics(run_dir, curves, x="step", ys=["ppl"], path="ppl_vs_steps.png",
                          title="validation perplexity vs steps", logy=True),
             plot_metrics(run_dir, curves, x="time", ys=["ppl"], path="ppl_vs_time.png",
                          title="validation perplexity vs wall-clock (s)", logy=True),
             _load_plot(run_dir, res, p),
             plot_bars_with_ci(ppl, run_dir / "final_ppl.png", title="final validation perplexity", ylabel="ppl")]
    notes = (f"Preset {name}: {p.train.steps} steps x {p.train.batch_size} x {p.model.max_len} tokens, "
             f"{train_ids.numel()} training tokens, eval on {eval_ids.numel()} IMDB test-fold tokens. "
             "Speedup 0.0 means the Switch model never reached the dense model's final perplexity. "
             "The paper's 7x is at far larger scale (hundreds of thousands of steps, up to 128 experts per layer).")
    write_result(run_dir, PAPER, CLAIM, measurements, verdict, details=_details(p, res, main), notes=notes,
                 plots=plots)
    return run_dir


def _details(p: SwitchPreset, res: Results, main: list[str]) -> dict[str, Any]:
    """Per model: parameters and wall-clock speedup; seed 0: run times, the capacity sweep, expert load."""
    def wall(v: str, s: int) -> float:  # dense run time / time at which v reaches the dense final ppl
        at = crossing(res[v, s]["curve"], res["dense", s]["ppl"], key="time")
        return round(res["dense", s]["curve"][-1]["time"] / at, 2) if at else 0.0

    first = {v: res[v, 0] for v in res.variants}
    e = p.ablation_experts
    return {
        "models (parameters of seed 0)": {
            v: {"parameters": first[v]["params"], "per token": first[v]["params_per_token"],
                "wall-clock speedup to dense final ppl (per seed)": [wall(v, s) for s in res.seeds(v)] if v in main
                else None}
            for v in ["dense", *main]},
        "wall-clock s per run (seed 0)": {v: round(r["wall_time_s"], 1) for v, r in first.items()},
        "capacity-factor sweep (seed 0)": {v: {"eval fraction dropped": r["fraction_dropped"],
                                               "train fraction dropped": r["train_fraction_dropped"],
                                               "ppl": r["ppl"]}
                                           for v, r in first.items() if "-cf" in v or v == f"switch-{e}"},
        "expert load on eval text, last Switch layer, seed 0: min / max fraction (uniform = 1/E)": {
            v: f"{min(r['expert_load'][-1]):.3f} / {max(r['expert_load'][-1]):.3f}"
            for v, r in first.items() if r.get("expert_load")},
    }


def _load_plot(run_dir: Path, res: Results, p: SwitchPreset) -> Path:
    """Expert-load histograms (last Switch layer, seed 0) with and without the balancing loss."""
    from matplotlib.figure import Figure

    names = [n for n in (f"switch-{p.ablation_experts}", f"switch-{p.ablation_experts}-nobalance") if n in res]
    fig = Figure(figsize=(5 * max(1, len(names)), 3.5))
    for i, n in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        load = res[n, 0]["expert_load"][-1]
        ax.bar(range(len(load)), load)
        ax.set_xticks(range(len(load)))
        ax.axhline(1 / len(load), ls="--", c="k", lw=1, label="uniform")
        ax.set_title(n)
        ax.set_xlabel("expert")
        ax.set_ylabel("fraction of tokens")
        ax.legend()
    fig.tight_layout()
    path = run_dir / "expert_load.png"
    fig.savefig(path, dpi=100)
    return path
