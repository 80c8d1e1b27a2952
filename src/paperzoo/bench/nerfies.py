"""``paperzoo bench nerfies``: what the deformation field and the elastic loss cost, in one process, interleaved.

Rows:

* ``nerfies train step <preset>``: a training step (forward + backward) of the full model (SE(3) field, elastic
  loss on the coarse samples' Jacobians, background loss) vs a NeRF at the same rays, samples and template
  (``Nerfies`` with ``deformation="none"``: the canonical NeRF alone), with rays/s of each, matmul FLOPs and the
  fraction of the measured matmul peak; the same for the field without the elastic loss (``se3, no elastic``).
* ``nerfies jacobian <preset>``: the warp and its 3x3 Jacobian at every point with the gradient of the elastic
  loss, ours (reverse mode: the three vector-Jacobian products in one batched ``autograd.grad`` with
  ``create_graph=True``, valid because points do not interact) vs ``torch.func``'s idiom (``vmap`` over points of
  ``jacfwd``: forward mode, three tangents), in microseconds per sample; both Jacobians are checked equal first.

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs a few repeats of the ``tiny`` case only (a smoke test).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from paperzoo.bench.precision import FP32_REF, autocast, peak_gflops, time_interleaved
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops
from paperzoo.papers.nerf.model import NeRFConfig
from paperzoo.papers.nerf.render import RenderConfig
from paperzoo.papers.nerfies import Nerfies, NerfiesConfig, WarpConfig, elastic_loss, nerfies_loss

CASES = {  # preset -> (template preset, warp preset, rays per step, coarse, fine samples, background points)
    "tiny": ("tiny", "tiny", 64, 8, 8, 64),
    "small": ("small", "small", 128, 24, 48, 1024),  # the recipe's small preset
    "paper": ("paper", "paper", 64, 128, 128, 16_384),  # the paper's sizes, fewer rays
}


def _model(case: str, deformation: str) -> Nerfies:
    t, w, _, nc, nf, _ = CASES[case]
    kw = {"skips": (3,), "xyz_freqs": 8} if t == "paper" else {}
    template = NeRFConfig.preset(t, density_activation="softplus", **kw)
    torch.manual_seed(0)
    return Nerfies(NerfiesConfig(template=template, warp=WarpConfig.preset(w, alpha_steps=0), deformation=deformation,
                                 num_images=16, appearance_dim=8,
                                 render=RenderConfig(num_coarse=nc, num_fine=nf, near=1.7, far=5.3,
                                                     white_background=False)))


def _batch(n: int, points: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """``n`` rays from a camera 3.5 units away towards the origin, targets, image ids and static points."""
    g = torch.Generator().manual_seed(seed)
    o = torch.tensor([0.0, 0.0, 3.5]).expand(n, 3).clone()
    d = torch.nn.functional.normalize(torch.cat([0.3 * torch.randn(n, 2, generator=g), -torch.ones(n, 1)], -1), dim=-1)
    return {"o": o, "d": d, "rgb": torch.rand(n, 3, generator=g), "ids": torch.randint(0, 16, (n,), generator=g),
            "static": 2.0 * torch.rand(points, 3, generator=g) - 1.0}


def train_step(model: Nerfies, b: dict, elastic: bool, background: bool):
    """A closure: one forward + backward of ``nerfies_loss`` (elastic weight 0.01, background weight 1)."""
    def f():
        model.zero_grad(set_to_none=True)
        with autocast():
            out = model(b["o"], b["d"], b["ids"], return_jacobian=elastic)
            bg = model.background_warp(b["static"]) if background else None
            loss, _ = nerfies_loss(out, b["rgb"], elastic_weight=0.01 if elastic else 0.0, background=bg)
        loss.backward()
    return f


def jacfwd_jacobian(field, points: torch.Tensor, codes: torch.Tensor, alpha: float
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(warped (N, 3), J (N, 3, 3))`` the ``torch.func`` way: forward mode (``jacfwd``, three tangents) vmapped
    over points, differentiable in the parameters."""
    window = field.window(alpha, points)

    def one(x: torch.Tensor, code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = field._warp(x, code, window)
        return y, y

    jac, warped = torch.func.vmap(torch.func.jacfwd(one, has_aux=True))(points, codes)
    return warped, jac


def jacobian_closures(model: Nerfies, n: int, seed: int = 0) -> tuple[dict, float]:
    """``({"ours": f, "jacfwd+vmap": g}, max |J_ours - J_jacfwd|)`` for ``n`` points: warp, Jacobian, elastic loss
    (uniform weights) and its backward."""
    g = torch.Generator().manual_seed(seed)
    pts = 2.0 * torch.rand(n, 3, generator=g) - 1.0
    codes = model.warp_codes(torch.randint(0, 16, (n,), generator=g)).detach()
    field, m = model.warp, float(model.config.warp.num_freqs)
    weights = torch.full((n, 1), 1.0)
    j_ours, j_peer = field.warp_and_jacobian(pts, codes, m)[1], jacfwd_jacobian(field, pts, codes, m)[1]
    diff = float((j_ours - j_peer).detach().abs().max())

    def closure(jacobian):
        def f():
            field.zero_grad(set_to_none=True)
            with autocast():
                _, jac = jacobian(field, pts, codes, m)
                loss = elastic_loss(jac[:, None], weights)
            loss.backward()
        return f
    return {"ours": closure(type(field).warp_and_jacobian), "jacfwd+vmap": closure(jacfwd_jacobian)}, diff


def run(repeats: int | None = None) -> tuple[list[BenchResult], dict[str, Any]]:
    """Time every case; returns ``(rows, meta)`` for :func:`paperzoo.bench.run_bench`."""
    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    cases = ("tiny",) if quick else ("small", "paper")
    peak = peak_gflops()
    rows: list[BenchResult] = []
    for case in cases:
        _, _, n_rays, nc, nf, n_bg = CASES[case]
        b = _batch(n_rays, n_bg)
        full, nerf = _model(case, "se3"), _model(case, "none")
        n = repeats or (2 if quick else 5)
        closures = {"nerfies": train_step(full, b, True, True), "nerf": train_step(nerf, b, False, False),
                    "se3, no elastic": train_step(full, b, False, True)}
        timed = time_interleaved(closures, warmup=1, repeats=n, fp32_ref=("nerfies", "se3, no elastic"))
        for label, peer in (("nerfies", "nerf"), ("se3, no elastic", "nerf")):
            flops = count_flops(closures[label])
            rows.append(BenchResult.from_stats(
                f"nerfies train step {case} ({label} vs nerf)",
                f"{n_rays} rays x ({nc} + {nf}) samples, fwd+bwd" + (f", {n_bg} background points"),
                {k: timed[k] for k in (label, peer, label + FP32_REF) if k in timed}, flops=flops, peak_gflops=peak,
                rays_per_s=n_rays / timed[label].median, peer_rays_per_s=n_rays / timed[peer].median, repeats=n))
        points = n_rays * nc  # as many as the elastic loss sees in a step
        jac, diff = jacobian_closures(full, points)
        stats = time_interleaved(jac, warmup=1, repeats=n)
        rows.append(BenchResult.from_stats(
            f"nerfies jacobian {case}", f"{points} points, warp + 3x3 Jacobian + elastic loss, fwd+bwd", stats,
            flops=count_flops(jac["ours"]), peak_gflops=peak, us_per_sample=stats["ours"].median / points * 1e6,
            peer_us_per_sample=stats["jacfwd+vmap"].median / points * 1e6, max_abs_diff_vs_jacfwd=diff, repeats=n))
    meta = {"torch_threads": torch.get_num_threads(), "peak_gflops": peak,
            "notes": ("Same rays, codes and weights across rows; in the pass's precision; the coarse-to-fine window "
                      "fully open. The NeRF peer is the same template without a deformation field. FLOPs: matmuls only "
                      "(torch.utils.flop_counter). Interleaved medians on a shared machine.")}
    return rows, meta
