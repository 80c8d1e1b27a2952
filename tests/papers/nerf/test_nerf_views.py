"""Orbit poses, image metrics, videos and panels."""

import math

import numpy as np
import pytest
import torch

from paperzoo.papers.nerf import get_rays
from paperzoo.papers.nerf.views import image_metrics, orbit_poses, save_panel, write_video


def test_orbit_poses_circle_the_origin_and_look_at_it():
    poses = orbit_poses(8, elevation=-30.0, radius=4.0)
    assert poses.shape == (8, 4, 4)
    centres = poses[:, :3, 3]
    assert torch.allclose(centres.norm(dim=-1), torch.full((8,), 4.0), atol=1e-5)
    assert torch.allclose(centres[:, 2], torch.full((8,), 4.0 * math.sin(math.radians(30))), atol=1e-5)  # above
    _, d = get_rays(4, 4, 2.0, poses)  # pixel (2, 2) sits on the optical axis: its ray points at the origin
    ahead = torch.nn.functional.normalize(d[:, 2, 2], dim=-1)
    assert torch.allclose(ahead, -centres / 4.0, atol=1e-5)
    rot = poses[:, :3, :3]
    assert torch.allclose(rot @ rot.transpose(1, 2), torch.eye(3).expand(8, 3, 3), atol=1e-5)


def test_image_metrics_by_hand_and_ms_ssim_only_for_large_images():
    gt = torch.rand(2, 32, 32, 3, generator=torch.Generator().manual_seed(0))
    same = image_metrics(gt, gt)
    assert same["ssim"] == pytest.approx(1.0) and "ms_ssim" not in same
    noisy = (gt + 0.1).clamp(0, 1)
    mse = ((noisy - gt) ** 2).flatten(1).mean(1)
    assert image_metrics(noisy, gt)["psnr"] == pytest.approx(float((-10 * torch.log10(mse)).mean()), rel=1e-6)
    big = torch.rand(1, 176, 176, 3)
    assert image_metrics(big, big)["ms_ssim"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one shape"):
        image_metrics(gt, gt[:1])


def test_video_and_panel_files(tmp_path):
    frames = torch.rand(3, 10, 14, 3)
    gif = write_video(frames, tmp_path / "orbit.gif")
    mp4 = write_video(frames, tmp_path / "orbit.mp4")
    assert gif.stat().st_size > 0 and mp4.stat().st_size > 0
    import imageio.v2 as imageio

    assert imageio.mimread(gif)[0].shape[:2] == (10, 14)
    with pytest.raises(ValueError, match=".gif or .mp4"):
        write_video(frames, tmp_path / "x.avi")
    from PIL import Image

    panel = save_panel([(frames[0], frames[1]), (frames[1], frames[2])], tmp_path / "panel.png")
    assert Image.open(panel).size == (42, 20)
    depth = [torch.linspace(0, 1, 14).expand(10, 14)] * 2
    with_depth = save_panel([(frames[0], frames[1]), (frames[1], frames[2])], tmp_path / "d.png", depth=depth)
    px = torch.tensor(np.asarray(Image.open(with_depth)))
    assert px.shape == (20, 56, 3) and px[0, 42, 0] == 0 and px[0, 55, 0] == 255  # the 4th column is the depth
    with pytest.raises(ValueError, match="one depth map per row"):
        save_panel([(frames[0], frames[1])], tmp_path / "e.png", depth=depth)


def test_image_metrics_are_fp32_under_bf16_autocast():
    """The Trainer evaluates under the run's autocast: SSIM's convolutions must not drop to bf16 (they overflow)."""
    gt = torch.rand(2, 32, 32, 3, generator=torch.Generator().manual_seed(1))
    pred = (gt + 0.05).clamp(0, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        amp = image_metrics(pred, gt)
    assert amp == image_metrics(pred, gt)
