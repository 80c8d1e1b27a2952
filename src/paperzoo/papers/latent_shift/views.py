"""What a person looks at: the counterfactual path as a GIF or MP4, and a PNG panel of maps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["save_animation", "save_panel"]


def _rgb(x: Tensor, scale: int) -> Tensor:
    """(B, C, H, W) in [0, 1] -> (B, H*scale, W*scale, 3)."""
    x = x.float().clamp(0, 1)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    return F.interpolate(x, scale_factor=scale, mode="nearest").permute(0, 2, 3, 1)


def save_animation(inputs: Tensor, frames: Tensor, path: str | Path, scale: int = 4, fps: int = 8) -> Path:
    """A GIF or MP4 (by ``path``'s suffix): one row per image, the input beside x_lambda and |x_lambda - x_0|
    (x4 for visibility), the path played forward (lambda 0 to the stopping lambda) and back.

    ``inputs`` (B, C, H, W), ``frames`` (B, F, C, H, W) from :class:`LatentShiftResult` (frame 0 = x_0).
    """
    from paperzoo.papers.nerf.views import write_video

    if frames.dim() != 5 or inputs.shape != (frames.shape[0], *frames.shape[2:]):
        raise ValueError(f"save_animation: expected inputs (B, C, H, W) and frames (B, F, C, H, W), got "
                         f"{tuple(inputs.shape)} and {tuple(frames.shape)}")
    b, f = frames.shape[:2]
    order = list(range(f)) + list(range(f - 2, 0, -1))  # forward and back, without repeating the ends
    rows = []
    for i in order:
        x = frames[:, i]
        diff = ((x - frames[:, 0]).abs() * 4).clamp(0, 1)
        row = torch.cat([_rgb(inputs, scale), _rgb(x, scale), _rgb(diff, scale)], 2)  # (B, h, 3w, 3)
        rows.append(row.reshape(-1, *row.shape[2:]))  # (B*h, 3w, 3)
    return write_video(torch.stack(rows), path, fps=fps)


def save_panel(inputs: Tensor, masks: Tensor | None, counterfactuals: Tensor, maps: Mapping[str, Tensor],
               path: str | Path, titles: Sequence[str] | None = None) -> Path:
    """A PNG, one row per image: the input (mask outlined in red), the counterfactual, then each map (normalised
    per image)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = inputs.shape[0]
    cols = ["input", "counterfactual", *maps]
    fig, axes = plt.subplots(b, len(cols), figsize=(1.6 * len(cols), 1.7 * b), squeeze=False)
    for r in range(b):
        for c, name in enumerate(cols):
            ax = axes[r, c]
            if name == "input":
                ax.imshow(inputs[r, 0].float(), cmap="gray", vmin=0, vmax=1)
                if masks is not None and masks[r].any():
                    ax.contour(masks[r].float().numpy(), levels=[0.5], colors="red", linewidths=0.8)
            elif name == "counterfactual":
                ax.imshow(counterfactuals[r, 0].float(), cmap="gray", vmin=0, vmax=1)
            else:
                m = maps[name][r].float()
                ax.imshow(m / m.max().clamp(min=1e-12), cmap="magma", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(name.replace("_", " "), fontsize=7)
        if titles is not None:
            axes[r, 0].set_ylabel(titles[r], fontsize=6)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
