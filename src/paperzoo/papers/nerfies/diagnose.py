"""Can the deformation field learn the true motion? Train the warp alone against the **true** canonical scene.

The synthetic capture's canonical scene is analytic (:func:`paperzoo.data.nonrigid.canonical_fields`), so a
learned warp ``T(x, omega_f)`` can be scored by rendering the true template at the warped samples,
``C(r) = sum_i w_i c(T(x_i))`` with NeRF's quadrature on the generator's own samples (across the object ball and the
plane's edge), against the capture's training images at 1x. With the template fixed to the truth, the photometric
loss is minimal at ``T = W`` (the true warp), so how fast the warp error (:func:`.recipe.warp_error`) falls
isolates the warp's own learning: the field, its codes, their initialisation and learning rates, the
coarse-to-fine window, without the chicken-and-egg of a template that learns at the same time.

``python -m paperzoo.papers.nerfies.diagnose CAPTURE_DIR --steps 200 --lr 5e-3 --code-lr 5e-2`` prints the warp
error every ``--every`` steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import torch
from torch import Tensor

from paperzoo.papers.nerf.render import composite

from .model import Nerfies, NerfiesConfig
from .objective import background_loss
from .warp import WarpConfig

__all__ = ["fit_warp_to_truth", "truth_render"]


def truth_render(truth, warp, o: Tensor, d: Tensor, image_ids: Tensor, samples: int, plane_samples: int = 24
                 ) -> Tensor:
    """``(R, 3)`` colours of rays ``o``, ``d`` (R, 3) with warp ids ``image_ids`` (R,): the true canonical scene
    (``truth``: a :class:`~paperzoo.data.nonrigid.NonrigidTruth`) at ``warp(x (R, S, 3), image_ids) -> x'`` on the
    object segment and at ``x`` across the plane's edge (where every warp is the identity), differentiable in the
    warp. The object segment spans the capture's largest object ball (one for all frames)."""
    from paperzoo.data.nonrigid import _segments, canonical_fields

    p = truth.params
    widest = int(p.object_radius.argmax())
    z_obj, z_bg = _segments(p.to(o.dtype), widest, o, d, samples, plane_samples)  # (R, S), (R, P)
    x_obj = o[:, None, :] + d[:, None, :] * z_obj[..., None]  # (R, S, 3) observed
    warped = warp(x_obj, image_ids)  # (R, S, 3) canonical: x' = T(x, omega_f)
    x_bg = o[:, None, :] + d[:, None, :] * z_bg[..., None]  # (R, P, 3)
    sigma, rgb, _ = canonical_fields(p, torch.cat([warped, x_bg], dim=1))  # (R, S + P), (R, S + P, 3)
    return composite(rgb, sigma, torch.cat([z_obj, z_bg], dim=1), d, white_background=True).rgb


def fit_warp_to_truth(root: str | Path, warp: WarpConfig, steps: int = 200, rays: int = 128, lr: float = 5e-3,
                      code_lr: float | None = None, code_init: float = 0.05, ramp: int = 0, samples: int | None = None,
                      every: int = 25, seed: int = 0, background_points: int = 0,
                      background_weight: float = 1.0, log=print) -> list[dict]:
    """Train an SE(3) field of ``warp`` and its codes (Adam, ``lr`` for the field, ``code_lr`` for the codes,
    default ``lr``; constant rates) on ``rays`` training rays a step, rendering the true template; the window opens
    over ``ramp`` steps (0: open from the start); ``background_points`` > 0 adds the background loss (weight
    ``background_weight``) on that many of the capture's static points a step. Returns ``[{"step", "warp_error",
    "mse", "seconds"}]`` every ``every`` steps (step 0 first); ``mse`` is the step's whole loss."""
    from paperzoo.data import load_nerfies, load_nonrigid_truth, nerfies_rays

    from .recipe import eval_indices, learned_warp, surface_points, truth_warp, warp_error

    root = Path(root)
    truth = load_nonrigid_truth(root, verify=False)
    cap = load_nerfies(root, 1, points=background_points > 0)
    o, d, rgb, image_ids = nerfies_rays(cap, "train")
    o, d, wid = o.float(), d.float(), cap.warp_ids[image_ids]
    samples = samples or int(truth.meta["render"]["samples"])
    torch.manual_seed(seed)
    cfg = NerfiesConfig.preset("small", warp=dataclasses.replace(warp, alpha_steps=ramp),
                               num_images=int(cap.warp_ids.max()) + 1, code_init=code_init)
    model = Nerfies(cfg)
    opt = torch.optim.Adam([{"params": model.warp.parameters(), "lr": lr},
                            {"params": model.warp_codes.parameters(), "lr": code_lr or lr}])
    points, frames = surface_points(root, eval_indices(len(cap.val_idx), 8), 256)
    true = truth_warp(root)
    history, t0, mse = [], time.perf_counter(), float("nan")
    for step in range(steps + 1):
        if step % every == 0 or step == steps:
            rec = {"step": step, **warp_error(learned_warp(model), true, points, frames), "mse": mse,
                   "seconds": round(time.perf_counter() - t0, 1)}
            history.append(rec)
            log(f"step {step:5d}  warp error {rec['warp_error']:.4f} (true motion {rec['true_motion']:.4f})  "
                f"mse {mse:.5f}  {rec['seconds']} s")
        if step == steps:
            break
        pick = torch.randint(len(o), (rays,))
        alpha = model.resolve_alpha(None, step)
        pred = truth_render(truth, lambda x, ids, a=alpha: model._warp_points(x, ids, a)[0], o[pick], d[pick],
                            wid[pick], samples)
        loss = ((pred - rgb[pick]) ** 2).mean()
        if background_points:
            static = cap.points[torch.randint(len(cap.points), (background_points,))].float()
            loss = loss + background_weight * background_loss(*model.background_warp(static, alpha=alpha))
        opt.zero_grad()
        loss.backward()
        opt.step()
        mse = float(loss.detach())
    return history


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rays", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--code-lr", type=float, default=None)
    ap.add_argument("--code-init", type=float, default=0.05)
    ap.add_argument("--head-init", type=float, default=1e-4)
    ap.add_argument("--ramp", type=int, default=0, help="coarse-to-fine steps (0: window open)")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--background-points", type=int, default=0)
    ap.add_argument("--background-weight", type=float, default=1.0)
    a = ap.parse_args(argv)
    warp = WarpConfig.preset("small", head_init=a.head_init)
    fit_warp_to_truth(a.capture, warp, a.steps, a.rays, a.lr, a.code_lr, a.code_init, a.ramp, a.samples, a.every,
                      a.seed, a.background_points, a.background_weight)


if __name__ == "__main__":
    main()
