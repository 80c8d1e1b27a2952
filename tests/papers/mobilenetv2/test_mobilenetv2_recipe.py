"""MobileNetV2 recipe: augmentation, a learning smoke test, and (slow) the whole tiny reproduction."""

import json
from dataclasses import replace

import pytest
import torch

import paperzoo.papers.mobilenetv2.recipe as recipe
from paperzoo.papers.mobilenetv2.recipe import PRESETS, VARIANTS, augment, evaluate, run, schedule, train_variant


def _synthetic(n_train: int = 512, n_test: int = 256, seed: int = 0, size: int = 32) -> dict[str, torch.Tensor]:
    """10 classes told apart by a colour and a stripe orientation, plus noise: learnable in a few dozen steps."""
    g = torch.Generator().manual_seed(seed)

    def make(n):
        labels = torch.randint(0, 10, (n,), generator=g)
        colours = torch.rand(10, 3, 1, 1, generator=torch.Generator().manual_seed(7)) * 160 + 40
        stripes = (torch.arange(size) // 4 % 2).float() * 60
        img = colours[labels].expand(n, 3, size, size).clone()
        img += torch.where((labels % 2 == 0)[:, None, None, None], stripes[None, None, :, None],
                           stripes[None, None, None, :])
        img += torch.randn(n, 3, size, size, generator=g) * 20
        return img.clamp(0, 255).to(torch.uint8), labels

    tr, trl = make(n_train)
    te, tel = make(n_test)
    return {"train_images": tr, "train_labels": trl, "test_images": te, "test_labels": tel}


def test_augment_crops_and_flips():
    torch.manual_seed(0)
    x = torch.arange(2 * 3 * 32 * 32, dtype=torch.float32).view(2, 3, 32, 32)
    y = augment(x)
    assert y.shape == x.shape
    # every output row is a (possibly flipped) shifted piece of the padded input, or zero padding
    torch.manual_seed(0)
    y2 = augment(x, pad=0)
    assert all(torch.equal(y2[i], x[i]) or torch.equal(y2[i], x[i].flip(-1)) for i in range(2))


def test_presets_and_variants():
    assert set(VARIANTS) == {"linear", "relu6_projection", "shortcut_expansion", "shortcut_none", "t2", "t1"}
    small = PRESETS["small"]
    assert small.seeds >= 3 and small.model_config("linear").stem_stride == 1
    assert small.model_config("relu6_projection").linear_bottleneck is False
    assert small.model_config("t1").expand_ratio == 1
    with pytest.raises(ValueError, match="unknown preset"):
        run(preset="huge")


def test_tiny_training_smoke_loss_falls():
    data = _synthetic(n_train=384, n_test=128, size=16)
    cfg = replace(PRESETS["tiny"], train=schedule(2.5, 384, 32, lr=0.2, warmup_epochs=0.25), augment=False)
    torch.manual_seed(0)
    from paperzoo.papers.mobilenetv2.model import MobileNetV2ForImageClassification

    before = evaluate(MobileNetV2ForImageClassification(cfg.model_config("linear")).train(),
                      data["test_images"], data["test_labels"])
    model, summary = train_variant(cfg, "linear", 0, data, out_dir=None, progress=False)
    after = summary["eval"]
    assert after["loss"] < 0.6 * before["loss"], (before, after)
    assert after["accuracy"] > 0.5, after


@pytest.mark.slow
def test_tiny_reproduction_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setattr(recipe, "load_data", lambda *_: _synthetic(seed=1))
    out = run(preset="tiny", seeds=2, out=tmp_path / "run", progress=False)
    report = (out / "report.md").read_text()
    assert "claim 1 (linear bottleneck" in report and "claim 2 (shortcuts" in report
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert (out / "model" / "model.safetensors").is_file() and (out / "accuracy.png").is_file()
    # resume reads finished runs back
    again = run(preset="tiny", seeds=2, out=out, resume=True, progress=False)
    assert json.loads((again / "result.json").read_text())["measurements"] == result["measurements"]


@pytest.mark.slow
@pytest.mark.data("cifar10-jpeg")
def test_tiny_preset_on_cifar10(tmp_path):
    out = run(preset="tiny", out=tmp_path / "run", progress=False)
    rec = json.loads((out / "linear" / "seed-0" / "job.json").read_text())
    # 32 steps on 1,024 images: the train loss falls below ln(10) = 2.303 (measured 2.23); the test accuracy
    # is still at chance (measured 0.109), so it is not asserted
    assert rec["train_loss"] < 2.28 and 0.0 <= rec["int8_accuracy"] <= 1.0


@pytest.mark.slow
@pytest.mark.data("cifar10-jpeg")
def test_tiny_reproduction_with_two_workers(tmp_path):
    """Worker processes read CIFAR-10 themselves (a patched loader would not reach them): the tiny preset, 2 seeds."""
    out = run(preset="tiny", seeds=2, out=tmp_path / "run", progress=False, workers=2)
    result = json.loads((out / "result.json").read_text())
    for key in ("accuracy linear", "accuracy shortcut_none", "accuracy linear int8"):
        assert len(result["measurements"][key]["values"]) == 2
    for variant in VARIANTS:
        for seed in (0, 1):
            assert (out / variant / f"seed-{seed}" / "job.json").is_file()
