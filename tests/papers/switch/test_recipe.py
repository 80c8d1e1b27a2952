"""The Switch recipe: its run list, the speedup rule, and a smoke test that both models learn on IMDB text."""

import dataclasses
import json

import pytest
import torch

from paperzoo.papers.switch.model import SwitchLMConfig
from paperzoo.papers.switch.recipe import PRESETS, build_data, crossing, jobs, run, step_speedup, train_job
from paperzoo.recipes import Job


def test_jobs_cover_seeds_ablations_and_sweep():
    by = {(j.variant, j.seed): j.config for j in jobs(PRESETS["small"])}
    for s in range(3):
        assert {("dense", s), ("switch-8", s), ("switch-32", s)} <= set(by)
    assert ("switch-8-nobalance", 0) in by
    assert {("switch-8-cf1", 0), ("switch-8-cf2", 0)} <= set(by) and ("switch-8-cf1.25", 0) not in by
    assert by[("switch-8-nobalance", 0)].balance_coef == 0.0
    assert by[("dense", 1)].num_experts == 0 and by[("switch-32", 2)].num_experts == 32
    assert by[("switch-8-cf2", 0)].capacity_factor == 2.0


def test_preset_names_mean_the_same_scale():
    """The recipe preset ``small`` (the committed run) trains the model preset ``small``, ``medium`` ``medium``."""
    for name in ("small", "medium"):
        assert PRESETS[name].model == SwitchLMConfig.preset(name, max_len=128)
    small = PRESETS["small"]  # the committed run's values (docs/reports/switch/config.json)
    assert (small.model.dim, small.model.vocab_size, small.model.ffn_dim, small.experts) == (128, 4096, 512, (8, 32))
    assert (small.train.steps, small.train.warmup_steps, small.eval_tokens, small.seeds) == (1000, 50, 65536, 3)


def test_step_speedup_rule():
    curve = [{"step": 100, "ppl": 50.0}, {"step": 200, "ppl": 30.0}, {"step": 400, "ppl": 20.0}]
    assert step_speedup(30.0, curve, 400) == 2.0
    assert step_speedup(10.0, curve, 400) is None
    assert step_speedup(60.0, curve, 400) == 4.0  # already below at the first eval
    # between evals: interpolated in log-ppl (30 -> 20 over steps 200 -> 400; 24.49 is their geometric mean)
    assert step_speedup(30.0 ** 0.5 * 20.0 ** 0.5, curve, 400) == pytest.approx(400 / 300)
    assert crossing(curve, 30.0 ** 0.5 * 20.0 ** 0.5, key="step") == pytest.approx(300)


def test_smoke_learns_synthetic_tokens(tmp_path):
    """Fast: the training path of the recipe on a learnable synthetic stream (next = 7 * id + 3 mod V)."""
    p = _tiny(vocab_size=64, max_len=16, steps=25)
    g = torch.Generator().manual_seed(0)
    start = torch.randint(0, 64, (160, 1), generator=g)
    ids = start.clone()
    for _ in range(15):
        ids = torch.cat([ids, (ids[:, -1:] * 7 + 3) % 64], 1)
    s = train_job(Job("switch-4", 0, p.model), tmp_path, False, False, p, ids[:128], ids[128:])
    assert s["ppl"] < 0.5 * 64, s["ppl"]  # uniform guessing: 64
    assert [r["step"] for r in s["curve"]] == [25]


def _tiny(vocab_size: int, max_len: int, steps: int, **kw):
    """The tiny preset with a smaller model, batch 8 and one eval at the end."""
    p = PRESETS["tiny"]
    return dataclasses.replace(p, model=dataclasses.replace(p.model, vocab_size=vocab_size, max_len=max_len),
                               train=dataclasses.replace(p.train, batch_size=8, steps=steps, eval_every=steps),
                               **kw)


@pytest.mark.slow
@pytest.mark.data("imdb")
def test_smoke_dense_and_switch_learn_imdb(tmp_path):
    p = _tiny(vocab_size=300, max_len=16, steps=30, eval_tokens=1024, tokenizer_docs=60, train_docs=60)
    train_ids, eval_ids = build_data(p, tmp_path)
    assert train_ids.shape[1] == 16 and int(train_ids.max()) < 300
    for name, cfg in (("dense", p.model.dense()), ("switch-4", p.model)):
        s = train_job(Job(name, 0, cfg), tmp_path / name, False, False, p, train_ids, eval_ids)
        # a uniform model has perplexity = vocab size (300); learning must cut it by more than half
        assert s["ppl"] < 0.5 * p.model.vocab_size, (name, s["ppl"])
        lines = [json.loads(x) for x in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        train = [r["loss"] for r in lines if r["event"] == "train"]
        assert train[-1] < train[0] - 0.5, (name, train)
    assert s["expert_load"] is not None and abs(sum(s["expert_load"][0]) - 1) < 1e-5


@pytest.mark.slow
@pytest.mark.data("imdb")
def test_tiny_preset_end_to_end(tmp_path):
    d = run("tiny", out=tmp_path / "run", progress=False)
    report = (d / "report.md").read_text()
    assert "Verdict" in report and (d / "ppl_vs_steps.png").is_file() and (d / "expert_load.png").is_file()


@pytest.mark.slow
@pytest.mark.data("imdb")
def test_tiny_preset_with_two_workers_matches_one(tmp_path):
    """Worker processes (1 thread each) train the same runs: same seeds, same data order, same perplexities."""
    one = run("tiny", out=tmp_path / "one", progress=False)
    two = run("tiny", out=tmp_path / "two", progress=False, workers=2)
    for summary in one.glob("*/seed-*/job.json"):
        a = json.loads(summary.read_text())
        b = json.loads((two / summary.relative_to(one)).read_text())
        assert abs(a["ppl"] - b["ppl"]) <= 1e-3 * a["ppl"], (summary, a["ppl"], b["ppl"])
