"""Faithfulness measures of 2-D attribution maps against a known relevant region, all batched over images.

* matched-area IoU (the paper's ``calc_iou``): keep the map's ``k`` highest pixels, ``k`` = the mask's area, and
  take ``|top_k & mask| / |top_k | mask|``; ties are broken by pixel index (row-major, lower first);
* pointing game (Zhang et al., 2016): the map's highest pixel (the first, row-major) lies in the mask grown by
  ``tolerance`` pixels (Chebyshev distance);
* deletion / insertion AUC (Petsiuk et al., 2018): pixels removed from the image (set to ``fill``) or inserted into
  an image of ``fill`` in the map's order, ``steps`` equal slices; the area under the target's prediction curve,
  the trapezoid rule over the ``steps + 1`` points on [0, 1] (deletion: lower is better; insertion: higher);
* rank correlation of two maps (Spearman, average ranks for ties): the randomisation sanity checks.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["deletion_insertion", "matched_iou", "pointing_game", "rank_correlation"]


def _order(maps: Tensor) -> Tensor:
    """(B, H*W) pixel indices from the highest value down; equal values in increasing index order."""
    flat = maps.flatten(1)
    return torch.sort(flat, dim=1, descending=True, stable=True).indices


def matched_iou(maps: Tensor, masks: Tensor) -> Tensor:
    """(B,) IoU of the top-``|mask|`` pixels of ``maps`` (B, H, W) with ``masks`` (B, H, W) bool."""
    _check_maps(maps, masks)
    flat = masks.flatten(1)
    k = flat.sum(1)  # (B,) the mask's area
    rank = torch.empty_like(flat, dtype=torch.long)
    order = _order(maps)
    rank.scatter_(1, order, torch.arange(order.shape[1]).expand_as(order))  # rank of every pixel
    top = rank < k[:, None]  # (B, H*W) the k highest
    inter = (top & flat).sum(1)
    union = (top | flat).sum(1)
    return torch.where(union > 0, inter / union.clamp(min=1), torch.zeros_like(inter, dtype=torch.float))


def pointing_game(maps: Tensor, masks: Tensor, tolerance: int = 1) -> Tensor:
    """(B,) bool: the map's maximum lies within ``tolerance`` pixels of the mask."""
    _check_maps(maps, masks)
    if type(tolerance) is not int or tolerance < 0:
        raise ValueError(f"tolerance must be an int >= 0 (pixels), got {tolerance!r}")
    grown = F.max_pool2d(masks[:, None].float(), 2 * tolerance + 1, 1, tolerance)[:, 0] > 0  # dilated mask
    top = _order(maps)[:, 0]  # (B,) the highest pixel
    return grown.flatten(1).gather(1, top[:, None])[:, 0]


@torch.no_grad()
def deletion_insertion(predict: Callable[[Tensor, Tensor], Tensor], images: Tensor, maps: Tensor, steps: int = 16,
                       fill: float = 0.0, chunk: int = 4096) -> tuple[Tensor, Tensor]:
    """``(deletion AUC (B,), insertion AUC (B,))``; ``predict(images, rows) -> (N,)`` the target's prediction for
    ``N`` images (B * (steps + 1) of them, in chunks of ``chunk``) made from the images ``rows`` (N,) of the batch;
    ``images`` (B, C, H, W), ``maps`` (B, H, W)."""
    if images.dim() != 4 or maps.shape != (images.shape[0], *images.shape[2:]):
        raise ValueError(f"images must be (B, C, H, W) and maps (B, H, W) of the same B, H, W; got "
                         f"{tuple(images.shape)} and {tuple(maps.shape)}")
    if type(steps) is not int or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    b, c, h, w = images.shape
    n = h * w
    rank = torch.empty(b, n, dtype=torch.long)
    order = _order(maps)
    rank.scatter_(1, order, torch.arange(n).expand_as(order))
    counts = torch.round(torch.linspace(0, n, steps + 1)).long()  # pixels changed at each point
    changed = rank[:, None] < counts[None, :, None]  # (B, S+1, H*W)
    changed = changed.view(b, steps + 1, 1, h, w)
    x = images[:, None]  # (B, 1, C, H, W)
    filled = torch.full_like(x, fill)
    curves = []
    for seq in (torch.where(changed, filled, x), torch.where(changed, x, filled)):  # deletion, insertion
        flat = seq.expand(b, steps + 1, c, h, w).reshape(-1, c, h, w)
        rows = torch.arange(b).repeat_interleave(steps + 1)
        p = torch.cat([predict(part, r) for part, r in zip(flat.split(chunk), rows.split(chunk), strict=True)])
        p = p.view(b, steps + 1)
        curves.append(torch.trapezoid(p, dx=1.0 / steps, dim=1))  # area under the curve on [0, 1]
    return curves[0], curves[1]


def rank_correlation(a: Tensor, b: Tensor) -> Tensor:
    """(B,) Spearman correlation of maps ``a`` and ``b`` (B, H, W) per image (average ranks for ties; 0 where a map
    is constant)."""
    from scipy.stats import rankdata

    if a.shape != b.shape or a.dim() < 2:
        raise ValueError(f"maps must have the same shape (B, H, W), got {tuple(a.shape)} and {tuple(b.shape)}")
    ra = torch.from_numpy(rankdata(a.flatten(1).double().numpy(), axis=1))
    rb = torch.from_numpy(rankdata(b.flatten(1).double().numpy(), axis=1))
    ra, rb = ra - ra.mean(1, keepdim=True), rb - rb.mean(1, keepdim=True)
    den = (ra.square().sum(1) * rb.square().sum(1)).sqrt()
    return torch.where(den > 0, (ra * rb).sum(1) / den.clamp(min=1e-300), torch.zeros_like(den)).float()


# ----------------------------------------------------------------------------------------------------- checks
def _check_maps(maps: Tensor, masks: Tensor) -> None:
    if maps.dim() != 3 or masks.shape != maps.shape or masks.dtype != torch.bool:
        raise ValueError(f"maps must be (B, H, W) and masks bool of the same shape, got {tuple(maps.shape)} and "
                         f"{masks.dtype} {tuple(masks.shape)}")
