"""The Nerfies capture reader: round trip of a generated capture, the camera model, normalisation, clear errors."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from paperzoo import data
from paperzoo.data.nerfies import Cameras, camera_from_json, distort, load_nerfies, nerfies_rays, undistort
from paperzoo.data.nonrigid import generate_nonrigid, load_nonrigid_truth, render_nonrigid, true_warp


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return generate_nonrigid(tmp_path_factory.mktemp("nerfies") / "tiny", "tiny", seed=0, progress=False)


def _rot(axis, angle) -> np.ndarray:
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def _camera(position=(1.0, 2.0, 3.0), size=(8, 6), **kw) -> dict:
    cam = {"orientation": _rot((1, 2, 3), 0.7).tolist(), "position": list(position), "focal_length": 10.0,
           "principal_point": [size[0] / 2, size[1] / 2], "skew": 0.0, "pixel_aspect_ratio": 1.0,
           "radial_distortion": [0.0, 0.0, 0.0], "tangential": [0.0, 0.0], "image_size": list(size)}
    cam.update(kw)
    return cam


def _write_capture(root, ids=("a", "b"), size=(8, 6), center=(0.0, 0.0, 0.0), scale=1.0, positions=None):
    """A minimal hand-written capture: every id in train_ids but the last (val)."""
    (root / "camera").mkdir(parents=True)
    (root / "rgb" / "1x").mkdir(parents=True)
    ids = list(ids)
    (root / "dataset.json").write_text(json.dumps({"count": len(ids), "num_exemplars": len(ids) - 1, "ids": ids,
                                                   "train_ids": ids[:-1], "val_ids": ids[-1:]}))
    (root / "metadata.json").write_text(json.dumps({i: {"warp_id": k, "appearance_id": k, "camera_id": 0}
                                                    for k, i in enumerate(ids)}))
    (root / "scene.json").write_text(json.dumps({"scale": scale, "center": list(center), "near": 0.5, "far": 3.0}))
    rng = np.random.default_rng(0)
    for k, i in enumerate(ids):
        pos = positions[k] if positions is not None else (1.0 + k, 2.0, 3.0)
        (root / "camera" / f"{i}.json").write_text(json.dumps(_camera(pos, size)))
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(root / "rgb" / "1x" /
                                                                                          f"{i}.png")
    np.save(root / "points.npy", rng.normal(size=(5, 3)))
    return root


# ------------------------------------------------------------------------------------------------ round trip
def test_round_trip_of_a_generated_capture(tiny):
    cap, truth = load_nerfies(tiny, dtype=torch.float64), load_nonrigid_truth(tiny)
    frames = truth.params.frames
    assert cap.ids == truth.ids and len(cap) == 2 * frames and cap.images.shape == (2 * frames, 32, 32, 3)
    assert [cap.ids[i] for i in cap.train_idx] == [f"train_{f:06d}" for f in range(frames)]
    assert [cap.ids[i] for i in cap.val_idx] == [f"val_{f:06d}" for f in range(frames)]
    assert cap.warp_ids.tolist() == cap.appearance_ids.tolist() == list(range(frames)) * 2
    assert cap.camera_ids.tolist() == [0] * frames + [1] * frames
    assert torch.allclose(cap.times.double(), truth.params.times.repeat(2), atol=1e-6)
    # the PNGs are the renderer's images through the reader's cameras (to the 8-bit rounding)
    for k in (1, frames + 2):
        o, d = cap.cameras[k].rays()
        out = render_nonrigid(truth, int(cap.warp_ids[k]), o.reshape(-1, 3), d.reshape(-1, 3),
                              truth.meta["render"]["samples"])
        assert (out["rgb"].reshape(32, 32, 3) - cap.images[k].double()).abs().max() <= 0.5 / 255 + 1e-6
        assert torch.allclose(out["depth"].float().reshape(32, 32), truth.depth[k], atol=1e-5)
    # cameras: the validation rig has its own intrinsics, the two rigs see the same instants from different places
    assert cap.cameras.focal_length[0] != cap.cameras.focal_length[frames]
    assert (cap.cameras.position[:frames] - cap.cameras.position[frames:]).norm(dim=-1).min() > 0.2
    # points: normalised, on the background plane, where the true warp is the identity
    assert torch.allclose(cap.points, truth.points) and cap.points.shape == (256, 3)
    assert torch.allclose(cap.points[:, 2], torch.full((256,), truth.params.plane_z, dtype=torch.float64))
    xc, jac = true_warp(truth, frames - 1, cap.points)
    assert torch.equal(xc, cap.points) and torch.equal(jac, torch.eye(3, dtype=torch.float64).expand_as(jac))
    assert (cap.near, cap.far) == (truth.meta["render"]["near"], truth.meta["render"]["far"]) and cap.far > cap.near


def test_image_scale_two_is_the_same_camera_on_a_coarser_grid(tiny):
    full, half = load_nerfies(tiny, 1, dtype=torch.float64), load_nerfies(tiny, 2, dtype=torch.float64)
    assert half.images.shape == (len(full), 16, 16, 3) and half.image_scale == 2
    assert torch.allclose(half.cameras.focal_length * 2, full.cameras.focal_length)
    # pixel (u, v) at 2x sits at (2u, 2v) at 1x: the same rays
    pix = torch.rand(len(full), 7, 2, dtype=torch.float64) * 16
    o2, d2 = half.cameras.pixels_to_rays(pix)
    o1, d1 = full.cameras.pixels_to_rays(2 * pix)
    assert torch.allclose(o1, o2) and torch.allclose(d1, d2, atol=1e-12)
    # and the 2x image is the 2x2 mean of the 1x one (to the 8-bit rounding of both)
    mean = full.images.reshape(len(full), 16, 2, 16, 2, 3).mean(dim=(2, 4))
    assert (mean - half.images.double()).abs().max() <= 1.0 / 255 + 1e-6


def test_nerfies_rays_are_flat_and_in_pixel_order(tiny):
    cap = load_nerfies(tiny)
    o, d, rgb, image_ids = nerfies_rays(cap, "val")
    n = len(cap.val_idx)
    assert o.shape == d.shape == rgb.shape == (n * 32 * 32, 3) and image_ids.shape == (n * 32 * 32,)
    assert torch.allclose(d.norm(dim=-1), torch.ones(len(d)), atol=1e-6)
    k, row, col = 1, 5, 9  # the second val image, pixel (row 5, column 9)
    at = k * 32 * 32 + row * 32 + col
    idx = int(cap.val_idx[k])
    assert int(image_ids[at]) == idx and torch.equal(rgb[at], cap.images[idx, row, col])
    po, pd = cap.cameras[idx].pixels_to_rays(torch.tensor([[[col + 0.5, row + 0.5]]]))
    assert torch.allclose(o[at], po.reshape(3)) and torch.allclose(d[at], pd.reshape(3), atol=1e-6)
    assert len(nerfies_rays(cap, "all")[0]) == len(cap) * 32 * 32
    with pytest.raises(ValueError, match="unknown split 'test'"):
        nerfies_rays(cap, "test")


# ------------------------------------------------------------------------------------------------ camera model
def test_undistort_inverts_distort():
    g = torch.Generator().manual_seed(0)
    x, y = (torch.rand(2, 1000, generator=g, dtype=torch.float64) - 0.5) * 1.0  # up to ~27 degrees off axis
    radial, tangential = torch.tensor([-0.12, 0.05, -0.01], dtype=torch.float64), torch.tensor([0.003, -0.002],
                                                                                               dtype=torch.float64)
    xd, yd = distort(x, y, radial, tangential)
    assert (xd - x).abs().max() > 1e-3  # the distortion is not negligible: the test can fail
    xu, yu = undistort(xd, yd, radial, tangential)
    assert (xu - x).abs().max() < 1e-12 and (yu - y).abs().max() < 1e-12
    xr, yr = distort(*undistort(x, y, radial, tangential), radial, tangential)
    assert (xr - x).abs().max() < 1e-12 and (yr - y).abs().max() < 1e-12
    # Newton's method converges quadratically (so its Jacobian is right): 4 steps reach rounding, 2 do not
    tangential = torch.tensor([0.02, -0.015], dtype=torch.float64)
    xd, yd = distort(x, y, radial, tangential)
    err = [max(float((u - x).abs().max()), float((v - y).abs().max()))
           for u, v in (undistort(xd, yd, radial, tangential, iterations=i) for i in (2, 4))]
    assert err[0] > 1e-9 and err[1] < 1e-14
    # per-camera coefficients broadcast over pixels: a zero camera is the identity
    coeffs = torch.stack([radial, torch.zeros(3, dtype=torch.float64)])[:, None, :]
    tang = torch.stack([tangential, torch.zeros(2, dtype=torch.float64)])[:, None, :]
    xu2, _ = undistort(torch.stack([xd, x]), torch.stack([yd, y]), coeffs, tang)
    assert torch.allclose(xu2[0], x, atol=1e-12) and torch.equal(xu2[1], x)


def test_rays_of_a_known_camera_against_hand_geometry():
    rot = _rot((0.3, -1.0, 0.2), 0.9)
    cam = camera_from_json(_camera((1.0, -2.0, 0.5), (64, 48), orientation=rot.tolist(), focal_length=50.0,
                                   principal_point=[30.0, 20.0]), dtype=torch.float64)
    r = torch.from_numpy(rot)
    pix = torch.tensor([[[30.0, 20.0], [80.0, 20.0], [30.0, 70.0]]], dtype=torch.float64)
    o, d = cam.pixels_to_rays(pix)
    assert torch.allclose(o[0], torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64).expand(3, 3))
    assert torch.allclose(d[0, 0], r[2])  # the principal point looks along the optical axis (row 3 of orientation)
    assert torch.allclose(d[0, 1], (r[0] + r[2]) / math.sqrt(2))  # one focal length right: 45 degrees towards +x
    assert torch.allclose(d[0, 2], (r[1] + r[2]) / math.sqrt(2))  # one focal length down: 45 degrees towards +y
    # skew and pixel aspect: pixel (cx + f x + skew y, cy + f a y) is the direction R^T (x, y, 1)
    cam = camera_from_json(_camera((0.0, 0.0, 0.0), (64, 48), orientation=rot.tolist(), focal_length=50.0,
                                   principal_point=[30.0, 20.0], skew=3.0, pixel_aspect_ratio=1.5),
                           dtype=torch.float64)
    xy = torch.tensor([0.2, -0.1], dtype=torch.float64)
    u, v = 30.0 + 50.0 * xy[0] + 3.0 * xy[1], 20.0 + 50.0 * 1.5 * xy[1]
    _, d = cam.pixels_to_rays(torch.stack([u, v]).reshape(1, 1, 2))
    want = r.T @ torch.tensor([0.2, -0.1, 1.0], dtype=torch.float64)
    assert torch.allclose(d.reshape(3), want / want.norm())
    # with distortion: the ray through a point's projection passes through the point
    cam = camera_from_json(_camera((1.0, -2.0, 0.5), (64, 48), orientation=rot.tolist(), focal_length=50.0,
                                   principal_point=[30.0, 20.0], skew=0.5, radial_distortion=[-0.2, 0.05, 0.0],
                                   tangential=[0.001, -0.002]), dtype=torch.float64)
    xy = torch.rand(1, 20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5  # off axis
    pts = cam.position[0] + 3.0 * (r[2] + xy[..., :1] * r[0] + xy[..., 1:] * r[1])
    uv, depth = cam.project(pts)
    o, d = cam.pixels_to_rays(uv)
    along = ((pts - o) * d).sum(-1, keepdim=True)
    assert (depth > 0).all() and (o + along * d - pts).norm(dim=-1).max() < 1e-9
    undistorted = camera_from_json(_camera((1.0, -2.0, 0.5), (64, 48), orientation=rot.tolist(), focal_length=50.0,
                                           principal_point=[30.0, 20.0], skew=0.5), dtype=torch.float64)
    assert (undistorted.project(pts)[0] - uv).abs().max() > 0.1  # distortion moves the pixels: the test can fail


def test_scene_normalisation(tmp_path):
    center, scale = (10.0, -4.0, 2.0), 0.2
    root = _write_capture(tmp_path / "cap", center=center, scale=scale, positions=[(11.0, -3.0, 7.0), (9.0, -4.0, 2.0)])
    cap = load_nerfies(root, dtype=torch.float64)
    want = (torch.tensor([[11.0, -3.0, 7.0], [9.0, -4.0, 2.0]], dtype=torch.float64) - torch.tensor(center)) * scale
    assert torch.allclose(cap.cameras.position, want)
    raw = np.load(root / "points.npy")
    assert torch.allclose(cap.points, torch.from_numpy((raw - np.array(center)) * scale))
    assert (cap.near, cap.far, cap.scene_scale) == (0.5, 3.0, 0.2)
    # directions do not change with the normalisation (a shift and a uniform scale); origins do
    plain = load_nerfies(_write_capture(tmp_path / "plain", positions=[(11.0, -3.0, 7.0), (9.0, -4.0, 2.0)]),
                         dtype=torch.float64)
    assert torch.allclose(cap.cameras.rays()[1], plain.cameras.rays()[1])
    assert torch.allclose(cap.cameras.position, (plain.cameras.position - torch.tensor(center)) * scale)


def test_camera_json_round_trip_and_both_tangential_keys():
    center, scale = (1.0, -2.0, 0.5), 0.3
    raw = _camera((4.0, 1.0, -2.0), tangential=[0.01, 0.02], skew=0.2, pixel_aspect_ratio=1.1)
    cam = camera_from_json(raw, scene_center=center, scene_scale=scale, dtype=torch.float64)
    back = cam.to_json(0, center, scale)
    assert back.keys() == raw.keys() and np.allclose(back["position"], raw["position"])
    again = camera_from_json(back, scene_center=center, scene_scale=scale, dtype=torch.float64)
    assert all(torch.allclose(getattr(again, f), getattr(cam, f)) for f in cam.__dataclass_fields__)
    b = dict(raw)
    b["tangential_distortion"] = b.pop("tangential")
    assert torch.equal(cam.tangential_distortion, camera_from_json(b, dtype=torch.float64).tangential_distortion)


# ------------------------------------------------------------------------------------------------ errors
def test_missing_camera_file(tmp_path):
    root = _write_capture(tmp_path / "cap")
    (root / "camera" / "b.json").unlink()
    with pytest.raises(ValueError, match=r"camera/b\.json is missing: dataset\.json lists id 'b'; add its camera"):
        load_nerfies(root)


def test_image_of_the_wrong_size(tmp_path):
    root = _write_capture(tmp_path / "cap")
    Image.new("RGB", (8, 5)).save(root / "rgb" / "1x" / "a.png")
    with pytest.raises(ValueError, match=r"a\.png is 8x5 but a\.json gives image_size 8x6.*re-export the image"):
        load_nerfies(root)


def test_mixed_image_sizes(tmp_path):
    root = _write_capture(tmp_path / "cap")
    (root / "camera" / "b.json").write_text(json.dumps(_camera(size=(10, 6))))
    Image.new("RGB", (10, 6)).save(root / "rgb" / "1x" / "b.png")
    with pytest.raises(ValueError, match=r"must share one size: .*b\.png is 10x6, .*a\.png is 8x6"):
        load_nerfies(root)


def test_ids_that_disagree(tmp_path):
    root = _write_capture(tmp_path / "cap", ids=("a", "b", "c"))
    meta = json.loads((root / "metadata.json").read_text())
    del meta["b"]
    (root / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"metadata\.json has no entry for ids \['b'\].*add their warp_id"):
        load_nerfies(root)
    root = _write_capture(tmp_path / "cap2")
    ds = json.loads((root / "dataset.json").read_text())
    ds["val_ids"] = ["zz"]
    (root / "dataset.json").write_text(json.dumps(ds))
    with pytest.raises(ValueError, match=r"dataset\.json: train_ids/val_ids name ids that 'ids' lacks: \['zz'\]"):
        load_nerfies(root)
    ds["ids"], ds["train_ids"] = ["a", "b", "a"], ["a", "b"]
    (root / "dataset.json").write_text(json.dumps(ds))
    with pytest.raises(ValueError, match=r"'ids' lists ids more than once: \['a'\]"):
        load_nerfies(root)


def test_bad_json_missing_files_and_bad_fields(tmp_path):
    root = _write_capture(tmp_path / "cap")
    (root / "scene.json").write_text('{"scale": 1.0, "center": [0, 0, 0], "near": 0.5,')
    with pytest.raises(ValueError, match=r"scene\.json is not valid JSON .*fix the file"):
        load_nerfies(root)
    shutil.rmtree(root)
    root = _write_capture(tmp_path / "cap")
    (root / "dataset.json").unlink()
    with pytest.raises(ValueError, match=r"dataset\.json is missing; a Nerfies capture folder holds"):
        load_nerfies(root)
    root = _write_capture(tmp_path / "cap3")
    (root / "camera" / "a.json").write_text(json.dumps(_camera(orientation=np.diag([1.0, 2.0, 1.0]).tolist())))
    with pytest.raises(ValueError, match=r"a\.json: 'orientation' must be a rotation"):
        load_nerfies(root)
    (root / "camera" / "a.json").write_text(json.dumps({k: v for k, v in _camera().items() if k != "focal_length"}))
    with pytest.raises(ValueError, match=r"a\.json: missing key 'focal_length'"):
        load_nerfies(root)
    (root / "camera" / "a.json").write_text(json.dumps(_camera()))
    (root / "points.npy").unlink()
    with pytest.raises(ValueError, match=r"points\.npy is missing.*pass points=False"):
        load_nerfies(root)
    assert load_nerfies(root, points=False).points.shape == (0, 3)
    with pytest.raises(ValueError, match=r"rgb/4x is missing; image scales present: \['1x'\]"):
        load_nerfies(root, image_scale=4)
    with pytest.raises(ValueError, match="is not a folder"):
        load_nerfies(tmp_path / "nowhere")


def test_cameras_validate_shapes():
    cam = camera_from_json(_camera())
    with pytest.raises(ValueError, match=r"Cameras\.position: expected a tensor of shape \(1, 3\)"):
        Cameras(**{**{f: getattr(cam, f) for f in cam.__dataclass_fields__}, "position": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match=r"pixels: expected a tensor \(N=1, \.\.\., 2\)"):
        cam.pixels_to_rays(torch.zeros(2, 4, 2))


def test_exported_from_the_data_package():
    assert data.load_nerfies is load_nerfies and data.nerfies_rays is nerfies_rays
    assert data.generate_nonrigid is generate_nonrigid and data.true_warp is true_warp
