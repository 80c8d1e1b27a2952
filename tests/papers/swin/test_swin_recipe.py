"""Swin recipe: the tiny preset learns on real CIFAR-10, measures cost scaling and writes a report."""

import dataclasses
import json

import pytest
import torch

from paperzoo.papers.swin import recipe
from paperzoo.papers.swin.model import SwinConfig, SwinForImageClassification, swin_flops
from paperzoo.papers.swin.vit import ViT, ViTConfig, vit_flops
from paperzoo.recipes import AtLeast


@pytest.mark.data("cifar10-jpeg")
def test_tiny_run_learns_and_reports(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    tiny = recipe.PRESETS["tiny"]
    monkeypatch.setitem(recipe.PRESETS, "tiny", dataclasses.replace(tiny, seeds=1))
    run_dir = recipe.run(preset="tiny", out=tmp_path / "run", progress=False)
    for kind in ("swin", "vit"):
        losses = [r["loss"] for r in map(json.loads, (run_dir / kind / "seed-0" / "metrics.jsonl").read_text()
                                         .splitlines()) if r["event"] == "train"]
        assert min(losses[-3:]) < 0.9 * losses[0], f"{kind} loss did not fall by 10%: {losses}"
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert set(result["measurements"]) >= {"swin_test_accuracy", "vit_test_accuracy", "swin_minus_vit",
                                           "swin_time_slope", "vit_time_slope"}
    assert "Swin's time slope" in result["verdict_reason"] and "smoke test" in result["verdict_reason"]
    scaling = json.loads((run_dir / "scaling" / "job.json").read_text())
    assert scaling["sizes"] == [32, 64] and set(scaling["slopes"]) == {"swin", "vit"}
    assert all(t > 0 for ts in scaling["seconds"].values() for t in ts)
    assert (run_dir / "report.md").read_text().startswith("# swin")
    assert (run_dir / "scaling.png").is_file()
    # resume skips finished seeds and reuses the scaling measurement
    assert recipe.run(preset="tiny", out=run_dir, resume=True, progress=False) == run_dir


def test_augment_keeps_shape_and_varies():
    torch.manual_seed(0)
    x = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    a, b = recipe.augment(x), recipe.augment(x)
    assert a.shape == (16, 3, 32, 32) and a.dtype == torch.float32 and not torch.equal(a, b)


def test_matched_presets():
    small = recipe.PRESETS["small"].model
    assert small == {"swin": SwinConfig.preset("small"), "vit": ViTConfig.preset("small")}
    n_swin = sum(p.numel() for p in SwinForImageClassification(small["swin"]).parameters())
    n_vit = sum(p.numel() for p in ViT(small["vit"]).parameters())
    f_swin, f_vit = swin_flops(small["swin"], 32, 32), vit_flops(small["vit"], 32, 32)
    assert (n_swin, n_vit) == (1326758, 1403914)  # the committed report's models
    assert abs(n_swin / n_vit - 1) < 0.1 and abs(f_swin / f_vit - 1) < 0.15


def test_at_least_rule():
    assert AtLeast(1.6).judge(1.877, "ViT's time slope").verdict == "reproduced"
    v = AtLeast(1.6).judge(1.2, "ViT's time slope")
    assert v.verdict == "not reproduced" and v.reason == "ViT's time slope is 1.2, below 1.6"


def test_vit_validates_and_classifies():
    model = ViT(ViTConfig.preset("tiny"))
    out = model(pixel_values=torch.randn(2, 3, 30, 30), labels=torch.tensor([1, 2]))
    assert out.logits.shape == (2, 10) and out.loss.ndim == 0
    with pytest.raises(ValueError, match="pixel_values"):
        model(pixel_values=torch.randn(2, 1, 32, 32))
    with pytest.raises(ValueError, match="pool"):
        ViTConfig(pool="max")


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="valid: small, long, tiny"):
        recipe.run(preset="huge", out=tmp_path)
