"""The Nerfies model: the identity warp renders the canonical NeRF, the appearance code reaches colour and not density
(and the official flag bug is reproducible), the coarse outputs the losses use, and clear errors on bad inputs."""

from dataclasses import replace

import pytest
import torch

from paperzoo.papers.nerf import NeRF, NeRFConfig, NeRFMLP, render_rays
from paperzoo.papers.nerfies import Nerfies, NerfiesConfig, WarpConfig


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread (see tests/conftest.py)."""


def _model(seed=0, **overrides) -> Nerfies:
    torch.manual_seed(seed)
    return Nerfies(NerfiesConfig.preset("tiny", **overrides))


def _rays(cfg, n=6):
    inputs = Nerfies.example_inputs(cfg, batch=n)
    return inputs["rays_o"], inputs["rays_d"], inputs["image_ids"]


# ------------------------------------------------------------------------------------------------ identity warp
@pytest.mark.parametrize("deformation", ["se3", "translation", "none"])
@pytest.mark.parametrize("training", [False, True])
def test_an_identity_warp_renders_the_canonical_nerf(deformation, training):
    m = _model(deformation=deformation, appearance_dim=0, warp=WarpConfig.preset("tiny", head_init=0.0))
    c = m.config
    nerf = NeRF(c.template, c.render)
    nerf.coarse.load_state_dict(m.coarse.state_dict())
    nerf.fine.load_state_dict(m.fine.state_dict())
    m.train(training)
    rays_o, rays_d, ids = _rays(c)
    out = m(rays_o, rays_d, ids, alpha=1.0, generator=torch.Generator().manual_seed(2))
    r = c.render
    want = render_rays(nerf.coarse, nerf.fine, rays_o, rays_d, r.near, r.far, r.num_coarse, r.num_fine,
                       perturb=training, white_background=r.white_background,
                       generator=torch.Generator().manual_seed(2))
    for name in ("rgb_coarse", "rgb", "depth", "acc", "weights"):
        assert torch.allclose(getattr(out, name), getattr(want, name), atol=1e-6, rtol=0), name
    assert torch.equal(out.warped, out.points)
    assert (out.acc > 0.01).all()  # the rays see something: the comparison is not between two empty renders


def test_the_official_init_is_near_but_not_at_the_identity():
    m = _model(seed=3)  # heads uniform in [0, 1e-4)
    m.eval()
    out = m(*_rays(m.config), alpha=2.0)
    moved = (out.warped - out.points).norm(dim=-1)
    assert 0 < moved.max() < 1e-2


# ------------------------------------------------------------------------------------------------ appearance code
def _two_images_same_warp(m):
    with torch.no_grad():
        m.warp_codes.weight[1] = m.warp_codes.weight[0]  # the same deformation for images 0 and 1
        m.appearance_codes.weight[1] = m.appearance_codes.weight[0] + 1.0  # but another appearance


def test_the_appearance_code_changes_colour_not_density():
    m = _model(seed=4)
    _two_images_same_warp(m)
    m.eval()
    rays_o, rays_d, _ = _rays(m.config)
    a = m(rays_o, rays_d, torch.zeros(6, dtype=torch.long))
    b = m(rays_o, rays_d, torch.ones(6, dtype=torch.long))
    assert torch.equal(a.weights, b.weights) and torch.equal(a.weights_coarse, b.weights_coarse)  # density untouched
    assert (a.rgb - b.rgb).abs().max() > 1e-3 and (a.rgb_coarse - b.rgb_coarse).abs().max() > 1e-3


def test_the_official_flag_bug_conditions_nothing():
    m = _model(seed=4, condition_appearance=False)  # the released code: the appearance code never reaches F
    assert m.coarse.config.condition_dim == 0
    _two_images_same_warp(m)
    m.eval()
    rays_o, rays_d, _ = _rays(m.config)
    a = m(rays_o, rays_d, torch.zeros(6, dtype=torch.long))
    b = m(rays_o, rays_d, torch.ones(6, dtype=torch.long))
    assert torch.equal(a.rgb, b.rgb)


def test_a_camera_code_joins_the_colour_branch():
    m = _model(seed=5, num_cameras=2)
    assert m.coarse.config.condition_dim == 4 + 2
    m.eval()
    rays_o, rays_d, ids = _rays(m.config)
    with torch.no_grad():
        m.camera_codes.weight[1] = m.camera_codes.weight[0] + 1.0
    a = m(rays_o, rays_d, ids, camera_ids=torch.zeros(6, dtype=torch.long))
    b = m(rays_o, rays_d, ids, camera_ids=torch.ones(6, dtype=torch.long))
    assert torch.equal(a.weights, b.weights) and (a.rgb - b.rgb).abs().max() > 1e-3


def test_nerf_mlp_condition_reaches_colour_only_and_is_checked():
    torch.manual_seed(6)
    for viewdirs in (True, False):
        mlp = NeRFMLP(NeRFConfig.preset("tiny", condition_dim=3, use_viewdirs=viewdirs))
        x = torch.rand(4, 5, 3)
        d = torch.nn.functional.normalize(torch.randn(4, 5, 3), dim=-1) if viewdirs else None
        c0, c1 = torch.zeros(4, 5, 3), torch.ones(4, 5, 3)
        (rgb0, s0), (rgb1, s1) = mlp(x, d, c0), mlp(x, d, c1)
        assert torch.equal(s0, s1) and (rgb0 - rgb1).abs().max() > 1e-4
        with pytest.raises(ValueError, match=r"condition: expected a floating-point tensor of shape \(4, 5, 3\)"):
            mlp(x, d, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="condition_dim=0 and takes no condition"):
        NeRFMLP(NeRFConfig.preset("tiny"))(x, torch.nn.functional.normalize(x, dim=-1), c0)


# ------------------------------------------------------------------------------------------------ outputs, alpha
def test_coarse_outputs_for_the_losses():
    m = _model(seed=7, warp=WarpConfig.preset("tiny", head_init=0.0))
    m.eval()
    rays_o, rays_d, ids = _rays(m.config)
    out = m(rays_o, rays_d, ids, alpha=1.0, return_jacobian=True)
    nc = m.config.render.num_coarse
    assert out.points.shape == out.warped.shape == (6, nc, 3) and out.weights_coarse.shape == (6, nc)
    z = torch.linspace(m.config.render.near, m.config.render.far, nc)  # eval: evenly spaced depths
    assert torch.allclose(out.points, rays_o[:, None] + rays_d[:, None] * z[:, None], atol=1e-6)
    assert torch.allclose(out.jacobian, torch.eye(3).expand(6, nc, 3, 3), atol=1e-6)  # the identity warp
    assert m(rays_o, rays_d, ids).jacobian is None  # only when asked


def test_step_gives_the_scheduled_alpha():
    m = _model(seed=8)
    m.eval()
    rays = _rays(m.config)
    ramp, top = m.config.warp.alpha_steps, float(m.config.warp.num_freqs)
    assert torch.equal(m(*rays, step=0).rgb, m(*rays, alpha=0.0).rgb)
    assert torch.equal(m(*rays, step=ramp // 2).rgb, m(*rays, alpha=top / 2).rgb)
    assert torch.equal(m(*rays, step=10 * ramp).rgb, m(*rays).rgb)  # past the ramp, and the default: alpha = m
    assert not torch.equal(m(*rays, alpha=0.0).warped, m(*rays).warped)  # the window reaches the warp


def test_the_fine_loss_does_not_reach_the_coarse_network():
    m = _model(seed=9)
    m.train()
    out = m(*_rays(m.config), alpha=1.0)
    out.rgb.sum().backward()
    assert all(p.grad is None or (p.grad == 0).all() for p in m.coarse.parameters())
    assert any(p.grad is not None and (p.grad != 0).any() for p in m.warp.parameters())  # the warp gets it


# ------------------------------------------------------------------------------------------------ bad inputs
def test_bad_inputs_raise_clear_errors():
    m = _model(seed=10)
    rays_o, rays_d, ids = _rays(m.config)
    with pytest.raises(ValueError, match=r"rays_o: expected a floating-point tensor of shape \(rays, 3\)"):
        m(rays_o[None], rays_d, ids)
    with pytest.raises(ValueError, match=r"rays_d: expected a floating-point tensor"):
        m(rays_o, rays_d.long(), ids)
    with pytest.raises(ValueError, match=r"image_ids: expected an int64 \(long\) tensor of shape \(6,\)"):
        m(rays_o, rays_d, ids.float())
    with pytest.raises(ValueError, match=r"image_ids: expected an int64 \(long\) tensor of shape \(6,\)"):
        m(rays_o, rays_d, ids[:3])
    with pytest.raises(ValueError, match=r"image_ids: ids must lie in \[0, 4\)"):
        m(rays_o, rays_d, ids + 4)
    with pytest.raises(ValueError, match=r"alpha: expected a number in \[0, m = 2\]"):
        m(rays_o, rays_d, ids, alpha=3.0)
    with pytest.raises(ValueError, match="alpha or step, not both"):
        m(rays_o, rays_d, ids, alpha=1.0, step=3)
    with pytest.raises(ValueError, match="camera_ids: expected an int64"):
        _model(num_cameras=2)(rays_o, rays_d, ids)
    with pytest.raises(ValueError, match="this model has no camera codes"):
        m(rays_o, rays_d, ids, camera_ids=ids)
    with pytest.raises(ValueError, match=r"points: expected floating-point samples of shape \(R, S, 3\)"):
        m.warp_points(torch.rand(2, 3, 4, 3), ids[:2], 1.0)
    with pytest.raises(ValueError, match="NerfiesConfig.deformation: expected one of"):
        NerfiesConfig.preset("tiny", deformation="affine")
    with pytest.raises(ValueError, match="unknown Nerfies preset"):
        NerfiesConfig.preset("huge")
    with pytest.raises(ValueError, match="NerfiesConfig.num_images: expected an int >= 1"):
        NerfiesConfig.preset("tiny", num_images=0)
    with pytest.raises(ValueError, match=r"points: expected floating-point static points of shape \(K, 3\)"):
        m.background_warp(torch.rand(4, 4, 3))


def test_presets_build_and_set_the_template_condition():
    for name in ("tiny", "small", "paper"):
        c = NerfiesConfig.preset(name)
        assert c.template.condition_dim == c.appearance_dim
        assert replace(c, appearance_dim=0).template.condition_dim == 0
    paper = NerfiesConfig.preset("paper")
    assert (paper.warp.num_layers, paper.warp.dim, paper.warp.skips, paper.warp.num_freqs) == (6, 128, (3,), 8)
    assert (paper.template.num_layers, paper.template.dim, paper.template.skips) == (8, 256, (3,))
    assert (paper.render.num_coarse, paper.render.num_fine) == (128, 128)


def test_a_training_step_compiles_as_the_engine_compiles_it():
    """Through ``paperzoo.train.compile_model`` (data-dependent sizes traced) a training step with the elastic loss
    (the graph breaks at the Jacobian's autograd.grad) gives the eager loss and gradients."""
    import torch._dynamo

    from paperzoo.papers.nerfies import nerfies_loss
    from paperzoo.train import compile_model

    m = _model(seed=3, warp=WarpConfig.preset("tiny", head_init=0.2)).eval()  # eval: deterministic depths
    rays_o, rays_d, ids = _rays(m.config)
    target = torch.rand(6, 3)

    def step(model):
        m.zero_grad(set_to_none=True)
        loss, _ = nerfies_loss(model(rays_o, rays_d, ids, alpha=1.0, return_jacobian=True), target,
                               elastic_weight=0.01)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in m.parameters() if p.grad is not None]

    want, want_g = step(m)
    torch._dynamo.reset()
    flags = {"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True}
    with torch._dynamo.config.patch(**flags):
        got, got_g = step(compile_model(m, backend="eager"))
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert len(got_g) == len(want_g)
    for a, b in zip(got_g, want_g, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
