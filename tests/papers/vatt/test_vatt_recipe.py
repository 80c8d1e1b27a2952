"""The VATT recipe: variants, equal budgets, and a tiny run that learns."""

import json

import pytest

from paperzoo.papers.vatt.recipe import PRESETS, VARIANTS, model_config, run


def test_variants_change_one_thing():
    p = PRESETS["small"]
    assert [model_config(p, f"keep-{k}").keep_rate for k in (1.0, 0.75, 0.5, 0.25)] == [1.0, 0.75, 0.5, 0.25]
    shared = model_config(p, "shared")
    assert shared.backbone == "shared" and shared.keep_rate == 1.0 and shared.shared == p.model.video
    assert model_config(p, "random-init") == model_config(p, "keep-1.0") == model_config(p, "supervised")
    assert set(p.variants) == set(VARIANTS) and p.seeds >= 3 and p.train.precision == "auto"
    with pytest.raises(ValueError, match="unknown VATT variant"):
        model_config(p, "keep-x")


@pytest.mark.usefixtures("one_thread")
@pytest.mark.data("mnist", "fsdd")
def test_tiny_run_learns_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    run_dir = run("tiny", out=tmp_path / "vatt", progress=False)
    doc = json.loads((run_dir / "result.json").read_text())
    assert "smoke test" in doc["verdict_reason"]
    for seed in (0, 1):
        rows = [json.loads(line) for line in (run_dir / "keep-1.0" / f"seed-{seed}" / "metrics.jsonl").open()]
        losses = [r["loss"] for r in rows if r.get("event") == "train"]
        assert losses[-1] < losses[0] - 0.5, losses  # NCE + MIL-NCE fall by a stated margin in 60 steps
        job = json.loads((run_dir / "keep-1.0" / f"seed-{seed}" / "job.json").read_text())
        low = json.loads((run_dir / "keep-0.25" / f"seed-{seed}" / "job.json").read_text())
        assert low["flops_per_step"] < 0.6 * job["flops_per_step"]  # DropToken cuts the counted cost
        assert low["activation_mib"] < job["activation_mib"]
    m = doc["measurements"]
    assert "keep-0.25 / keep-1.0 training FLOPs" in m and "keep-1.0 v2t R@10" in m
    for picture in ("probe_video.png", "probe_audio.png", "droptoken.png"):
        assert (run_dir / picture).stat().st_size > 0
    assert "AV-MNIST-style" in doc["notes"] and "bf16" not in doc["notes"].split("Precision:")[0]
