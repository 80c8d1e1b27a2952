"""The synthetic non-rigid generator: determinism, the true warp and its Jacobian, rendering against geometry."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from paperzoo.data.nerfies import load_nerfies
from paperzoo.data.nonrigid import (
    NonrigidPreset,
    _composite,
    canonical_fields,
    generate_nonrigid,
    load_nonrigid_truth,
    render_nonrigid,
    true_warp,
)
from paperzoo.papers.nerf.render import composite as nerf_composite

MICRO = NonrigidPreset(frames=2, size=16, samples=16, points=8)
F64 = torch.float64


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return generate_nonrigid(tmp_path_factory.mktemp("nonrigid") / "tiny", "tiny", seed=0, progress=False)


@pytest.fixture(scope="module")
def truth(tiny):
    return load_nonrigid_truth(tiny)


def _g(params, y):
    """First-order signed distance to each canonical ellipsoid (..., S), written out from the definition."""
    q = torch.einsum("sji,...sj->...si", params.shape_axes, y[..., None, :] - params.shape_center) / params.shape_radii
    k0, k1 = q.norm(dim=-1), (q / params.shape_radii).norm(dim=-1)
    return k0 * (k0 - 1.0) / k1


# ------------------------------------------------------------------------------------------------ determinism
def test_generation_is_deterministic_from_the_seed(tmp_path):
    a = generate_nonrigid(tmp_path / "a", MICRO, seed=3, progress=False)
    b = generate_nonrigid(tmp_path / "b", MICRO, seed=3, progress=False)
    c = generate_nonrigid(tmp_path / "c", MICRO, seed=4, progress=False)
    files = {p: json.loads((p / "manifest.json").read_text())["files"] for p in (a, b, c)}
    assert files[a] == files[b] and len(files[a]) == 2 * 2 * 2 + 2 * 2 + 4 + 4  # images, cameras, json + points, truth
    assert all((a / rel).read_bytes() == (b / rel).read_bytes() for rel in files[a])
    pngs = [rel for rel in files[a] if rel.endswith(".png")]
    assert all(files[a][rel] != files[c][rel] for rel in pngs)  # another seed: another scene, every image differs
    # the manifest is checked: a capture changed after generation is refused
    before = (a / "rgb/1x/train_000000.png").stat().st_mtime_ns
    assert generate_nonrigid(a, MICRO, seed=3, progress=False) == a  # already there: returned as is
    assert (a / "rgb/1x/train_000000.png").stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="holds the capture of preset 'custom' seed 3, not 'custom' seed 5"):
        generate_nonrigid(a, MICRO, seed=5, progress=False)
    np.save(a / "truth" / "depth.npy", np.zeros((4, 16, 16), dtype=np.float32))
    with pytest.raises(ValueError, match=r"depth\.npy does not match its sha256 in manifest\.json"):
        load_nonrigid_truth(a)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "other.txt").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a complete capture"):
        generate_nonrigid(tmp_path / "d", MICRO, seed=3, progress=False)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        generate_nonrigid(tmp_path / "e", "huge")
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary folder left behind


def test_images_are_colourful_and_move(tiny, truth):
    cap = load_nerfies(tiny)
    assert (cap.images.std(dim=(1, 2)) > 0.08).all()  # textured foreground and background
    frames = truth.params.frames
    mse = (cap.images[0] - cap.images[frames - 1]).pow(2).mean()
    assert -10 * torch.log10(mse) < 25  # the scene (and camera) visibly change across the capture
    assert (truth.object_alpha > 0.99).float().mean() > 0.1 and (truth.object_alpha < 0.01).float().mean() > 0.3
    assert torch.allclose(truth.alpha, torch.ones_like(truth.alpha), atol=1e-4)  # every ray ends on the plane


# ------------------------------------------------------------------------------------------------ the warp
def test_true_warp_jacobian_matches_autograd_and_finite_differences(truth):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=g, dtype=F64)
    x = x / x.norm(dim=-1, keepdim=True) * torch.rand(64, 1, generator=g, dtype=F64) * 1.6  # object, blend, outside
    for frame in range(1, truth.params.frames):
        xc, jac = true_warp(truth, frame, x)
        xg = x.clone().requires_grad_(True)
        out = true_warp(truth, frame, xg, False)[0]  # points are independent: row i of every J from one backward
        auto = torch.stack([torch.autograd.grad(out[:, i].sum(), xg, retain_graph=True)[0] for i in range(3)], 1)
        assert (jac - auto).abs().max() < 1e-12
        h, eye = 1e-6, torch.eye(3, dtype=F64)
        fd = torch.stack([(true_warp(truth, frame, x + h * eye[j], False)[0]
                           - true_warp(truth, frame, x - h * eye[j], False)[0]) / (2 * h) for j in range(3)], dim=-1)
        assert (jac - fd).abs().max() < 1e-7
        assert (jac - eye).abs().max() > 1e-2  # a real deformation: the test can fail
    # one frame per point gives the same as one frame for all
    frames = torch.arange(64) % truth.params.frames
    xc, jac = true_warp(truth, frames, x)
    for f in range(truth.params.frames):
        one, jone = true_warp(truth, f, x[frames == f])
        assert torch.allclose(xc[frames == f], one, atol=1e-15) and torch.allclose(jac[frames == f], jone, atol=1e-15)


def test_rest_frame_is_the_identity_and_the_warp_is_invertible(truth):
    x = torch.rand(2000, 3, generator=torch.Generator().manual_seed(1), dtype=F64) * 3.2 - 1.6
    xc, jac = true_warp(truth, 0, x)
    assert torch.equal(xc, x) and torch.equal(jac, torch.eye(3, dtype=F64).expand_as(jac))
    for frame in range(1, truth.params.frames):
        xc, jac = true_warp(truth, frame, x)
        inside = x.norm(dim=-1) < 0.6
        assert (xc - x)[inside].norm(dim=-1).max() > 0.02  # the object moves
        far = x.norm(dim=-1) >= truth.params.mask_outer
        assert torch.equal(xc[far], x[far])  # the background does not
        assert torch.linalg.det(jac).min() > 0.3  # orientation-preserving everywhere: locally invertible


def test_object_stays_in_its_ball(truth):
    p = truth.params
    g = torch.Generator().manual_seed(2)
    for frame in range(p.frames):
        radius = float(p.object_radius[frame])
        d = torch.randn(50000, 3, generator=g, dtype=F64)
        d = d / d.norm(dim=-1, keepdim=True)
        shell = d * (radius + torch.rand(50000, 1, generator=g, dtype=F64) * 0.6)  # from the ball out to 0.6 beyond
        _, _, sig_obj = canonical_fields(p, true_warp(p, frame, shell, False)[0])
        assert sig_obj.max() < 1e-6 * p.density_max
        ball = d * radius * torch.rand(50000, 1, generator=g, dtype=F64) ** (1 / 3)
        _, _, sig_in = canonical_fields(p, true_warp(p, frame, ball, False)[0])
        assert sig_in.max() > 0.5 * p.density_max  # the ball is not empty


# ------------------------------------------------------------------------------------------------ rendering
def test_composite_is_nerfs():
    g = torch.Generator().manual_seed(0)
    rgb, sigma = torch.rand(5, 40, 3, generator=g, dtype=F64), torch.rand(5, 40, generator=g, dtype=F64) * 30
    z, _ = torch.sort(torch.rand(5, 40, generator=g, dtype=F64) * 4 + 1, dim=-1)
    d = torch.randn(5, 3, generator=g, dtype=F64)
    ours, ref = _composite(rgb, sigma, z, d), nerf_composite(rgb, sigma, z, d, white_background=True)
    for a, b in zip(ours, (ref.rgb, ref.depth, ref.acc, ref.weights), strict=True):
        assert torch.equal(a, b)


def test_rest_frame_depth_and_alpha_against_ray_ellipsoid_geometry(tiny, truth):
    cap, p = load_nerfies(tiny, dtype=F64), truth.params
    o = cap.cameras.position[0]
    targets = torch.cat([p.shape_center, truth.points[:1]])  # each shape's centre and a background point
    d = (targets - o) / (targets - o).norm(dim=-1, keepdim=True)
    out = render_nonrigid(truth, 0, o.expand_as(d), d, samples=512, plane_samples=128)
    # first hit of each ray with the union of the ellipsoids |A_k (o + t d - c_k)| = 1
    a_o = torch.einsum("sji,sj->si", p.shape_axes, o - p.shape_center)[None] / p.shape_radii  # (1, S, 3)
    a_d = torch.einsum("sji,rj->rsi", p.shape_axes, d) / p.shape_radii  # (R, S, 3)
    qa, qb, qc = (a_d * a_d).sum(-1), 2 * (a_o * a_d).sum(-1), (a_o * a_o).sum(-1) - 1
    disc = qb * qb - 4 * qa * qc
    t_hit = torch.where(disc > 0, (-qb - disc.clamp(min=0).sqrt()) / (2 * qa), torch.full_like(qa, float("inf")))
    surface = t_hit.min(dim=-1).values
    for k in range(p.shape_center.shape[0]):  # rays at a shape's centre stop at the first surface
        assert 0.0 <= float(out["depth"][k] - surface[k]) < 0.02
        assert out["object_alpha"][k] > 0.999 and out["alpha"][k] > 0.999
    bg = len(targets) - 1  # the background point lies on the plane: depth is its distance
    assert abs(float(out["depth"][bg] - (targets[bg] - o).norm())) < 0.02
    assert out["object_alpha"][bg] < 1e-3 and out["alpha"][bg] > 0.999
    assert torch.isinf(surface[bg])  # and the ray misses every ellipsoid
    # the stored depth of that view is the same renderer at the preset's samples: the nearest pixel agrees loosely
    uv, _ = cap.cameras[0].project(targets[None, :1])
    col, row = (int(v) for v in uv.reshape(2))
    assert abs(float(truth.depth[0, row, col]) - float(out["depth"][0])) < 0.1


def test_deformed_frames_stop_on_the_warped_surface(tiny, truth):
    cap, p = load_nerfies(tiny, dtype=F64), truth.params
    frame = p.frames - 1
    k = int(cap.val_idx[frame])  # a validation view of the last instant
    o, d = (r.reshape(-1, 3) for r in cap.cameras[k].rays())
    out = render_nonrigid(truth, frame, o, d, samples=512)
    hit = out["object_alpha"] > 0.999
    assert hit.sum() > 50
    surface = o[hit] + out["depth"][hit, None] * d[hit]  # where the rays end, observed space
    canon = true_warp(p, frame, surface, False)[0]
    assert _g(p, canon).min(dim=-1).values.abs().max() < 0.03  # lies on a canonical ellipsoid once unwarped
    assert _g(p, surface).min(dim=-1).values.abs().max() > 0.02  # but not without the warp: the test can fail
    stored = truth.depth[k].reshape(-1).double()
    assert (stored[hit] - out["depth"][hit]).abs().median() < 0.01  # the files agree with the renderer


# ------------------------------------------------------------------------------------------------ larger motion
def test_motion_factors_scale_the_same_paths_and_keep_the_base_captures_bytes(tmp_path):
    from paperzoo.data.nonrigid import PRESETS, _cfg_json, _draw_params

    base, big = _draw_params(0, 6), _draw_params(0, 6, motion=4.0, rbf_motion=2.0)
    assert base["scene"] == big["scene"]  # the scene does not depend on the motion
    for f0, f1 in zip(base["warp"]["frames"], big["warp"]["frames"], strict=True):
        np.testing.assert_allclose(f1["rotvec"], 4.0 * np.asarray(f0["rotvec"]), atol=5e-10)
        np.testing.assert_allclose(f1["translation"], 4.0 * np.asarray(f0["translation"]), atol=5e-10)
        np.testing.assert_allclose(f1["rbf_amplitude"], 2.0 * np.asarray(f0["rbf_amplitude"]), atol=5e-10)
    radius = [max(f["object_radius"] for f in d["warp"]["frames"]) for d in (base, big)]
    assert radius[1] > radius[0]
    # the factors enter the config only when they are not 1: the captures of the base presets keep their manifests
    assert "motion" not in _cfg_json(MICRO) and "rbf_motion" not in _cfg_json(MICRO)
    p = PRESETS["small-motion4"]
    assert (p.motion, p.rbf_motion, p.frames, p.size) == (4.0, 2.0, 40, 128)
    assert _cfg_json(p)["motion"] == 4.0 and _cfg_json(p)["rbf_motion"] == 2.0
    moving = NonrigidPreset(frames=2, size=16, samples=16, points=8, motion=4.0, rbf_motion=2.0)
    a = generate_nonrigid(tmp_path / "a", moving, seed=3, progress=False)
    b = generate_nonrigid(tmp_path / "b", moving, seed=3, progress=False)
    c = generate_nonrigid(tmp_path / "c", MICRO, seed=3, progress=False)
    files = {p: json.loads((p / "manifest.json").read_text())["files"] for p in (a, b, c)}
    assert files[a] == files[b]  # deterministic from the seed
    assert files[a]["rgb/1x/train_000000.png"] == files[c]["rgb/1x/train_000000.png"]  # frame 0: the rest pose
    assert files[a]["rgb/1x/train_000001.png"] != files[c]["rgb/1x/train_000001.png"]  # frame 1 moved further
    truth = load_nonrigid_truth(a)
    assert truth.meta["config"]["motion"] == 4.0
    with pytest.raises(ValueError, match=r"NonrigidPreset\.motion: expected a number in \(0, 8\]"):
        NonrigidPreset(frames=2, size=16, samples=16, points=8, motion=0.0)
    with pytest.raises(ValueError, match=r"NonrigidPreset\.rbf_motion"):
        NonrigidPreset(frames=2, size=16, samples=16, points=8, rbf_motion=True)
