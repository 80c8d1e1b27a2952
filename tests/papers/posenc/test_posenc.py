"""The positional-encoding study: the LM builds with every encoding, learned positions refuse to extrapolate,
no-position encoders are permutation-equivariant, and the tiny study learns and writes its report."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from paperzoo import registry
from paperzoo.papers.posenc import recipe
from paperzoo.papers.posenc.model import ENCODINGS, CharLM, CharLMConfig
from paperzoo.recipes import Job, run_jobs

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("position", ENCODINGS)
def test_model_builds_and_maps_ids_to_logits(position):
    torch.manual_seed(0)
    model = CharLM(CharLMConfig.preset("tiny", position))
    logits = model(torch.randint(0, 65, (2, 32)))
    assert logits.shape == (2, 32, 65) and torch.isfinite(logits).all()


def test_model_and_presets_reject_bad_input():
    model = CharLM(CharLMConfig.preset("tiny", "rotary"))
    with pytest.raises(ValueError, match=r"integer \(batch, seq\)"):
        model(torch.zeros(2, 8))
    with pytest.raises(ValueError, match=r"integer \(batch, seq\)"):
        model(torch.zeros(8, dtype=torch.long))
    with pytest.raises(ValueError, match="preset must be one of"):
        CharLMConfig.preset("huge", "rotary")
    with pytest.raises(ValueError, match="position must be one of"):
        CharLMConfig.preset("tiny", "xpos")


def test_learned_init_scale_of_the_ablation():
    torch.manual_seed(0)
    default = CharLM(CharLMConfig.preset("tiny", "learned")).encoder.abs_pos.weight.std().item()
    name, std = recipe.VARIANTS["learned-wide"]
    wide = CharLM(CharLMConfig.preset("tiny", "none").with_position(name, std)).encoder.abs_pos.weight.std().item()
    assert abs(default - 0.02) < 0.005 and abs(wide - std) < 0.1
    with pytest.raises(ValueError, match="learned_init_std must be > 0"):
        CharLMConfig.preset("tiny", "none").with_position("learned", 0.0)


def test_causal_model_does_not_look_ahead():
    torch.manual_seed(0)
    model = CharLM(CharLMConfig.preset("tiny", "alibi")).eval()
    x = torch.randint(0, 65, (1, 32))
    y = x.clone()
    y[0, 20:] = (y[0, 20:] + 1) % 65
    with torch.no_grad():
        assert torch.allclose(model(x)[:, :20], model(y)[:, :20], atol=1e-6)


def test_learned_positions_cannot_extrapolate_the_others_can():
    text = torch.randint(0, 65, (4 * 32 * 2 + 1,))
    for position in ENCODINGS:
        torch.manual_seed(0)
        ev = recipe.evaluate_lengths(CharLM(CharLMConfig.preset("tiny", position)), text, 32)
        assert ev["ppl"]["32"] is not None and math.isfinite(ev["ppl"]["32"])
        if position == "learned":
            assert ev["ppl"]["64"] is None and ev["ppl"]["128"] is None
            assert ev["note"]["128"] == recipe.NA_LEARNED
        else:
            assert all(math.isfinite(ev["ppl"][k]) for k in ("64", "128")), position


def test_permutation_equivariance_without_positions():
    perm = recipe.permutation_check(recipe.PRESETS["tiny"].model)
    assert perm["bidirectional"] < 1e-10  # float64: equivariant up to rounding
    assert perm["causal"] > 1e-3  # the causal mask encodes order
    torch.manual_seed(0)  # and with positions, a bidirectional encoder is not equivariant
    cfg = CharLMConfig.preset("tiny", "sinusoidal", causal=False)
    model = CharLM(cfg).double().eval()
    x, p = torch.randint(0, 65, (2, 32)), torch.randperm(32)
    with torch.no_grad():
        assert (model(x[:, p]) - model(x)[:, p]).abs().max() > 1e-3


def test_position_losses_equal_the_direct_cross_entropy():
    torch.manual_seed(0)
    model = CharLM(CharLMConfig.preset("tiny", "t5")).eval()
    text = torch.randint(0, 65, (3 * 16 + 5,))
    pl = recipe.position_losses(model, text, 16, batch=2)
    x, y = text[:48].view(3, 16), text[1:49].view(3, 16)
    with torch.no_grad():
        ref = F.cross_entropy(model(x).transpose(1, 2), y, reduction="none").double().mean(0)
    assert pl.shape == (16,) and torch.allclose(pl, ref, atol=1e-6)
    with pytest.raises(ValueError, match="at least length"):
        recipe.position_losses(model, text[:10], 16)


def test_char_windows_are_consecutive_characters():
    data = torch.arange(100)
    ds = recipe.CharWindows(data, 8)
    assert len(ds) == 92
    assert torch.equal(ds[5], torch.arange(5, 14))
    assert torch.equal(ds.__getitems__([0, 91]), torch.stack([torch.arange(0, 9), torch.arange(91, 100)]))
    with pytest.raises(ValueError, match="longer than length"):
        recipe.CharWindows(torch.arange(5), 8)


def _job(encoding: str, seed: int = 0) -> Job:
    return Job(encoding, seed, recipe.config_for(recipe.PRESETS["tiny"].model, encoding))


def test_resume_reuses_a_finished_run(tmp_path):
    done = tmp_path / "rotary" / "seed-1"
    done.mkdir(parents=True)
    (done / "job.json").write_text(json.dumps({"encoding": "rotary", "seed": 1, "marker": 7}))
    res = run_jobs(recipe.train_job, [_job("rotary", 1)], tmp_path, resume=True, args=(recipe.PRESETS["tiny"],))
    assert res["rotary", 1]["marker"] == 7
    with pytest.raises(ValueError, match="encoding must be one of"):
        recipe.config_for(recipe.PRESETS["tiny"].model, "xpos")


def test_variants_and_presets():
    assert recipe.config_for(CharLMConfig.preset("tiny"), "learned-wide").learned_init_std == 0.5 ** 0.5
    assert CharLMConfig.preset("tiny").transformer.position == "sinusoidal"  # the paper's encoding by default
    assert recipe.PRESETS["small"].model == CharLMConfig.preset("small", "none")


def test_registered_and_bad_arguments_refused(tmp_path):
    paper = registry.get("posenc")
    assert paper.arxiv == "1706.03762" and "posenc" in paper.recipes
    with pytest.raises(ValueError, match="valid: small, longer, tiny"):
        recipe.run(preset="huge", out=tmp_path)
    with pytest.raises(ValueError, match="seeds: expected an int >= 1"):
        recipe.run(preset="tiny", seeds=0, out=tmp_path)


@pytest.mark.data("tinyshakespeare")
def test_one_tiny_run_learns(tmp_path):
    """The smoke test of learning: train loss falls by >= 25% from ln(65) ~ 4.2 in 40 steps, and held-out ppl at L
    beats the no-context unigram baseline (~ 28)."""
    res = run_jobs(recipe.train_job, [_job("rotary")], tmp_path, progress=False, args=(recipe.PRESETS["tiny"],))
    r = res["rotary", 0]
    assert r["final_loss"] < 0.75 * r["first_loss"], (r["first_loss"], r["final_loss"])
    assert r["ppl"]["32"] < 25 and math.isfinite(r["ppl"]["128"])
    assert (tmp_path / "rotary" / "seed-0" / "job.json").is_file()


@pytest.mark.slow
@pytest.mark.data("tinyshakespeare")
def test_tiny_study_learns_and_reports(tmp_path, monkeypatch):
    """Every encoding trains (train loss falls by >= 25% from ln(65) ~ 4.2) and is evaluated at L, 2L, 4L.
    One seed keeps it short; the CLI's tiny preset runs two."""
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    run_dir = recipe.run(preset="tiny", seeds=1, out=tmp_path / "run")
    for enc in ENCODINGS:
        r = json.loads((run_dir / enc / "seed-0" / "job.json").read_text())
        assert r["final_loss"] < 0.75 * r["first_loss"], (enc, r["first_loss"], r["final_loss"])
        assert r["ppl"]["32"] < 25, enc  # the unigram baseline is ~ 28
        assert (r["ppl"]["128"] is None) == (enc == "learned")
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    report = (run_dir / "report.md").read_text()
    assert report.startswith("# posenc")
    for enc in ENCODINGS:
        assert f"| {enc} |" in report
    assert recipe.NA_LEARNED in report and "permutation" in report.lower()
    for png in ("ppl_vs_length.png", "loss_by_position.png", "ppl_at_L.png", "train_loss.png"):
        assert (run_dir / png).is_file()
