"""The ELECTRA recipe end to end at the tiny preset: the discriminator learns beyond the all-original baseline."""

import dataclasses
import json
import math

import pytest
import torch
from torch.utils.data import TensorDataset

from paperzoo.data.tokenizer import pack_documents
from paperzoo.papers.electra import recipe


def _entropy(q: float) -> float:
    return -(q * math.log(q) + (1 - q) * math.log(1 - q))


@pytest.mark.data("imdb", "sst2", "nlpdatasets-senteval")
def test_tiny_reproduction_learns(tmp_path):
    run_dir = recipe.run("tiny", out=tmp_path / "run", progress=False)
    report = (run_dir / "report.md").read_text()
    assert report.startswith("# electra:") and "**Verdict:**" in report and "smoke test" in report
    assert (run_dir / "tokenizer.json").is_file()
    assert json.loads((run_dir / "config.json").read_text())["config"]["preset"] == "tiny"
    details = json.loads((run_dir / "result.json").read_text())["details"]
    f, steps = details["FLOPs per pretraining step"], details["pretraining steps"]
    assert f["electra"] > f["mlm"] > 0 and steps == {"electra": 40, "mlm": round(40 * f["electra"] / f["mlm"])}
    for seed in (0, 1):
        res = json.loads((run_dir / "electra" / f"seed-{seed}" / "job.json").read_text())
        before, after = res["before"], res["after"]
        # the discriminator's loss falls from chance, below the best constant ("all original") predictor's log
        # loss, and its scores rank replaced tokens above originals
        assert after["eval_disc_loss"] < 0.8 * before["eval_disc_loss"]
        assert after["eval_disc_loss"] < _entropy(after["eval_replaced_frac"])
        assert after["eval_disc_auc"] > 0.5
        assert after["eval_disc_acc"] >= after["eval_baseline_acc"] - 1e-3
        mlm = json.loads((run_dir / "mlm" / f"seed-{seed}" / "job.json").read_text())
        assert mlm["after"]["eval_mlm_loss"] < mlm["before"]["eval_mlm_loss"] and mlm["steps"] == steps["mlm"]
        assert {*recipe.TASKS, "mini-GLUE"} <= set(res)
        assert (run_dir / "electra" / f"seed-{seed}" / "encoder.safetensors").is_file()
    result = json.loads((run_dir / "result.json").read_text())
    assert {"mini-GLUE ELECTRA", "mini-GLUE MLM", "ELECTRA - MLM (mini-GLUE)", "mini-GLUE no pretraining (control)",
            "ELECTRA - no pretraining (mini-GLUE)", "MLM - no pretraining (mini-GLUE)"} <= set(result["measurements"])
    for mode in ("electra", "mlm", "no pretraining (control)"):
        cos = result["measurements"][f"token-state cosine {mode}"]["values"]
        assert len(cos) == 2 and all(-1.0 <= c <= 1.0 for c in cos)
    for seed in (0, 1):  # the control fine-tunes the untrained encoder: no pretraining step, the same tasks
        control = json.loads((run_dir / recipe.CONTROL / f"seed-{seed}" / "job.json").read_text())
        assert control["steps"] == 0 and "after" not in control and {*recipe.TASKS, "mini-GLUE"} <= set(control)


@pytest.mark.data("imdb", "sst2", "nlpdatasets-senteval")
def test_the_context_configuration_pretrains_and_fine_tunes_both_models(tmp_path, monkeypatch):
    """The ``context`` presets' model fields (RoPE, no token-type row, no dropout) at the tiny size: ELECTRA and
    the MLM baseline pretrain, and their encoders, with no position or token-type table, fine-tune."""
    tiny = dataclasses.replace(recipe.TINY, model=dataclasses.replace(recipe.TINY.model, **recipe.CONTEXT_MODEL))
    monkeypatch.setitem(recipe.PRESETS, "tiny", tiny)
    run_dir = recipe.run("tiny", seeds=1, out=tmp_path / "run", progress=False)
    for mode in ("electra", "mlm"):
        res = json.loads((run_dir / mode / "seed-0" / "job.json").read_text())
        assert res["after"]["eval_mlm_loss"] < res["before"]["eval_mlm_loss"]
        assert all(math.isfinite(res[t]) for t in (*recipe.TASKS, "mini-GLUE"))
        from safetensors.torch import load_file

        names = load_file(str(run_dir / mode / "seed-0" / "encoder.safetensors"))
        assert not [k for k in names if "position" in k or "type" in k], sorted(names)


@pytest.mark.data("imdb")
def test_discriminator_beats_the_all_original_baseline_on_text_it_has_seen(tmp_path):
    """Replaced-token detection is learnable: on 32 real IMDB windows seen in training (fresh masks and samples at
    evaluation), the tiny discriminator's accuracy rises above predicting "original" everywhere.

    On held-out text the tiny and small scales stay on the all-original plateau (see the report), so the recipe
    smoke test above asserts the loss and the ranking (AUC); this one asserts the accuracy the issue asks for.
    About 10 s on one thread."""
    p = recipe.PRESETS["tiny"]
    texts = recipe._imdb_texts(60)
    tok = recipe._tokenizer(tmp_path, texts, p)
    data = TensorDataset(*pack_documents(tok, texts, p.seq_len, max_examples=32))
    steps = 300
    cfg = dataclasses.replace(p.train, steps=steps, warmup_steps=30, eval_every=steps, ckpt_every=steps)
    torch.manual_seed(0)
    model = recipe.build_pretrainer("electra", dataclasses.replace(p.model, vocab_size=tok.get_vocab_size()),
                                    p.objective)
    res = recipe.pretrain(model, cfg, data, data, tmp_path / "run", False, progress=False)
    before, after = res["before"], res["after"]
    assert 0.1 < after["eval_replaced_frac"] < 0.15  # about 15% masked, a few sampled back to the original
    assert after["eval_disc_loss"] < 0.5 * before["eval_disc_loss"]
    assert after["eval_disc_acc"] > after["eval_baseline_acc"] + 0.02, (after["eval_disc_acc"],
                                                                         after["eval_baseline_acc"])


@pytest.mark.slow
@pytest.mark.data("imdb", "sst2", "nlpdatasets-senteval")
def test_resume_skips_finished_jobs_and_reproduces_the_report(tmp_path):
    """About a minute: a second run with resume=True reuses every finished job and writes the same figures."""
    run_dir = recipe.run("tiny", out=tmp_path / "run", progress=False)
    first = json.loads((run_dir / "result.json").read_text())["measurements"]
    stamp = (run_dir / "electra" / "seed-0" / "job.json").stat().st_mtime_ns
    assert recipe.run("tiny", out=run_dir, resume=True, progress=False) == run_dir
    assert (run_dir / "electra" / "seed-0" / "job.json").stat().st_mtime_ns == stamp
    again = json.loads((run_dir / "result.json").read_text())["measurements"]
    assert {k: v["values"] for k, v in first.items()} == {k: v["values"] for k, v in again.items()}


def test_presets_name_the_committed_reports():
    """``small`` is the scale of each committed report (docs/reports/electra*/config.json), values unchanged."""
    import pathlib

    reports = pathlib.Path(__file__).parents[3] / "docs" / "reports"
    for presets, folder in ((recipe.PRESETS, "electra"), (recipe.ABLATIONS_PRESETS, "electra-ablations")):
        assert set(presets) == {"tiny", "small", "context"}
        committed = json.loads((reports / folder / "config.json").read_text())["config"]
        p = presets["small"]
        finetune = {"precision": "fp32", **committed["finetune"]}  # recorded before FinetuneConfig.precision (fp32)
        pretrain = {"compile": False, **committed["pretrain"]}  # recorded before TrainConfig.compile (False)
        assert pretrain == p.train.to_dict() and finetune == dataclasses.asdict(p.finetune)
        renamed = {"depth": "num_layers", "hidden_act": "activation"}  # the config vocabulary since
        model = {"position": "learned", **{renamed.get(k, k): v for k, v in committed["model"].items()}}  # before
        # ElectraConfig.position (learned)
        assert model == dataclasses.asdict(dataclasses.replace(p.model, vocab_size=model["vocab_size"]))
        assert all(committed[k] == getattr(p, k) for k in ("seq_len", "docs") if k in committed)
        assert p.seeds == len(json.loads((reports / folder / "config.json").read_text())["seeds"])
        assert p.model == recipe.ElectraConfig.preset("small")


def test_unknown_preset_raises(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        recipe.run("huge", out=tmp_path)


@pytest.mark.slow
@pytest.mark.data("imdb", "sst2", "nlpdatasets-senteval")
def test_two_workers_give_the_same_report_as_one(tmp_path):
    one = recipe.run("tiny", out=tmp_path / "one", progress=False)
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "tokenizer.json").write_text((one / "tokenizer.json").read_text())  # same vocabulary
    two = recipe.run("tiny", out=tmp_path / "two", progress=False, workers=2)
    a = json.loads((one / "result.json").read_text())["measurements"]
    b = json.loads((two / "result.json").read_text())["measurements"]
    for key in ("mini-GLUE ELECTRA", "mini-GLUE MLM"):
        assert a[key]["values"] == pytest.approx(b[key]["values"], abs=1e-6), key


@pytest.mark.data("imdb", "sst2", "nlpdatasets-senteval")
def test_ablations_report_every_objective_and_the_untrained_control(tmp_path):
    run_dir = recipe.run_ablations("tiny", seeds=1, out=tmp_path / "abl", progress=False)
    result = json.loads((run_dir / "result.json").read_text())
    ms = result["measurements"]
    assert {f"mini-GLUE {m}" for m in recipe.ABLATION_MODES} < set(ms)
    assert "mini-GLUE no pretraining (control)" in ms and "ELECTRA - electra-15" in ms
    cos = ms["token-state cosine no pretraining (control)"]["values"]
    assert len(cos) == 1 and -1.0 <= cos[0] <= 1.0
    control = json.loads((run_dir / recipe.CONTROL / "seed-0" / "job.json").read_text())
    assert control["steps"] == 0 and "after" not in control
    assert set(result["details"]["FLOPs per pretraining step"]) == set(recipe.ABLATION_MODES)


def test_token_state_cosine_is_one_for_a_collapsed_encoder_and_lower_otherwise():
    p = recipe.PRESETS["tiny"]
    torch.manual_seed(0)
    data = TensorDataset(torch.randint(5, 100, (8, 16)), torch.ones(8, 16, dtype=torch.long))
    encoder = recipe.build_pretrainer("mlm", dataclasses.replace(p.model, vocab_size=100), p.objective).encoder()
    assert recipe.token_state_cosine(encoder, data) < 0.9
    with torch.no_grad():
        last = encoder.encoder.layers[-1].ffn_norm
        last.weight.zero_()  # post-norm output = its bias for every token
        last.bias.fill_(0.5)
    assert recipe.token_state_cosine(encoder, data) == pytest.approx(1.0, abs=1e-5)


def test_a_preset_generator_rate_outside_0_1_names_the_range():
    with pytest.raises(ValueError, match=r"generator_lr: expected a fraction in \(0, 1\], got 1.5"):
        dataclasses.replace(recipe.TINY, generator_lr=1.5)


def test_jobs_with_a_generator_train_it_at_the_presets_rate_and_mlm_at_one_rate(tmp_path, monkeypatch):
    """``Preset.generator_lr`` reaches the optimizer groups of every objective with a generator; MLM has none."""
    seen = {}

    class Stop(Exception):
        pass

    def fake_pretrain(model, cfg, train, held, out, resume, progress, param_groups=None):
        seen["groups"] = param_groups
        raise Stop

    monkeypatch.setattr(recipe, "pretrain", fake_pretrain)
    p = dataclasses.replace(recipe.TINY, generator_lr=0.25)
    for mode in (*recipe.ABLATION_MODES, "mlm"):
        with pytest.raises(Stop):
            recipe.train_job(recipe.Job(mode, 0, p.train.steps), tmp_path, False, False, p, None, None, None, None)
        rates = {g["lr"] for g in seen["groups"]} if seen["groups"] is not None else {p.train.lr}
        assert rates == ({p.train.lr} if mode == "mlm" else {p.train.lr, 0.25 * p.train.lr}), mode


@pytest.mark.parametrize("presets, folder", [(recipe.PRESETS, "electra/context"),
                                             (recipe.ABLATIONS_PRESETS, "electra-ablations/context")])
def test_context_presets_are_the_committed_context_reports(presets, folder):
    """Each committed ``context`` report (docs/reports/<folder>/config.json) ran exactly today's ``context`` preset."""
    import pathlib

    from paperzoo.report.serial import to_jsonable

    config = json.loads((pathlib.Path(__file__).parents[3] / "docs" / "reports" / folder / "config.json").read_text())
    committed, p = config["config"], presets["context"]
    assert committed["preset"] == "context"
    assert {f.name: committed[f.name] for f in dataclasses.fields(p)} == to_jsonable(p)
    assert config["seeds"] == list(range(p.seeds))
