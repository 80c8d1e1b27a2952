"""The paper's comparison maps, through Captum (the ``[xai]`` extra), and two controls.

Each returns a 2-D map (B, H, W): the absolute attribution averaged over channels, computed on the classifier's
logit of the target for the input image itself (as the paper does for image gradients, guided backprop and
integrated gradients). Controls: ``random`` (uniform noise from a seed) and ``centre`` (closeness to the image
centre), which know nothing of the image.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["BASELINES", "CONTROLS", "baseline_maps"]

BASELINES = ("saliency", "guided_backprop", "integrated_gradients")
CONTROLS = ("random", "centre")


def baseline_maps(model: nn.Module, inputs: Tensor, target: Tensor | int, methods=BASELINES + CONTROLS,
                  ig_steps: int = 50, internal_batch_size: int | None = None, seed: int = 0) -> dict[str, Tensor]:
    """``{method: (B, H, W) map}`` for ``inputs`` (B, C, H, W); ``model`` in eval mode, its ReLUs ``nn.ReLU``
    modules without ``inplace`` (GuidedBackprop overrides them)."""
    from captum.attr import GuidedBackprop, IntegratedGradients, Saliency

    unknown = [m for m in methods if m not in BASELINES + CONTROLS]
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; valid: {BASELINES + CONTROLS}")
    if model.training:
        raise ValueError("the classifier is in training mode: call .eval() first")
    if any(isinstance(m, nn.ReLU) and m.inplace for m in model.modules()):
        raise ValueError("GuidedBackprop needs non-in-place nn.ReLU modules (Captum PR #837); the model has "
                         "nn.ReLU(inplace=True)")
    if isinstance(target, Tensor):
        target = target.tolist()
    x = inputs.detach().clone().requires_grad_(True)  # Captum asks for inputs that require grad
    out: dict[str, Tensor] = {}
    for m in methods:
        if m == "saliency":
            a = Saliency(model).attribute(x, target=target, abs=True)
        elif m == "guided_backprop":
            a = GuidedBackprop(model).attribute(x, target=target)
        elif m == "integrated_gradients":
            a = IntegratedGradients(model).attribute(x, baselines=torch.zeros_like(x), target=target,
                                                     n_steps=ig_steps, internal_batch_size=internal_batch_size)
        elif m == "random":
            g = torch.Generator().manual_seed(seed)
            a = torch.rand(x.shape, generator=g)
        else:  # centre: 1 / (1 + distance to the centre)
            h, w = x.shape[-2:]
            r = torch.arange(h, dtype=torch.float32)[:, None] - (h - 1) / 2
            c = torch.arange(w, dtype=torch.float32)[None, :] - (w - 1) / 2
            a = (1.0 / (1.0 + (r * r + c * c).sqrt())).expand(x.shape)
        out[m] = a.detach().abs().mean(1)
    return out
