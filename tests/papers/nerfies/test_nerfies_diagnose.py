"""The true-template diagnostic: its renderer reproduces the capture with the true warp, and the warp alone learns."""

import pytest
import torch

from paperzoo.data import generate_nonrigid, load_nerfies, load_nonrigid_truth, nerfies_rays, true_warp
from paperzoo.papers.nerfies.diagnose import fit_warp_to_truth, truth_render
from paperzoo.papers.nerfies.warp import WarpConfig


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return generate_nonrigid(tmp_path_factory.mktemp("nonrigid") / "tiny", "tiny", seed=0, progress=False)


def test_truth_render_with_the_true_warp_reproduces_the_images(tiny):
    truth, cap = load_nonrigid_truth(tiny), load_nerfies(tiny, 1, points=False)
    o, d, rgb, image_ids = nerfies_rays(cap, "train")
    wid = cap.warp_ids[image_ids]

    def true(x, ids):
        return true_warp(truth, ids[:, None].expand(x.shape[:-1]), x, jacobian=False)[0]

    moving = wid > 0
    with torch.no_grad():
        exact = truth_render(truth, true, o, d, wid, samples=96)
        still = truth_render(truth, lambda x, ids: x, o, d, wid, samples=96)
    assert float((exact - rgb).abs().max()) < 0.01  # 8-bit images, one ball for all frames
    assert float(((still - rgb)[moving] ** 2).mean()) > 20 * float(((exact - rgb)[moving] ** 2).mean())


@pytest.mark.usefixtures("one_thread")
def test_the_warp_alone_learns_against_the_true_template(tiny):
    hist = fit_warp_to_truth(tiny, WarpConfig.preset("tiny"), steps=120, rays=256, lr=3e-3, code_lr=3e-2, every=60,
                             samples=48, log=lambda _: None)  # seeded: the same numbers on every run
    assert [h["step"] for h in hist] == [0, 60, 120]
    assert hist[0]["warp_error"] == pytest.approx(hist[0]["true_motion"], rel=0.05)  # near the identity at init
    assert hist[-1]["warp_error"] < 0.8 * hist[0]["warp_error"]  # the field moves towards the true warp
