"""The foundation recipe: the model validates input, training on real Fashion-MNIST learns, the report is written."""

import json

import pytest
import torch

from paperzoo.papers.fashion_cnn import recipe
from paperzoo.papers.fashion_cnn.model import SmallCNN, SmallCNNConfig
from paperzoo.train import TrainConfig


def test_model_rejects_wrong_shape_and_dtype():
    model = SmallCNN(SmallCNNConfig.preset("small"))
    with pytest.raises(ValueError, match=r"\(batch, 1, 28, 28\)"):
        model(torch.zeros(2, 3, 28, 28))
    with pytest.raises(ValueError, match="float"):
        model(torch.zeros(2, 1, 28, 28, dtype=torch.uint8))


@pytest.mark.data("fashion-mnist")
def test_tiny_run_learns_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    train = TrainConfig(steps=16, batch_size=64, lr=3e-3, warmup_steps=2, eval_every=0, ckpt_every=8, log_every=4)
    tiny = recipe.FashionPreset(model=SmallCNNConfig.preset("tiny"), seeds=1, subset=1024, test_subset=1000,
                                train=train)
    monkeypatch.setitem(recipe.PRESETS, "tiny", tiny)
    run_dir = recipe.run(preset="tiny", out=tmp_path / "run")
    lines = (run_dir / "cnn" / "seed-0" / "metrics.jsonl").read_text().splitlines()
    losses = [json.loads(line)["loss"] for line in lines if json.loads(line)["event"] == "train"]
    assert losses[-1] < 0.6 * losses[0], f"loss did not fall by 40%: {losses}"
    result = json.loads((run_dir / "result.json").read_text())
    assert result["measurements"]["test_accuracy"]["mean"] > 0.6  # 10 classes: chance is 0.1
    assert result["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert "smoke test" in result["verdict_reason"] and "88%" in result["verdict_reason"]
    assert (run_dir / "report.md").read_text().startswith("# fashion-cnn")
    assert (run_dir / "loss.png").is_file()


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="valid: tiny, small"):
        recipe.run(preset="huge", out=tmp_path)


def test_presets_the_committed_small_run():
    """``small`` is the committed run (docs/reports/fashion-cnn/config.json); tiny and small models are one size."""
    small = recipe.PRESETS["small"]
    assert small.model == SmallCNNConfig() == recipe.PRESETS["tiny"].model
    assert (small.seeds, small.subset, small.train.steps, small.train.batch_size, small.train.lr) == (3, None, 940,
                                                                                                     128, 2e-3)
    with pytest.raises(ValueError, match="preset must be one of"):
        SmallCNNConfig.preset("huge")
    with pytest.raises(ValueError, match="channels"):
        SmallCNNConfig(channels=(32,))
