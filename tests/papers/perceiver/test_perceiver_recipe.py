"""The Perceiver recipe: baselines match the parameter budget, the tiny run learns and writes a report."""

import json
from dataclasses import replace

import pytest
import torch

from paperzoo.papers.perceiver import recipe


def test_baseline_matches_the_parameter_budget():
    for name in ("tiny", "small"):
        for task, spec in recipe.PRESETS[name].model.items():
            models = recipe.build_models(task, spec)
            n = {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()}
            assert abs(n["transformer"] - n["perceiver"]) / n["perceiver"] < 0.1, (name, task, n)


def test_models_take_the_raw_inputs():
    spec = recipe.PRESETS["tiny"].model["fsdd"]
    models = recipe.build_models("fsdd", spec)
    wave = torch.randn(2, recipe.AUDIO_SAMPLES)
    assert recipe._logits(models["perceiver"], wave).shape == (2, 10)
    assert recipe._logits(models["transformer"], wave).shape == (2, 10)
    img = recipe.prepare("cifar10", torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8))
    assert recipe._logits(recipe.build_models("cifar10", recipe.PRESETS["tiny"].model["cifar10"])["perceiver"],
                          img).shape == (2, 10)


@pytest.mark.data("fashion-mnist")
def test_tiny_run_learns_and_reports(tmp_path, monkeypatch):
    """Fashion-MNIST only, one seed, a 64-image subset seen repeatedly: both models' loss must fall by 25%."""
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    tiny = recipe.PRESETS["tiny"]
    train = replace(tiny.train, steps=24, batch_size=32, lr=1e-2, warmup_steps=2, ckpt_every=12, log_every=2)
    monkeypatch.setitem(recipe.PRESETS, "tiny", replace(tiny, seeds=1, tasks=("fashion",), subset=64,
                                                        test_subset=64, train=train))
    run_dir = recipe.run(preset="tiny", out=tmp_path / "run", progress=False)
    for kind in ("perceiver", "transformer"):
        recs = [json.loads(line) for line in (run_dir / "fashion" / kind / "seed-0" / "metrics.jsonl").read_text()
                .splitlines()]
        losses = [r["loss"] for r in recs if r["event"] == "train"]
        assert sum(losses[-3:]) < 0.75 * sum(losses[:3]), (kind, losses)
    result = json.loads((run_dir / "result.json").read_text())
    assert "fashion perceiver test accuracy" in result["measurements"]
    assert result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert result["details"]["fashion"]["forward_gflops_per_example"]["perceiver"] > 0
    assert (run_dir / "report.md").read_text().startswith("# perceiver")


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="valid: small, fsdd-long, tiny"):
        recipe.run(preset="huge", out=tmp_path)
