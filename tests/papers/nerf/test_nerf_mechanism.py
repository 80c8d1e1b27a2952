"""NeRF's defining properties: the encoding, rays, stratified and hierarchical sampling, compositing, gradients."""

import math

import pytest
import torch

from paperzoo.nn.posenc import frequency_encoding
from paperzoo.papers.nerf import NeRFConfig, NeRFMLP, get_rays, nerf_loss, psnr, render_rays, sample_pdf
from paperzoo.papers.nerf.render import composite, stratified_samples


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny tensors: one thread (see tests/conftest.py)."""


# ------------------------------------------------------------------------------------------------ encoding
def test_encoding_dims_and_values_by_hand():
    x = torch.tensor([[0.3, -1.2, 0.7]], dtype=torch.float64)
    assert frequency_encoding(x, 10).shape == (1, 63)
    assert frequency_encoding(x, 4).shape == (1, 27)
    e = frequency_encoding(x, 2)  # [x, sin(x), cos(x), sin(2x), cos(2x)], 3 channels each
    want = torch.cat([x, x.sin(), x.cos(), (2 * x).sin(), (2 * x).cos()], dim=-1)
    assert torch.equal(e, want)
    e_pi = frequency_encoding(x, 2, pi=True)  # the paper's eq. 4
    assert torch.allclose(e_pi[:, 3:6], (math.pi * x).sin()) and torch.allclose(e_pi[:, 12:15], (2 * math.pi * x).cos())
    assert frequency_encoding(x, 2, include_input=False).shape == (1, 12)


def test_encoding_window_scales_frequencies_not_the_input():
    x = torch.randn(5, 3)
    w = torch.tensor([1.0, 0.0])
    e = frequency_encoding(x, 2, window=w)
    assert torch.equal(e[:, :3], x) and torch.equal(e[:, 3:9], frequency_encoding(x, 2)[:, 3:9])
    assert (e[:, 9:] == 0).all()
    with pytest.raises(ValueError, match=r"window must have shape \(2,\)"):
        frequency_encoding(x, 2, window=torch.ones(3))


# ------------------------------------------------------------------------------------------------ rays
def test_rays_of_an_identity_camera_and_a_translated_rotated_one():
    h, w, f = 4, 6, 3.0
    o, d = get_rays(h, w, f, torch.eye(4))
    assert o.shape == d.shape == (h, w, 3) and (o == 0).all()
    assert torch.equal(d[2, 3], torch.tensor([0.0, 0.0, -1.0]))  # pixel (W/2, H/2): straight ahead
    assert torch.allclose(d[0, 0], torch.tensor([-3 / f, 2 / f, -1.0]))  # top-left: left (-x) and up (+y)
    # a camera at (1, 2, 3) turned 90 degrees about y: its -z axis points along world -x
    c2w = torch.eye(4)
    c2w[:3, :3] = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    c2w[:3, 3] = torch.tensor([1.0, 2.0, 3.0])
    o, d = get_rays(h, w, f, c2w)
    assert torch.equal(o[1, 1], torch.tensor([1.0, 2.0, 3.0]))
    assert torch.allclose(d[2, 3], torch.tensor([-1.0, 0.0, 0.0]))
    batched_o, batched_d = get_rays(h, w, f, torch.stack([torch.eye(4), c2w]))
    assert batched_d.shape == (2, h, w, 3) and torch.equal(batched_d[1], d)


def test_bad_poses_are_refused():
    with pytest.raises(ValueError, match=r"\(\.\.\., 4, 4\)"):
        get_rays(4, 4, 2.0, torch.eye(3))
    with pytest.raises(ValueError, match="positive"):
        get_rays(0, 4, 2.0, torch.eye(4))


# ------------------------------------------------------------------------------------------------ sampling
def test_stratified_samples_stay_in_their_bins():
    g = torch.Generator().manual_seed(0)
    z = stratified_samples(2.0, 6.0, 5, 100, perturb=True, generator=g)
    even = torch.linspace(2.0, 6.0, 5)
    mids = 0.5 * (even[1:] + even[:-1])
    lower, upper = torch.cat([even[:1], mids]), torch.cat([mids, even[-1:]])
    assert ((z >= lower) & (z <= upper)).all() and (z.diff(dim=-1) >= 0).all()
    assert torch.equal(stratified_samples(2.0, 6.0, 5, 3, perturb=False), even.expand(3, 5))


def test_sample_pdf_by_hand():
    bins = torch.tensor([[0.0, 1.0, 2.0]])
    # all the mass in the second interval: every deterministic sample falls in [1, 2]
    s = sample_pdf(bins, torch.tensor([[0.0, 1.0]]), 3, deterministic=True)
    w = torch.tensor([1e-5, 1.0 + 1e-5])
    cdf = torch.tensor([0.0, w[0] / w.sum(), 1.0])
    u = torch.tensor([0.0, 0.5, 1.0])
    want = torch.stack([torch.tensor(0.0), 1 + (u[1] - cdf[1]) / (1 - cdf[1]), torch.tensor(2.0)])
    assert torch.allclose(s[0], want, atol=1e-6)
    # a degenerate ray with zero weights gets the uniform PDF: evenly spaced samples
    flat = sample_pdf(torch.tensor([[0.0, 1.0, 2.0, 3.0]]), torch.zeros(1, 3), 4, deterministic=True)
    assert torch.allclose(flat, torch.tensor([[0.0, 1.0, 2.0, 3.0]]), atol=1e-5)
    with pytest.raises(ValueError, match=r"weights \(R, B - 1\)"):
        sample_pdf(bins, torch.ones(1, 3), 3, deterministic=True)


# ------------------------------------------------------------------------------------------------ compositing
def test_composite_opaque_sample_empty_ray_and_white_background():
    z = torch.tensor([[2.0, 3.0, 4.0], [2.0, 3.0, 4.0]])
    rgb = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]).expand(2, 3, 3)
    sigma = torch.tensor([[0.0, 1e6, 0.0], [0.0, 0.0, 0.0]])  # ray 0: one opaque sample in the middle; ray 1: empty
    d = torch.tensor([[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]])
    c = composite(rgb, sigma, z, d, white_background=True)
    assert torch.allclose(c.rgb[0], torch.tensor([0.0, 1.0, 0.0])) and torch.allclose(c.depth[0], torch.tensor(3.0))
    assert torch.allclose(c.rgb[1], torch.ones(3)) and c.acc[1] == 0  # nothing hit: the white background
    black = composite(rgb, sigma, z, d, white_background=False)
    assert torch.equal(black.rgb[1], torch.zeros(3))
    # delta scales with |d|: doubling the direction's length doubles the optical depth of a thin sample
    thin = torch.tensor([[0.5, 0.0, 0.0]])
    a1 = composite(rgb[:1], thin, z[:1], d[:1], False).acc
    a2 = composite(rgb[:1], thin, z[:1], 2 * d[:1], False).acc
    assert torch.allclose(a1, torch.tensor(1 - math.exp(-0.5))) and torch.allclose(a2, torch.tensor(1 - math.exp(-1.0)))


# ------------------------------------------------------------------------------------------------ coarse + fine
def _models():
    torch.manual_seed(0)
    cfg = NeRFConfig.preset("tiny")
    return NeRFMLP(cfg), NeRFMLP(cfg)


def test_no_gradient_flows_from_the_fine_pass_into_the_coarse_one():
    coarse, fine = _models()
    o = torch.zeros(8, 3)
    d = torch.nn.functional.normalize(torch.randn(8, 3), dim=-1)
    out = render_rays(coarse, fine, o, d, 0.5, 2.0, num_coarse=8, num_fine=16, perturb=True,
                      generator=torch.Generator().manual_seed(0))
    out.rgb.sum().backward()
    assert all(p.grad is None for p in coarse.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in fine.parameters())


def test_fine_samples_concentrate_where_the_coarse_weights_are():
    bins = torch.linspace(2.0, 6.0, 33).expand(4, 33)
    w = torch.zeros(4, 32)
    w[:, 20] = 1.0  # a surface in interval 20: [4.5, 4.625]
    s = sample_pdf(bins, w, 64, deterministic=False, generator=torch.Generator().manual_seed(0))
    inside = ((s >= 4.5) & (s <= 4.625)).float().mean()
    assert inside > 0.99


def test_loss_and_psnr():
    coarse, fine = _models()
    out = render_rays(coarse, fine, torch.zeros(4, 3), torch.tensor([[0.0, 0.0, -1.0]]).expand(4, 3), 0.5, 2.0,
                      num_coarse=4, num_fine=4, perturb=False)
    loss, m = nerf_loss(out, torch.full((4, 3), 0.5))
    assert torch.allclose(loss, m["mse_coarse"] + m["mse"]) and torch.allclose(m["psnr"], psnr(m["mse"]))
    assert torch.allclose(psnr(0.01), torch.tensor(20.0))
    with pytest.raises(ValueError, match=r"\(rays, 3\)"):
        nerf_loss(out, torch.zeros(4, 4))


def test_model_shapes_skip_and_ablations():
    cfg = NeRFConfig.preset("paper")
    m = NeRFMLP(cfg)
    assert m.trunk[5].in_features == 256 + 63 and m.view.in_features == 256 + 27
    rgb, raw = m(torch.rand(2, 5, 3), torch.nn.functional.normalize(torch.randn(2, 5, 3), dim=-1))
    assert rgb.shape == (2, 5, 3) and raw.shape == (2, 5) and ((rgb >= 0) & (rgb <= 1)).all()
    no_pe = NeRFMLP(NeRFConfig.preset("tiny", positional_encoding=False, use_viewdirs=False))
    assert no_pe.trunk[0].in_features == 3
    rgb, _ = no_pe(torch.rand(3, 2, 3))
    assert rgb.shape == (3, 2, 3)
    with pytest.raises(ValueError, match="directions"):
        m(torch.rand(2, 5, 3))
    with pytest.raises(ValueError, match="skips"):
        NeRFConfig(num_layers=4, skips=(3,))
    assert torch.equal(NeRFMLP(NeRFConfig.preset("tiny")).density(torch.tensor([-1.0, 2.0])),
                       torch.nn.functional.softplus(torch.tensor([-1.0, 2.0])))
    assert torch.equal(m.density(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))  # ReLU, the paper's


# ------------------------------------------------------------------------------------------------ precision
def test_bf16_autocast_renders_like_fp32_and_composites_in_fp32():
    """Under bf16 autocast the MLPs' matmuls are bf16 but compositing is fp32: colours within 0.02 of fp32."""
    from paperzoo.papers.nerf.render import NeRF, RenderConfig

    torch.manual_seed(0)
    model = NeRF(NeRFConfig.preset("tiny"), RenderConfig(num_coarse=16, num_fine=16)).eval()
    o = torch.tensor([[0.0, 0.0, 4.0]]).expand(64, 3)
    d = torch.nn.functional.normalize(torch.randn(64, 3) * 0.2 + torch.tensor([0.0, 0.0, -1.0]), dim=-1)
    with torch.no_grad():
        ref = model(o, d)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            amp = model(o, d)
    assert amp.rgb.dtype == amp.weights.dtype == torch.float32
    diff = (amp.rgb - ref.rgb).abs().max()
    assert 0 < diff < 0.02, diff  # > 0: bf16 did run


def test_bf16_training_lowers_the_loss_like_fp32():
    """Same seed and rays: 60 Adam steps in bf16 end within 10% of fp32's loss, both far below the start."""
    from paperzoo.papers.nerf.render import NeRF, RenderConfig

    g = torch.Generator().manual_seed(0)
    o = torch.tensor([[0.0, 0.0, 4.0]]).expand(128, 3)
    d = torch.nn.functional.normalize(torch.randn(128, 3, generator=g) * 0.2 + torch.tensor([0.0, 0.0, -1.0]), dim=-1)
    target = torch.where(d[:, :1] > 0, torch.tensor([0.9, 0.2, 0.1]), torch.tensor([0.1, 0.3, 0.8]))  # two colours
    ends = {}
    for amp in (False, True):
        torch.manual_seed(0)
        model = NeRF(NeRFConfig.preset("tiny"), RenderConfig(num_coarse=16, num_fine=16))
        opt = torch.optim.Adam(model.parameters(), 5e-3)
        losses = []
        for _ in range(60):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                loss, _ = nerf_loss(model(o, d), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        ends[amp] = (losses[0], sum(losses[-5:]) / 5)
    (start32, end32), (start16, end16) = ends[False], ends[True]
    assert end32 < 0.3 * start32 and end16 < 0.3 * start16, ends
    assert abs(end16 - end32) < 0.1 * end32, ends


def test_a_training_step_traces_as_one_graph():
    """torch.compile(fullgraph=True) traces the training-mode render (perturbed depths, random fine draws, both
    passes) with no graph break; sample_pdf's value check on negative weights still runs in eager mode."""
    import torch._dynamo

    from paperzoo.papers.nerf.render import NeRF, RenderConfig

    torch.manual_seed(0)
    model = NeRF(NeRFConfig.preset("tiny"), RenderConfig(num_coarse=8, num_fine=8)).train()
    o = torch.zeros(16, 3)
    d = torch.nn.functional.normalize(torch.randn(16, 3), dim=-1)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    loss, _ = nerf_loss(compiled(o, d), torch.rand(16, 3))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="weights must be >= 0"):
        sample_pdf(torch.tensor([[0.0, 1.0, 2.0]]), torch.tensor([[0.5, -0.1]]), 3, deterministic=True)
