"""The NeRF recipe: its ablations at equal budget, the centre crop, and a tiny run that learns the lego views."""

import json

import pytest
import torch

from paperzoo.data import holdout
from paperzoo.papers.nerf.recipe import PRESETS, centre_crop_index, load_views, run, variant_configs


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


def test_centre_crop_index_picks_the_middle_of_every_view():
    idx = centre_crop_index(2, 4, 6, 0.5)
    mask = torch.zeros(2 * 4 * 6, dtype=torch.bool)
    mask[idx] = True
    view = mask.view(2, 4, 6)
    assert view[:, 1:3, 2:4].all() and view.sum() == 2 * 2 * 2


@pytest.mark.usefixtures("one_thread")
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
