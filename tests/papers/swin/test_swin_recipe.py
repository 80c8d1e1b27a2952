"""Swin recipe: the tiny preset learns on real CIFAR-10, measures cost scaling and writes a report."""

import json

import pytest
import torch

from paperzoo.papers.swin import recipe
from paperzoo.papers.swin.vit import ViT, ViTConfig, vit_flops


def test_tiny_run_learns_and_reports(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    tiny = recipe.PRESETS["tiny"]
    monkeypatch.setitem(recipe.PRESETS, "tiny", recipe.Preset(**{**tiny.__dict__, "seeds": 1}))
    run_dir = recipe.run(preset="tiny", out=tmp_path / "run")
    for kind in ("swin", "vit"):
        losses = [r["loss"] for r in map(json.loads, (run_dir / f"{kind}-seed-0" / "metrics.jsonl").read_text()
                                         .splitlines()) if r["event"] == "train"]
        assert min(losses[-3:]) < 0.9 * losses[0], f"{kind} loss did not fall by 10%: {losses}"
    result = json.loads((run_dir / "result.json").read_text())
    assert result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert set(result["measurements"]) >= {"swin_test_accuracy", "vit_test_accuracy", "swin_minus_vit"}
    scaling = json.loads((run_dir / "scaling.json").read_text())
    assert {r["size"] for r in scaling["rows"]} == {32, 64}
    assert all(r["seconds"] > 0 and r["activation_bytes"] > 0 for r in scaling["rows"])
    assert (run_dir / "report.md").read_text().startswith("# swin")
    assert (run_dir / "scaling.png").is_file()
    # resume skips finished seeds and reuses the scaling measurement
    assert recipe.run(preset="tiny", out=run_dir, resume=True) == run_dir


def test_augment_keeps_shape_and_varies():
    torch.manual_seed(0)
    x = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    a, b = recipe.augment(x), recipe.augment(x)
    assert a.shape == (16, 3, 32, 32) and a.dtype == torch.float32 and not torch.equal(a, b)


def test_slope_and_matched_presets():
    assert abs(recipe.slope([1, 2, 4], [3, 12, 48]) - 2.0) < 1e-9
    small = recipe.PRESETS["small"]
    n_swin = sum(p.numel() for p in recipe.build("swin", small).parameters())
    n_vit = sum(p.numel() for p in recipe.build("vit", small).parameters())
    f_swin, f_vit = recipe.swin_flops(small.swin, 32, 32), vit_flops(small.vit, 32, 32)
    assert abs(n_swin / n_vit - 1) < 0.1 and abs(f_swin / f_vit - 1) < 0.15


def test_vit_validates_and_classifies():
    model = ViT(ViTConfig.preset("tiny"))
    out = model(pixel_values=torch.randn(2, 3, 30, 30), labels=torch.tensor([1, 2]))
    assert out.logits.shape == (2, 10) and out.loss.ndim == 0
    with pytest.raises(ValueError, match="pixel_values"):
        model(pixel_values=torch.randn(2, 1, 32, 32))
    with pytest.raises(ValueError, match="pool"):
        ViTConfig(pool="max")


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="valid: small, tiny"):
        recipe.run(preset="huge", out=tmp_path)
