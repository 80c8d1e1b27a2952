"""VATT's objective (sec. 3.4): NCE between video and audio, MIL-NCE between video and several candidate captions.

With L2-normalised embeddings ``x_i`` (video, in the common space) and candidates ``y_i^1..y_i^K`` (audio: K = 1;
captions: K of them), ``s(x, y) = x . y / tau``, tau = 0.07, the official ``AsymmetricNCE`` loss of sample i is::

    L_i = - log  sum_k exp s(x_i, y_i^k)
                 / sum_{j,k} [ exp s(x_i, y_j^k) + exp s(x_j, y_i^k) ]

(MIL-NCE, Miech et al. 2020: the positive is the log-sum-exp over the candidates). Both directions (x_i against
every y, every x against y_i's candidates) share **one** softmax denominator, so the positive pairs appear in it
twice; ``symmetric=True`` is the usual InfoNCE instead, the mean of the two directions each with its own softmax.
Negatives come from every rank (a gradient-preserving all-gather: :func:`all_gather_with_grad`); each rank's loss
is the mean over its own samples, so the mean over ranks (DDP's gradient average) is the loss of the whole batch.
``valid`` (B,) masks samples without the modality (the official code's -1e9): they are neither queries nor negatives.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from paperzoo.train.distributed import all_gather_with_grad

from .model import VATTOutput

__all__ = ["VATTLoss", "all_gather_with_grad", "mil_nce_loss", "nce_loss"]


def mil_nce_loss(x: Tensor, y: Tensor, temperature: float = 0.07, symmetric: bool = False,
                 valid: Tensor | None = None, gather: bool = True) -> Tensor:
    """MIL-NCE of embeddings ``x`` (B, D) and candidates ``y`` (B, K, D) (both L2-normalised here); a scalar.

    ``gather``: negatives from every rank when a process group is initialised (this rank's samples are the queries).
    """
    _check(x, y, temperature, valid)
    x, y = (F.normalize(t.float() if t.dtype in (torch.float16, torch.bfloat16) else t, dim=-1) for t in (x, y))
    b = x.shape[0]
    valid = torch.ones(b, dtype=torch.bool, device=x.device) if valid is None else valid.bool()
    xa, ya, va = (all_gather_with_grad(t) if gather else t for t in (x, y, valid))
    offset = dist.get_rank() * b if gather and dist.is_available() and dist.is_initialized() else 0
    s_xy = torch.einsum("bd,cnd->bcn", x, ya) / temperature  # s(x_i, y_j^k): (B, B_all, K)
    s_yx = torch.einsum("cd,bnd->bcn", xa, y) / temperature  # s(x_j, y_i^k): (B, B_all, K)
    neg_off = ~va[None, :, None]  # invalid samples are no negatives (-1e9 as the official code: finite gradients)
    s_xy, s_yx = s_xy.masked_fill(neg_off, -1e9), s_yx.masked_fill(neg_off, -1e9)
    rows = torch.arange(b, device=x.device)
    pos = torch.logsumexp(s_xy[rows, offset + rows], dim=-1)  # log sum_k exp s(x_i, y_i^k): (B,)
    if symmetric:  # two softmaxes, averaged
        loss = 0.5 * (torch.logsumexp(s_xy.flatten(1), -1) + torch.logsumexp(s_yx.flatten(1), -1)) - pos
    else:  # one softmax over both directions (AsymmetricNCE)
        loss = torch.logsumexp(torch.cat([s_xy.flatten(1), s_yx.flatten(1)], 1), -1) - pos
    loss = loss.masked_fill(~valid, 0.0)
    return loss.sum() / valid.sum().clamp_min(1)


def nce_loss(x: Tensor, y: Tensor, temperature: float = 0.07, symmetric: bool = False,
             valid: Tensor | None = None, gather: bool = True) -> Tensor:
    """NCE of paired embeddings ``x`` (B, D) and ``y`` (B, D): MIL-NCE with one candidate."""
    if not isinstance(y, Tensor) or y.ndim != 2:
        raise ValueError(f"y must have shape (batch, dim), got {tuple(getattr(y, 'shape', ()))}")
    return mil_nce_loss(x, y[:, None], temperature, symmetric, valid, gather)


class VATTLoss(nn.Module):
    """``w_va * NCE(video_va, audio_va) + w_vt * MIL-NCE(video_vt, text_vt)`` (the paper's weights 1 and 1; the
    official audio-text weight is 0, so that pair is not built). Returns ``(loss, {"nce_va", "milnce_vt"})``."""

    def __init__(self, temperature: float = 0.07, w_va: float = 1.0, w_vt: float = 1.0, symmetric: bool = False):
        super().__init__()
        self.temperature, self.w_va, self.w_vt, self.symmetric = temperature, w_va, w_vt, symmetric

    def forward(self, out: VATTOutput, text_valid: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor]]:
        va = nce_loss(out.video_va, out.audio_va, self.temperature, self.symmetric)
        vt = mil_nce_loss(out.video_vt, out.text_vt, self.temperature, self.symmetric, valid=text_valid)
        return self.w_va * va + self.w_vt * vt, {"nce_va": va.detach(), "milnce_vt": vt.detach()}


def _check(x: Tensor, y: Tensor, temperature: float, valid: Tensor | None) -> None:
    if not isinstance(x, Tensor) or x.ndim != 2 or not x.is_floating_point():
        raise ValueError(f"x must be a float tensor (batch, dim), got {getattr(x, 'dtype', type(x))} "
                         f"{tuple(getattr(x, 'shape', ()))}")
    if not isinstance(y, Tensor) or y.ndim != 3 or y.shape[0] != x.shape[0] or y.shape[2] != x.shape[1]:
        raise ValueError(f"y must have shape (batch={x.shape[0]}, candidates, dim={x.shape[1]}), got "
                         f"{tuple(getattr(y, 'shape', ()))}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if valid is not None and (valid.shape != (x.shape[0],)):
        raise ValueError(f"valid must have shape (batch={x.shape[0]},), got {tuple(valid.shape)}")
