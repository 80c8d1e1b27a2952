"""The NeRF recipe: its ablations at equal budget, the centre crop, and a tiny run that learns the lego views."""

import json

import pytest
import torch

from paperzoo.data import holdout
from paperzoo.papers.nerf.recipe import PRESETS, centre_crop_index, load_views, run, variant_configs, variants_at


def test_ablations_change_one_thing_at_an_equal_budget():
    p = PRESETS["small"]
    full_m, full_r = variant_configs(p, "nerf")
    assert not variant_configs(p, "no-pe")[0].positional_encoding
    assert not variant_configs(p, "no-viewdirs")[0].use_viewdirs
    _, flat = variant_configs(p, "no-hierarchical")
    # evaluations per ray: coarse Nc + fine (Nc + Nf) for the full model; the same count of coarse samples without
    assert flat.num_fine == 0 and flat.num_coarse == full_r.num_coarse + (full_r.num_coarse + full_r.num_fine)
    with pytest.raises(ValueError, match="unknown NeRF variant"):
        variant_configs(p, "nope")


def test_ablations_at_the_first_resolution_full_model_at_the_others():
    runs = variants_at(PRESETS["small"])
    assert [r for r in runs if r[1] == 100] == [(v, 100) for v in ("nerf", "no-pe", "no-viewdirs", "no-hierarchical")]
    assert [r for r in runs if r[1] == 200] == [("nerf", 200)]


def test_centre_crop_index_picks_the_middle_of_every_view():
    idx = centre_crop_index(2, 4, 6, 0.5)
    mask = torch.zeros(2 * 4 * 6, dtype=torch.bool)
    mask[idx] = True
    view = mask.view(2, 4, 6)
    assert view[:, 1:3, 2:4].all() and view.sum() == 2 * 2 * 2


@pytest.mark.usefixtures("one_thread")
@pytest.mark.data("nerf-synthetic-lego-200")
def test_tiny_run_learns_the_views(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERZOO_RUNS", str(tmp_path / "runs"))
    run_dir = run("tiny", out=tmp_path / "nerf", progress=False)
    doc = json.loads((run_dir / "result.json").read_text())
    images, _, _ = load_views(PRESETS["tiny"].scene, PRESETS["tiny"].resolutions[0])
    held = images[holdout(len(images))[1]][:PRESETS["tiny"].eval_views]
    best_constant = float(-10 * torch.log10(((held - held.mean()) ** 2).mean()))  # the best single colour
    for psnr in doc["measurements"]["nerf@24 PSNR"]["values"]:
        assert psnr > best_constant + 2.0, (psnr, best_constant)
    assert "smoke test" in doc["verdict_reason"]
    assert (run_dir / "nerf@24" / "seed-0" / "job.json").is_file() and (run_dir / "psnr_vs_steps.png").is_file()
    for picture in ("held_out_views.png", "orbit.gif", "orbit.mp4", "orbit-depth.gif"):
        assert (run_dir / picture).stat().st_size > 0, picture
    assert "orbit.gif" in doc["plots"] and "Held-out views" in doc["notes"] and "fp32" in doc["notes"]


def test_render_an_orbit_from_a_checkpoint(tmp_path, one_thread):
    from typer.testing import CliRunner

    from paperzoo.cli import app
    from paperzoo.papers.nerf import NeRF, NeRFConfig, RenderConfig
    from paperzoo.papers.nerf.recipe import describe
    from paperzoo.train import TrainConfig, Trainer

    job = tmp_path / "nerf@24" / "seed-0"
    m, r = NeRFConfig.preset("tiny"), RenderConfig(num_coarse=8, num_fine=8)
    describe(job, m, r, 24, 33.3)
    model = NeRF(m, r)
    o, d = torch.zeros(8, 3), torch.nn.functional.normalize(torch.randn(8, 3), dim=-1)
    data = torch.utils.data.TensorDataset(o, d, torch.rand(8, 3))
    from paperzoo.papers.nerf import nerf_loss

    Trainer(model, TrainConfig(steps=1, batch_size=8, eval_every=0, ckpt_every=1, device="cpu"), data,
            lambda mm, b: nerf_loss(mm(b[0], b[1]), b[2]), out_dir=job, progress=False).fit()
    res = CliRunner().invoke(app, ["render", "nerf", "--checkpoint", str(job), "--out", str(tmp_path / "o.gif"),
                                   "--frames", "3", "--side", "12"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o.gif").stat().st_size > 0 and (tmp_path / "o-depth.gif").stat().st_size > 0
    bad = CliRunner().invoke(app, ["render", "nerf", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "x.gif")])
    assert bad.exit_code == 2 and "ckpt-<step>.pt" in bad.output
    other = CliRunner().invoke(app, ["render", "swin", "--checkpoint", str(job)])
    assert other.exit_code == 2 and "papers that render: nerf" in other.output
