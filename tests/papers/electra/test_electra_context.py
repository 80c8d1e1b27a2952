"""``paperzoo reproduce electra-context``: candidates are validated, the slow generator's rate reaches the optimizer,
and the tiny search runs end to end with a curve per candidate."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from paperzoo.papers.electra import context, recipe
from paperzoo.papers.electra.context import Candidate, configure
from paperzoo.papers.electra.recipe import build_pretrainer, generator_groups
from paperzoo.train import TrainConfig

REPORTS = Path(__file__).parents[3] / "docs" / "reports"


def test_a_candidate_with_an_unknown_field_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown model fields \['postion'\]; valid: .*'position'"):
        Candidate("typo", model={"postion": "rotary"})
    with pytest.raises(ValueError, match="unknown train fields"):
        Candidate("typo", train={"learning_rate": 1e-3})
    with pytest.raises(ValueError, match=r"generator_lr must be in \(0, 1\]"):
        Candidate("x", generator_lr=0.0)
    with pytest.raises(ValueError, match="leave 'mode' out"):
        Candidate("x", objective={"mode": "mlm"})
    with pytest.raises(ValueError, match="distinct candidate names"):
        context.Preset(model=context.PRESETS["tiny"].model, train=context.PRESETS["tiny"].train,
                       candidates=(Candidate("a"), Candidate("a")))


def test_every_small_candidate_changes_one_thing_from_its_reference():
    """The search is one knob at a time: each rope-fast-* candidate differs from rope-fast in one field."""
    cands = {c.name: c for c in context.PRESETS["small"].candidates}
    p = context.PRESETS["small"]
    ref = configure(p, cands["rope-fast"])
    for name in ("rope-fast-small-gen", "rope-fast-no-projection"):
        got = configure(p, cands[name])
        diff = [f for f in ref[0].__dataclass_fields__ if getattr(ref[0], f) != getattr(got[0], f)]
        assert len(diff) == 1 and got[1:] == ref[1:], (name, diff)
    assert configure(p, cands["rope-fast-slow-gen"]) == ref and cands["rope-fast-slow-gen"].generator_lr < 1
    for name in ("learned-fast", "t5-fast"):  # the positions only
        got = configure(p, cands[name])
        assert [f for f in ref[0].__dataclass_fields__ if getattr(ref[0], f) != getattr(got[0], f)] == ["position"]


def test_the_recipes_context_presets_are_the_searched_candidate():
    """``electra`` / ``electra-ablations`` preset ``context``: the candidate the search chose, on the recipes' small
    model, with the search's vocabulary; only the rate and the candidate's model fields differ from ``small``."""
    chosen = json.loads((REPORTS / "electra-context" / "result.json").read_text())["details"]["chosen"]
    assert recipe.CONTEXT_CANDIDATE == chosen  # the committed search's choice
    cand = {c.name: c for c in context.PRESETS["small"].candidates}[recipe.CONTEXT_CANDIDATE]
    assert cand.model == recipe.CONTEXT_MODEL and cand.train == {"lr": recipe.CONTEXT_LR}
    assert cand.generator_lr == recipe.CONTEXT_GENERATOR_LR and cand.objective == {}
    searched = configure(context.PRESETS["small"], cand)[0]
    for presets in (recipe.PRESETS, recipe.ABLATIONS_PRESETS):
        p, small = presets["context"], presets["small"]
        assert p.model == searched and p.vocab_size == context.PRESETS["small"].vocab_size
        assert p.train.lr == recipe.CONTEXT_LR and p.objective == small.objective and p.tasks == small.tasks
        assert p.generator_lr == cand.generator_lr and small.generator_lr == 1.0
        assert p.model == dataclasses.replace(small.model, **recipe.CONTEXT_MODEL)


def test_the_slow_generator_gets_its_rate_and_the_shared_tables_keep_theirs():
    p = context.PRESETS["tiny"]
    torch.manual_seed(0)
    model = build_pretrainer("electra", p.model, p.objective)
    cfg = TrainConfig(lr=1e-3, weight_decay=0.01)
    assert generator_groups(model, cfg, 1.0) is None
    groups = generator_groups(model, cfg, 0.25)
    lr_of = {id(q): g["lr"] for g in groups for q in g["params"]}
    everything = {id(q) for q in model.parameters()}
    assert set(lr_of) == everything and sum(len(g["params"]) for g in groups) == len(everything)  # each once
    shared = {id(q) for q in model.discriminator_body.parameters()}
    own = {id(q) for q in model.generator.parameters()} - shared
    assert own and all(lr_of[i] == 0.25e-3 for i in own)
    assert all(lr == 1e-3 for i, lr in lr_of.items() if i not in own)
    word = model.generator.body.embeddings.word.weight  # tied: the generator's output matrix is the shared table
    assert id(word) in shared and lr_of[id(word)] == 1e-3
    from paperzoo.train import param_groups

    decay_of = {id(q): g["weight_decay"] for g in param_groups(model, 0.01) for q in g["params"]}
    assert {id(q): g["weight_decay"] for g in groups for q in g["params"]} == decay_of  # decay as usual


@pytest.mark.data("imdb")
def test_tiny_search_runs_and_reports_a_curve_per_candidate(tmp_path):
    run_dir = context.run("tiny", out=tmp_path / "run", progress=False)
    result = json.loads((run_dir / "result.json").read_text())
    names = [c.name for c in context.PRESETS["tiny"].candidates]
    for n in names:
        for key in ("AUC", "id-AUC", "AUC - id-AUC", "context probe AUC", "token-state cosine"):
            assert len(result["measurements"][f"{key} {n}"]["values"]) == 2
        curve = json.loads((run_dir / n / "seed-0" / "job.json").read_text())["curve"]
        assert [r["step"] for r in curve] == [10, 20] and all(0 <= r["eval_probe_auc"] <= 1 for r in curve)
    d = result["details"]
    assert set(d["discriminator learned context"]) == set(names) and "chosen" in d
    assert "generator lr x0.5" in d["candidates (changes to the preset)"]["rope-slow-gen"]
    assert "smoke test" in (run_dir / "report.md").read_text() and (run_dir / "health.png").is_file()
