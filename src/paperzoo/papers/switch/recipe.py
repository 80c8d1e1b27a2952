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
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from paperzoo.papers.switch.model import SwitchLM, SwitchLMConfig

EOS = "<|endoftext|>"
CLAIM = ("At equal FLOPs per token and equal training steps, a Switch Transformer LM reaches a lower validation "
         "perplexity than its dense baseline and reaches the dense model's final perplexity in fewer steps "
         "(Fedus et al. 2021, Fig. 1/4: up to 7x step speedup at scale).")


@dataclass(frozen=True)
class RecipeConfig:
    """The whole reproduction; presets ``tiny`` (smoke test, ~a minute on CPU), ``mini`` (3 seeds of a 64-d model,
    minutes), ``small`` (the CPU reproduction: a 128-d model, ~2 h with ``--workers 2``) and ``full`` (the 256-d
    model for 2000 steps: ~15-20 CPU hours, or a GPU). The defaults are ``full``'s."""

    preset: str = "full"
    model: str = "small"
    vocab_size: int = 8192
    seq_len: int = 128
    batch_size: int = 32
    steps: int = 2000
    lr: float = 1e-3
    warmup_steps: int = 100
    weight_decay: float = 0.01
    eval_every: int = 100
    eval_tokens: int = 131072
    eval_batch: int = 32
    tokenizer_docs: int = 5000
    train_docs: int | None = None
    experts: tuple[int, ...] = (8, 32)
    seeds: int = 3
    ablation_experts: int = 8
    cf_sweep: tuple[float, ...] = (1.0, 1.25, 2.0)
    no_balance: bool = True
    device: str = "cpu"


PRESETS = {
    "tiny": RecipeConfig(preset="tiny", model="tiny", vocab_size=512, seq_len=32, batch_size=16, steps=60, lr=3e-3,
                         warmup_steps=5, eval_every=20, eval_tokens=4096, eval_batch=32, tokenizer_docs=200,
                         train_docs=400, experts=(4,), seeds=1, ablation_experts=4, cf_sweep=(1.0, 1.25)),
    "mini": RecipeConfig(preset="mini", model="tiny", vocab_size=2048, seq_len=64, batch_size=16, steps=400, lr=2e-3,
                         warmup_steps=20, eval_every=50, eval_tokens=16384, tokenizer_docs=2000, train_docs=4000,
                         experts=(8,), seeds=3, ablation_experts=8, cf_sweep=(1.0, 2.0)),
    # step times measured at 1 thread (batch 32 x 128, AdamW): 0.76 s dense, 0.65 s Switch-8, 0.69 s Switch-32
    "small": RecipeConfig(preset="small", model="compact", vocab_size=4096, steps=1000, warmup_steps=50,
                          eval_every=100, eval_tokens=65536),
    "full": RecipeConfig(),
}


# ----------------------------------------------------------------------------------------------------- data
def _clean(text: str) -> str:
    return text.replace("<br />", " ").replace("<br/>", " ")


def build_data(cfg: RecipeConfig, run_dir: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(train ids (n, seq_len), eval ids (m, seq_len)), cached in ``run_dir/tokens.pt`` with the tokenizer."""
    cache = run_dir / "tokens.pt"
    if cache.is_file():
        d = torch.load(cache)
        return d["train"], d["eval"]
    from tokenizers import ByteLevelBPETokenizer

    from paperzoo.data import load_imdb

    train = [_clean(t) for t in load_imdb("train").texts[:cfg.train_docs]]
    test = [_clean(t) for t in load_imdb("test").texts]
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(train[:cfg.tokenizer_docs], vocab_size=cfg.vocab_size, min_frequency=2,
                            special_tokens=[EOS], show_progress=False)
    tok.save(str(run_dir / "tokenizer.json"))
    eos = tok.token_to_id(EOS)

    def ids(texts: list[str], limit: int | None = None) -> torch.Tensor:
        out: list[int] = []
        for i in range(0, len(texts), 1000):
            for e in tok.encode_batch(texts[i:i + 1000]):
                out.extend(e.ids)
                out.append(eos)
            if limit is not None and len(out) >= limit:
                break
        t = torch.tensor(out[:limit] if limit else out, dtype=torch.long)
        n = t.numel() // cfg.seq_len
        return t[:n * cfg.seq_len].view(n, cfg.seq_len)

    train_ids, eval_ids = ids(train), ids(test, cfg.eval_tokens)
    torch.save({"train": train_ids, "eval": eval_ids}, cache)
    return train_ids, eval_ids


# ----------------------------------------------------------------------------------------------------- runs
def variants(cfg: RecipeConfig) -> list[tuple[str, int, dict[str, Any]]]:
    """``(name, seed, model overrides)`` for every training run of the recipe."""
    out = []
    for seed in range(cfg.seeds):
        out.append(("dense", seed, {"num_experts": 0}))
        out += [(f"switch-{e}", seed, {"num_experts": e}) for e in cfg.experts]
    e = cfg.ablation_experts
    if cfg.no_balance:
        out.append((f"switch-{e}-nobalance", 0, {"num_experts": e, "balance_coef": 0.0}))
    out += [(f"switch-{e}-cf{cf:g}", 0, {"num_experts": e, "capacity_factor": cf}) for cf in cfg.cf_sweep
            if not (cf == 1.25 and e in cfg.experts)]  # 1.25 is the main run's factor
    return out


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


def train_one(cfg: RecipeConfig, name: str, seed: int, overrides: dict, train_ids: torch.Tensor,
              eval_ids: torch.Tensor, run_dir: Path, resume: bool, progress: bool = True) -> dict[str, Any]:
    """Train one variant; returns its summary (final ppl, load histogram, run time) and writes summary.json."""
    from paperzoo.train import TrainConfig, Trainer, seed_everything

    out = run_dir / name / f"seed{seed}"
    done = out / "summary.json"
    if resume and done.is_file():
        return json.loads(done.read_text())
    seed_everything(seed)
    mcfg = SwitchLMConfig.preset(cfg.model, vocab_size=cfg.vocab_size, max_len=cfg.seq_len, **overrides)
    model = SwitchLM(mcfg)
    tcfg = TrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, warmup_steps=cfg.warmup_steps,
                       weight_decay=cfg.weight_decay, eval_every=cfg.eval_every, ckpt_every=cfg.eval_every * 5,
                       log_every=max(1, cfg.eval_every // 4), seed=seed, device=cfg.device)
    trainer = Trainer(model, tcfg, TensorDataset(train_ids), _loss_fn, _eval_fn(eval_ids, cfg.eval_batch),
                      out_dir=out, progress=progress)
    res = trainer.fit(resume=resume)
    summary = {"name": name, "seed": seed, "ppl": res["eval"]["ppl"], "wall_time_s": res["wall_time_s"],
               "params": model.num_parameters(), "params_per_token": model.num_parameters(per_token=True),
               "fraction_dropped": res["eval"].get("fraction_dropped"),
               "expert_load": expert_load(model, eval_ids, cfg.eval_batch) if mcfg.num_experts else None,
               "model": dataclasses.asdict(mcfg)}
    done.write_text(json.dumps(summary, indent=1))
    return summary


def _evals(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("event") == "eval"]


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
        progress: bool = True, workers: int = 1) -> Path:
    """Run every variant, then write plots and ``report.md``; returns the run folder.

    ``workers > 1`` trains that many variants at once in separate processes (``paperzoo.train.parallel``).
    """
    from paperzoo.report import (
        compare,
        new_run_dir,
        pick_preset,
        plot_bars_with_ci,
        plot_metrics,
        write_config,
        write_result,
    )
    from paperzoo.train.parallel import run_jobs

    preset, cfg = pick_preset(PRESETS, preset, "small", "switch")
    if seeds is not None:
        cfg = dataclasses.replace(cfg, seeds=seeds)
    run_dir = new_run_dir("switch", out)
    write_config(run_dir, cfg, seeds=list(range(cfg.seeds)))
    train_ids, eval_ids = build_data(cfg, run_dir)
    jobs = [(cfg, n, s, o, train_ids, eval_ids, run_dir, resume, progress and workers == 1)
            for n, s, o in variants(cfg)]
    results = run_jobs(train_one, jobs, workers, label=lambda j: f"{j[1]} seed {j[2]}")
    by = {}
    for r in results:
        by.setdefault(r["name"], {})[r["seed"]] = r
    curves = {f"{n}/seed{s}": run_dir / n / f"seed{s}" / "metrics.jsonl" for n, s, _ in variants(cfg)}

    main = [f"switch-{e}" for e in cfg.experts]
    measurements: dict[str, Any] = {"dense ppl": [by["dense"][s]["ppl"] for s in range(cfg.seeds)]}
    details: dict[str, Any] = {}
    for name in main:
        measurements[f"{name} ppl"] = [by[name][s]["ppl"] for s in range(cfg.seeds)]
        speed, wall = [], []
        for s in range(cfg.seeds):
            target, curve = by["dense"][s]["ppl"], _evals(curves[f"{name}/seed{s}"])
            sp = step_speedup(target, curve, cfg.steps)
            speed.append(sp if sp is not None else 0.0)
            at = crossing(curve, target, key="time")
            wall.append(_evals(curves[f"dense/seed{s}"])[-1]["time"] / at if at else 0.0)
        measurements[f"{name} step speedup to dense final ppl"] = speed
        details[f"{name} wall-clock speedup to dense final ppl (per seed)"] = [round(w, 2) for w in wall]
        details[f"{name} vs dense (ppl, lower is better)"] = str(compare(
            measurements[f"{name} ppl"], measurements["dense ppl"], higher_is_better=False))
        r0 = by[name][0]
        details[f"{name} parameters (total / per token)"] = f"{r0['params']} / {r0['params_per_token']}"
    details["dense parameters"] = by["dense"][0]["params"]
    diffs = [by["dense"][s]["ppl"] - by[main[0]][s]["ppl"] for s in range(cfg.seeds)]
    paired = compare(diffs, 0.0, higher_is_better=True)
    details[f"paired dense - {main[0]} ppl"] = str(paired)
    details["wall-clock s per run (seed 0)"] = {n: round(by[n][0]["wall_time_s"], 1) for n in by}
    sweep = {n: {"fraction_dropped_eval": by[n][0]["fraction_dropped"], "ppl": by[n][0]["ppl"],
                 "train_fraction_dropped": _last_train(run_dir / n / "seed0" / "metrics.jsonl")}
             for n in by if "-cf" in n or n == f"switch-{cfg.ablation_experts}"}
    details["capacity-factor sweep (seed 0)"] = sweep
    details["expert load on eval text, last Switch layer, seed 0: min / max fraction (uniform = 1/E)"] = {
        n: f"{min(by[n][0]['expert_load'][-1]):.3f} / {max(by[n][0]['expert_load'][-1]):.3f}"
        for n in by if by[n][0].get("expert_load")}

    plots = [plot_metrics(run_dir, curves, x="step", ys=["ppl"], where={"event": "eval"}, path="ppl_vs_steps.png",
                          title="validation perplexity vs steps", logy=True),
             plot_metrics(run_dir, curves, x="time", ys=["ppl"], where={"event": "eval"}, path="ppl_vs_time.png",
                          title="validation perplexity vs wall-clock (s)", logy=True),
             _load_plot(run_dir, by, cfg),
             plot_bars_with_ci({n: measurements[f"{n} ppl"] for n in ["dense", *main]}, run_dir / "final_ppl.png",
                               title="final validation perplexity", ylabel="ppl")]
    verdict = "inconclusive" if cfg.seeds < 2 else paired.verdict
    notes = (f"Preset {cfg.preset}: {cfg.steps} steps x {cfg.batch_size} x {cfg.seq_len} tokens, "
             f"{train_ids.numel()} training tokens, eval on {eval_ids.numel()} IMDB test-fold tokens. "
             "Speedup 0.0 means the Switch model never reached the dense model's final perplexity. "
             "The paper's 7x is at far larger scale (hundreds of thousands of steps, up to 128 experts per layer).")
    write_result(run_dir, "switch", CLAIM, measurements, verdict, details=details, notes=notes, plots=plots)
    return run_dir


def _last_train(path: Path) -> float | None:
    vals = [r.get("fraction_dropped") for r in map(json.loads, path.read_text().splitlines())
            if r.get("event") == "train" and "fraction_dropped" in r]
    return vals[-1] if vals else None


def _load_plot(run_dir: Path, by: dict, cfg: RecipeConfig) -> Path:
    """Expert-load histograms (last Switch layer, seed 0) with and without the balancing loss."""
    from matplotlib.figure import Figure

    names = [n for n in (f"switch-{cfg.ablation_experts}", f"switch-{cfg.ablation_experts}-nobalance") if n in by]
    fig = Figure(figsize=(5 * max(1, len(names)), 3.5))
    for i, n in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1)
        load = by[n][0]["expert_load"][-1]
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
