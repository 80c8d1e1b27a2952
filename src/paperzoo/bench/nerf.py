"""``paperzoo bench nerf``: training rays/s and rendering ms per frame, ours vs a reference built like the official
PyTorch port, on the same weights and the same rays.

The reference follows nerf-pytorch's structure: the encoding applied per call, the MLP run over fixed-size chunks of
flattened points (``netchunk``), sampling, ``raw2outputs`` and ``sample_pdf`` as separate passes over the samples,
the fine pass re-encoding the coarse samples. (The port itself cannot run on a CPU as shipped: it sets CUDA tensors
as the default type.) Ours: one batched MLP call per pass, the encoding fused into the model's forward.

Rows: a training step (forward + backward of coarse + fine MSE) and the rendering of a 100x100 frame (eval, no grad),
for the ``small`` and ``paper`` MLPs; each with FLOPs (matmuls), the fraction of the matmul peak, and for ours the
share of the training step spent outside the two MLPs (sampling, sorting, compositing).

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs a few repeats on a smaller frame only (a smoke test).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.nn.functional as F

from paperzoo.bench.precision import FP32_REF, autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops
from paperzoo.nn.posenc import frequency_encoding
from paperzoo.papers.nerf import NeRF, NeRFConfig, RenderConfig, get_rays, render_image
from paperzoo.papers.nerf.render import RenderOutput, sample_pdf

CASES = {  # preset -> (rays per training step, coarse samples, fine samples)
    "small": (512, 32, 64),
    "paper": (256, 64, 128),
}
NETCHUNK = 1024 * 64  # the port's default points per network call
CHUNK = 1 << 16  # points per rendering chunk for ours: the same working set


# ------------------------------------------------------------------------------------------------ the reference
def _reference_network(mlp, points: torch.Tensor, viewdirs: torch.Tensor | None) -> torch.Tensor:
    """The port's ``run_network``: flatten, encode, call the MLP in chunks, concatenate raw (rgb logits, sigma)."""
    c = mlp.config
    flat = points.reshape(-1, 3)
    emb = frequency_encoding(flat, c.xyz_freqs, pi=c.pi)
    if viewdirs is not None:
        dirs = viewdirs[:, None].expand(points.shape).reshape(-1, 3)
        emb = torch.cat([emb, frequency_encoding(dirs, c.dir_freqs, pi=c.pi)], -1)
    outs = []
    for i in range(0, emb.shape[0], NETCHUNK):
        x = emb[i:i + NETCHUNK]
        pts, views = x[:, :c.xyz_channels], x[:, c.xyz_channels:]
        h = pts
        for j, layer in enumerate(mlp.trunk):
            h = F.relu(layer(h))
            if j in c.skips:
                h = torch.cat([pts, h], -1)
        alpha = mlp.sigma(h)
        h = F.relu(mlp.view(torch.cat([mlp.feature(h), views], -1)))
        outs.append(torch.cat([mlp.rgb(h), alpha], -1))
    return torch.cat(outs).reshape(*points.shape[:-1], 4)


def _reference_raw2outputs(raw: torch.Tensor, z: torch.Tensor, rays_d: torch.Tensor, softplus: bool):
    dists = torch.cat([z[..., 1:] - z[..., :-1], torch.full_like(z[..., :1], 1e10)], -1) * rays_d.norm(dim=-1)[:, None]
    rgb = torch.sigmoid(raw[..., :3])
    sigma = F.softplus(raw[..., 3]) if softplus else F.relu(raw[..., 3])
    alpha = 1.0 - torch.exp(-sigma * dists)
    weights = alpha * torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)
    acc = weights.sum(-1)
    return rgb_map + (1.0 - acc[..., None]), weights, (weights * z).sum(-1), acc


def reference_render(model: NeRF, rays_o: torch.Tensor, rays_d: torch.Tensor) -> RenderOutput:
    """Render rays the port's way (deterministic sampling: the same depths as ours in eval mode)."""
    r = model.render
    n = rays_o.shape[0]
    t = torch.linspace(0.0, 1.0, r.num_coarse)
    z = (r.near * (1.0 - t) + r.far * t).expand(n, r.num_coarse)
    viewdirs = rays_d / rays_d.norm(dim=-1, keepdim=True)
    soft = model.config.density_activation == "softplus"
    pts = rays_o[:, None] + rays_d[:, None] * z[..., None]
    rgb0, weights, _, _ = _reference_raw2outputs(_reference_network(model.coarse, pts, viewdirs), z, rays_d, soft)
    mids = 0.5 * (z[:, 1:] + z[:, :-1])
    z_f = sample_pdf(mids, weights[:, 1:-1].detach(), r.num_fine, deterministic=True).detach()
    z_all, _ = torch.sort(torch.cat([z, z_f], -1), -1)
    pts = rays_o[:, None] + rays_d[:, None] * z_all[..., None]
    rgb, weights, depth, acc = _reference_raw2outputs(_reference_network(model.fine, pts, viewdirs), z_all, rays_d,
                                                      soft)
    return RenderOutput(rgb0, rgb, depth, acc, weights)


# ------------------------------------------------------------------------------------------------ the bench
def _rays(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rays of a camera 4 units from the origin looking at it (as the lego views), and random targets."""
    g = torch.Generator().manual_seed(seed)
    pose = torch.eye(4)
    pose[2, 3] = 4.0
    o, d = (x.reshape(-1, 3) for x in get_rays(100, 100, 138.9, pose))
    pick = torch.randperm(o.shape[0], generator=g)[:n]
    return o[pick], d[pick], torch.rand(n, 3, generator=g)


def run(repeats: int | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time every case; returns ``(rows, meta)`` for :func:`paperzoo.bench.run_bench`."""
    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    side = 24 if quick else 100
    peak = peak_gflops()
    rows: list[BenchResult] = []
    for preset, (n_rays, nc, nf) in CASES.items():
        torch.manual_seed(0)
        model = NeRF(NeRFConfig.preset(preset), RenderConfig(num_coarse=nc, num_fine=nf)).eval()
        o, d, target = _rays(n_rays)
        # eval mode for both: the same deterministic depths, so outputs must agree
        max_diff = float((model(o, d).rgb - reference_render(model, o, d).rgb).abs().max())

        def step(render, model=model, o=o, d=d, target=target):
            def f():
                model.zero_grad(set_to_none=True)
                with autocast():
                    out = render(o, d)
                    loss = F.mse_loss(out.rgb_coarse.float(), target) + F.mse_loss(out.rgb.float(), target)
                loss.backward()
            return f

        def mlp_only(model=model, nc=nc, nf=nf, n_rays=n_rays):
            """The two MLPs alone on as many points as a step evaluates, forward + backward."""
            model.zero_grad(set_to_none=True)
            for mlp, s in ((model.coarse, nc), (model.fine, nc + nf)):
                pts = torch.randn(n_rays, s, 3)
                with autocast():
                    rgb, raw = mlp(pts, F.normalize(pts, dim=-1))
                    loss = rgb.float().sum() + raw.float().sum()
                loss.backward()

        n = repeats or (2 if quick else (8 if preset == "paper" else 10))
        flops = count_flops(step(model))
        port = step(lambda a, b, model=model: reference_render(model, a, b))
        timed = time_interleaved({"ours": step(model), "port-style": port, "mlp only": mlp_only}, warmup=1, repeats=n)
        outside = 1.0 - timed["mlp only"].median / timed["ours"].median
        stats = {k: timed[k] for k in ("ours", "port-style", "ours" + FP32_REF) if k in timed}
        rows.append(BenchResult.from_stats(
            f"nerf train step {preset}", f"{n_rays} rays x ({nc} + {nf}) samples, fwd+bwd", stats, flops=flops,
            peak_gflops=peak, rays_per_s=n_rays / stats["ours"].median,
            peer_rays_per_s=n_rays / stats["port-style"].median, share_outside_mlp=round(outside, 3), repeats=n,
            max_abs_diff_vs_port_style=max_diff))

        def frame(render, nc=nc, nf=nf):
            def f():
                with autocast():
                    return render_image(render, side, side, 138.9 * side / 100, torch.eye(4),
                                        chunk=CHUNK // (2 * nc + nf))
            return f

        m = 1 if quick or preset == "paper" else 3
        flops = count_flops(frame(model))
        port = frame(lambda a, b, model=model: reference_render(model, a, b))
        stats = time_interleaved({"ours": frame(model), "port-style": port}, warmup=0 if preset == "paper" else 1,
                                 repeats=m)
        rows.append(BenchResult.from_stats(f"nerf render {preset}", f"{side}x{side} frame, ({nc} + {nf}) samples",
                                           stats, flops=flops, peak_gflops=peak, repeats=m))
    meta = {"torch_threads": torch.get_num_threads(), "peak_gflops": peak,
            "notes": ("Same weights and rays for both; eval-mode (deterministic) sampling for the output check, "
                      "train-step timings without perturbation differences. FLOPs: matmuls only "
                      "(torch.utils.flop_counter). Interleaved medians on a shared machine.")}
    return rows, meta
