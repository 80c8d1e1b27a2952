"""The reproduction end to end at a smoke size (the models learn, every measurement and picture is written, resume
reads the cached jobs back), and ``paperzoo explain latent-shift`` on its models."""

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from paperzoo.cli import app
from paperzoo.papers.latent_shift import recipe


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("latent-shift")
    mp.setenv("PAPERZOO_RUNS", str(tmp / "runs"))
    t = recipe.PRESETS["tiny"]
    small = dataclasses.replace(t, seeds=1, train_size=1024, positives=3, frames=3, ig_steps=4, deletion_steps=2,
                                explain_batch=4,  # smaller than the 6 positives: the batching is exercised
                                train=dataclasses.replace(t.train, steps=30, ckpt_every=15),
                                ae_train=dataclasses.replace(t.ae_train, steps=30, ckpt_every=15))
    mp.setitem(recipe.PRESETS, "tiny", small)
    run_dir = recipe.run(preset="tiny", out=tmp / "run", progress=False)
    yield run_dir
    mp.undo()


@pytest.mark.data("fashion-mnist")
def test_tiny_run_learns_and_reports(tiny_run):
    models = json.loads((tiny_run / "models" / "seed-0" / "job.json").read_text())
    assert models["ae_loss_last"] < 0.5 * models["ae_loss_first"], models  # the autoencoder learns
    assert models["clf_loss_last"] < models["clf_loss_first"], models
    result = json.loads((tiny_run / "result.json").read_text())
    for m in recipe.METHODS:
        for metric in ("iou", "pointing", "deletion", "insertion"):
            assert f"{m} {metric}" in result["measurements"]
    assert "sanity latent_shift/random_direction_iou" in result["measurements"]
    assert "smoke test" in result["verdict_reason"]
    for f in ("iou.png", "maps.png", "counterfactuals.gif", "counterfactuals.mp4", "report.md"):
        assert (tiny_run / f).is_file(), f
    job = json.loads((tiny_run / "explain" / "seed-0" / "job.json").read_text())
    assert job["n_positives"] == 6 and 0 <= job["quality"]["reached_drop"] <= 1
    again = recipe.run(preset="tiny", out=tiny_run, resume=True, progress=False)  # cached jobs: the same figures
    assert json.loads((again / "result.json").read_text())["measurements"] == result["measurements"]


@pytest.mark.data("fashion-mnist")
def test_explain_cli_writes_the_animation_and_panel(tiny_run, tmp_path):
    gif, png = tmp_path / "anim.gif", tmp_path / "panel.png"
    res = CliRunner().invoke(app, ["explain", "latent-shift", "--checkpoint", str(tiny_run / "models" / "seed-0"),
                                   "--image", "lesions:3", "--target", "0", "--out", str(gif), "--panel", str(png)])
    assert res.exit_code == 0, res.output
    assert gif.stat().st_size > 0 and png.stat().st_size > 0 and "stopped by" in res.output
    bad = CliRunner().invoke(app, ["explain", "latent-shift", "--checkpoint", str(tmp_path), "--image",
                                   "lesions:3", "--target", "0", "--out", str(gif)])
    assert bad.exit_code == 2 and "latent_shift.json is missing" in bad.output
    wrong = CliRunner().invoke(app, ["explain", "latent-shift", "--checkpoint", str(tiny_run / "models" / "seed-0"),
                                     "--image", "lesions:3", "--target", "5", "--out", str(gif)])
    assert wrong.exit_code == 2 and "target 5 is not an output" in wrong.output


def test_read_image_from_a_file(tmp_path):
    from PIL import Image

    Image.new("L", (56, 56), 255).save(tmp_path / "white.png")
    x, mask = recipe.read_image(str(tmp_path / "white.png"))
    assert x.shape == (1, 1, 28, 28) and mask is None and x.eq(1).all()  # made grey, resized, in [0, 1]
    with pytest.raises(ValueError, match="no such file"):
        recipe.read_image(str(tmp_path / "missing.png"))
    with pytest.raises(ValueError, match="lesions:N needs N"):
        recipe.read_image("lesions:x")
