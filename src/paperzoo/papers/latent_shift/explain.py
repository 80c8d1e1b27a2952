"""Latent Shift (Cohen et al., 2021): counterfactuals by moving an image's autoencoder latent along the gradient of the
classifier's prediction, and the 2-D attribution map they give.

    z = E(x),  x_0 = D(z),  p(x) = sigmoid(f(x)[target])      (f outputs logits; no sigmoid when it outputs probs)
    g = dp(D(z)) / dz                                          the gradient on the reconstruction, computed once
    x_lambda = D(z + lambda g),  lambda <= 0                   lower the prediction (lambda >= 0: raise it)

The search for the stopping lambda decodes a whole grid of lambdas for the whole batch (in chunks of
``internal_batch_size`` latents) and applies every stopping rule to the (batch, grid) predictions at once; the
frames from lambda = 0 to the stopping lambda are then decoded in one more call. No Python loop runs per image,
lambda or frame.

Calling convention as Captum's: ``LatentShift(forward_func, autoencoder).attribute(inputs, target=...)``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["GIFSPLANATION", "LATENTSHIFT", "MAPS", "PAPER", "RULES", "LatentShift", "LatentShiftResult",
           "lambda_grid", "shift_map"]

MAPS = ("max", "last", "int")
RULES = ("drop", "drop_abs", "min_pred", "rise", "pixel_change", "max_lambda")
OUTPUTS = ("auto", "logits", "probs")

# Stopping rules (keyword arguments of LatentShift.attribute) of the paper and of the two official repositories.
PAPER = {"search": "gifsplanation", "drop": 0.3, "drop_abs": None, "stop_on_rise": True, "max_pixel_change": None,
         "max_lambda": 1000.0, "min_pred": None, "map": "max"}
GIFSPLANATION = {"search": "gifsplanation", "drop": None, "drop_abs": 0.15, "stop_on_rise": True,
                 "max_pixel_change": None, "max_lambda": 1000.0, "min_pred": None, "map": "last"}
LATENTSHIFT = {"search": "latentshift", "drop": None, "drop_abs": 0.8, "stop_on_rise": True, "max_pixel_change": 0.05,
               "max_lambda": 3000.0, "min_pred": 0.05, "map": "int"}


def lambda_grid(search: str | Sequence[float] | Tensor, max_lambda: float) -> Tensor:
    """The magnitudes |lambda| the search visits, from 0 up to ``max_lambda`` (its last entry: the limit).

    ``"gifsplanation"``: steps of 1 up to 10, then of 10 (mlmed/gifsplanation); ``"latentshift"``:
    ``|lambda| <- |lambda| + 10 + ceil(|lambda| / 10)`` (ieee8023/latentshift's ``lambda - 10 + lambda // 10``);
    or increasing magnitudes given explicitly (0 is prepended when missing).
    """
    if not (isinstance(max_lambda, int | float) and math.isfinite(max_lambda) and max_lambda > 0):
        raise ValueError(f"max_lambda must be a finite number > 0, got {max_lambda!r}")
    if isinstance(search, str):
        if search == "gifsplanation":
            m = [float(i) for i in range(0, 10)] + [float(v) for v in range(10, int(max_lambda) + 10, 10)]
        elif search == "latentshift":
            m, v = [], 0.0
            while v < max_lambda:
                m.append(v)
                v = v + 10.0 + math.ceil(v / 10.0)
        else:
            raise ValueError(f"search must be 'gifsplanation', 'latentshift' or a sequence of magnitudes, got "
                             f"{search!r}")
        grid = torch.tensor([x for x in m if x < max_lambda] + [float(max_lambda)], dtype=torch.float64)
    else:
        grid = torch.as_tensor(search, dtype=torch.float64).flatten()
        if grid.numel() == 0 or not torch.isfinite(grid).all() or (grid < 0).any() or (grid.diff() <= 0).any():
            raise ValueError("search: expected strictly increasing, finite magnitudes >= 0")
        if grid[0] != 0:
            grid = torch.cat([grid.new_zeros(1), grid])
        grid = grid[grid <= max_lambda]
    return grid


@dataclass
class LatentShiftResult:
    """What :meth:`LatentShift.attribute` returns, for a batch of B images (C, H, W), F frames, K grid lambdas.

    ``frames`` (B, F, C, H, W): x_lambda from lambda = 0 (the reconstruction) to the stopping lambda;
    ``lambdas`` (B, F) and ``preds`` (B, F) along them; ``map`` (B, H, W) the 2-D attribution map;
    ``reconstruction`` (B, C, H, W) = D(E(x)); ``recon_error`` (B,) mean |x - D(E(x))|;
    ``stop_lambda`` (B,); ``rule`` the rule that stopped each search (one of :data:`RULES`); ``reached`` (B,) bool:
    whether the target change was reached; ``search_lambdas`` (K,) and ``search_preds`` (B, K) the grid (NaN
    past an image's stop when the search exited early);
    ``output`` how the classifier's outputs were read ("logits" or "probs").
    """

    frames: Tensor
    lambdas: Tensor
    preds: Tensor
    map: Tensor
    reconstruction: Tensor
    recon_error: Tensor
    stop_lambda: Tensor
    rule: list[str]
    reached: Tensor
    search_lambdas: Tensor
    search_preds: Tensor
    output: str

    @property
    def counterfactual(self) -> Tensor:
        """(B, C, H, W): the frame at the stopping lambda."""
        return self.frames[:, -1]


class LatentShift:
    """``LatentShift(forward_func, autoencoder)``: ``forward_func(x) -> (batch, outputs)`` (an ``nn.Module`` in eval
    mode or any callable), ``autoencoder`` with ``encode(x) -> z`` and ``decode(z) -> x`` (and optionally
    ``input_range = (lo, hi)``, checked against the inputs)."""

    def __init__(self, forward_func: Callable[[Tensor], Tensor], autoencoder) -> None:
        if not callable(forward_func):
            raise ValueError(f"forward_func must be callable (the classifier), got {type(forward_func).__name__}")
        if not (callable(getattr(autoencoder, "encode", None)) and callable(getattr(autoencoder, "decode", None))):
            raise ValueError("autoencoder must have encode(x) -> z and decode(z) -> x methods")
        self.forward_func = forward_func
        self.ae = autoencoder

    def attribute(self, inputs: Tensor, target: int | Sequence[int] | Tensor | Callable[[Tensor], Tensor], *,
                  search: str | Sequence[float] | Tensor = "gifsplanation", drop: float | None = 0.3,
                  drop_abs: float | None = None, stop_on_rise: bool = True, max_pixel_change: float | None = None,
                  max_lambda: float = 1000.0, min_pred: float | None = None, direction: str = "lower",
                  frames: int = 10, map: str = "max", output: str = "auto",
                  internal_batch_size: int | None = None, early_exit: bool = True,
                  latent_direction: Tensor | None = None,
                  input_range: tuple[float, float] | None = None) -> LatentShiftResult:
        """Explain ``inputs`` (B, C, H, W) for ``target``: an output index, one index per image, or a callable
        ``target(outputs) -> (B,)`` picking the score from the classifier's outputs.

        Search (see :func:`lambda_grid`) over ``|lambda|`` in ``search`` up to ``max_lambda``; the first grid
        lambda at which a rule fires stops it:

        * ``drop``: the prediction fell by this fraction of its value on the reconstruction (paper: 0.3);
        * ``drop_abs``: by this absolute amount (gifsplanation 0.15, latentshift 0.8);
        * ``min_pred``: the prediction fell below this (latentshift 0.05; above ``1 - min_pred`` when raising);
        * ``stop_on_rise``: the prediction stopped decreasing (stops at the previous grid lambda, the lowest one);
        * ``max_pixel_change``: ``sum |x_0 - x_lambda| > max_pixel_change * sum |x_0|`` (latentshift 0.05;
          stops at the previous grid lambda, the last one within the cap);
        * otherwise the search ends at ``max_lambda``.

        ``direction`` "lower" (lambda <= 0, the paper) or "raise". ``frames`` (>= 2) evenly spaced lambdas from 0
        to the stopping lambda. ``map``: "max" (paper: max over frames of |x_lambda - x_0|), "last" (gifsplanation:
        |x_0 - x_stop|), "int" (latentshift: mean of |differences of consecutive frames|); channels averaged.
        ``output``: "logits" (a sigmoid gives the prediction), "probs" (the outputs are probabilities: never
        squashed again) or "auto" (probabilities, with a warning, when every output on the reconstructions lies in
        [0, 1]; logits otherwise).
        ``internal_batch_size``: latents per decode call (None: all at once). ``early_exit``: the grid in blocks of
        16, 32, 64, ... lambdas, dropping the images whose search has stopped (the same result; ``False`` decodes
        the whole grid in one call). ``latent_direction`` (B, *z) replaces the gradient (a control). Presets of the
        keyword arguments: :data:`PAPER`, :data:`GIFSPLANATION`, :data:`LATENTSHIFT`.
        """
        _check_options(drop, drop_abs, min_pred, max_pixel_change, direction, frames, map, output,
                       internal_batch_size)
        _check_inputs(inputs, input_range or getattr(self.ae, "input_range", None))
        for name, m in (("forward_func", self.forward_func), ("autoencoder", self.ae)):
            if isinstance(m, nn.Module) and m.training:
                raise ValueError(f"{name} is in training mode: call .eval() first (BatchNorm would mix the batch "
                                 f"and the explanations would depend on it)")
        sign = -1.0 if direction == "lower" else 1.0
        grid = lambda_grid(search, max_lambda)  # (K,) magnitudes
        b = inputs.shape[0]

        # the gradient of the prediction on the reconstruction D(z), with respect to z, once
        with torch.enable_grad():
            z = self.ae.encode(inputs).detach().requires_grad_(True)  # (B, *z)
            x0 = self.ae.decode(z)  # (B, C, H, W)
            _check_decoded(x0, inputs)
            out0 = self.forward_func(x0)
            output = _resolve_output(out0, output)
            score = _scorer(target, out0, b, output)
            p0 = score(out0)  # (B,)
            g = torch.autograd.grad(p0.sum(), z)[0] if latent_direction is None else latent_direction
        if g.shape != z.shape:
            raise ValueError(f"latent_direction must have the latent's shape {tuple(z.shape)}, got {tuple(g.shape)}")
        z, x0, p0, g = z.detach(), x0.detach(), p0.detach(), g.detach()

        # the grid: (B, K) predictions and pixel changes from batched decodes, in blocks of grid lambdas (16, 32, 64,
        # ... of them) when ``early_exit``: images whose search has stopped leave the next block
        lam = (sign * grid).to(z.dtype)  # (K,)
        k = len(lam)
        preds = torch.full((b, k), math.nan, dtype=p0.dtype)
        pixels = torch.full((b, k), math.nan, dtype=x0.dtype)
        preds[:, 0], pixels[:, 0] = p0, 0.0  # lambda 0 is the reconstruction itself
        pixel_sum = x0.abs().flatten(1).sum(1)  # (B,)
        rules = (sign, drop, drop_abs, min_pred, stop_on_rise, max_pixel_change)
        bounds = [1, k] if not early_exit else [1] + [min(k, 1 + 16 * (2 ** i - 1)) for i in range(1, 20)
                                                      if 1 + 16 * (2 ** (i - 1) - 1) < k]
        active = torch.arange(b)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            cols = torch.arange(lo, hi)
            p, pix = self._shift(z[active], g[active], x0[active], lam[cols].expand(len(active), hi - lo), score,
                                 active, internal_batch_size)  # (A, hi - lo) each
            preds[active[:, None], cols] = p
            pixels[active[:, None], cols] = pix
            if hi < k:  # keep the images on which no rule fired yet
                fires, _, _ = _fires(preds[active, :hi], pixels[active, :hi], pixel_sum[active], *rules)
                active = active[~fires.any(0).any(1)]
                if len(active) == 0:
                    break
        stop, rule, reached = _stop(preds, pixels, pixel_sum, *rules)  # (B,), list, (B,)
        stop_lambda = lam[stop]  # (B,)

        # the frames: lambda = 0 ... stop_lambda, decoded in one call; frame 0 is x_0 itself
        t = torch.linspace(0.0, 1.0, frames, dtype=z.dtype)  # (F,)
        frame_lams = stop_lambda[:, None] * t[None]  # (B, F)
        imgs, fpreds = self._decode_frames(z, g, frame_lams[:, 1:], score, internal_batch_size)
        imgs = torch.cat([x0[:, None], imgs], 1)  # (B, F, C, H, W)
        fpreds = torch.cat([p0[:, None], fpreds], 1)  # (B, F)
        return LatentShiftResult(
            frames=imgs, lambdas=frame_lams, preds=fpreds, map=shift_map(imgs, map), reconstruction=x0,
            recon_error=(inputs.detach() - x0).abs().flatten(1).mean(1), stop_lambda=stop_lambda, rule=rule,
            reached=reached, search_lambdas=lam, search_preds=preds, output=output)

    # ----------------------------------------------------------------------------------------------- batched decodes
    @torch.no_grad()
    def _decode(self, z: Tensor, g: Tensor, lams: Tensor, chunk: int | None) -> Tensor:
        """D(z_b + lambda_bj g_b) for every (b, j): (B * J, C, H, W), J = lams.shape[1], in chunks of latents."""
        b, j = lams.shape
        zs = (z[:, None] + lams.reshape(b, j, *([1] * (z.dim() - 1))) * g[:, None]).flatten(0, 1)  # (B*J, *z)
        if chunk is None or chunk >= len(zs):
            return self.ae.decode(zs)
        return torch.cat([self.ae.decode(part) for part in zs.split(chunk)])

    @torch.no_grad()
    def _shift(self, z, g, x0, lams, score, rows, chunk) -> tuple[Tensor, Tensor]:
        """Predictions and total pixel change ``sum |x_0 - x_lambda|`` at ``lams`` (A, J) for the images ``rows``
        (A,) of the batch (``z``, ``g``, ``x0`` already those rows): two (A, J) tensors."""
        a, j = lams.shape
        per = a if chunk is None else max(1, chunk // j)  # whole images' grids per decode call
        ps, pix = [], []
        for lo in range(0, a, per):
            sl = slice(lo, lo + per)
            x = self._decode(z[sl], g[sl], lams[sl], chunk)  # (n * J, C, H, W)
            n = x.shape[0] // j
            ps.append(score(self.forward_func(x), repeat=j, rows=rows[sl]).view(n, j))
            pix.append((x.view(n, j, -1) - x0[sl].flatten(1)[:, None]).abs().sum(-1))
        return torch.cat(ps), torch.cat(pix)

    @torch.no_grad()
    def _decode_frames(self, z, g, lams, score, chunk) -> tuple[Tensor, Tensor]:
        b, j = lams.shape
        x = self._decode(z, g, lams, chunk)  # (B*J, C, H, W)
        p = torch.cat([score(self.forward_func(part), repeat=j, rows=torch.arange(i // j, (i + len(part)) // j))
                       for i, part in _aligned_chunks(x, j, chunk)])
        return x.view(b, j, *x.shape[1:]), p.view(b, j)


def shift_map(frames: Tensor, kind: str = "max") -> Tensor:
    """The 2-D map (B, H, W) from frames (B, F, C, H, W) whose frame 0 is the reconstruction x_0.

    ``max`` = max_f |x_f - x_0| (the paper); ``last`` = |x_0 - x_{F-1}| (gifsplanation); ``int`` =
    mean_f |x_{f+1} - x_f| (latentshift); the channel axis is averaged.
    """
    if kind == "max":
        m = (frames - frames[:, :1]).abs().amax(1)  # (B, C, H, W)
    elif kind == "last":
        m = (frames[:, -1] - frames[:, 0]).abs()
    elif kind == "int":
        m = frames.diff(dim=1).abs().mean(1)
    else:
        raise ValueError(f"map must be one of {MAPS}, got {kind!r}")
    return m.mean(1)


# --------------------------------------------------------------------------------------------------------- helpers
def _aligned_chunks(x: Tensor, j: int, chunk: int | None):
    """(start, part) chunks of ``x`` holding whole groups of ``j`` rows (one image's frames)."""
    step = len(x) if chunk is None else max(j, chunk - chunk % j)
    for i in range(0, len(x), step):
        yield i, x[i:i + step]


def _resolve_output(out: Tensor, output: str) -> str:
    if not isinstance(out, Tensor) or not out.is_floating_point():
        raise ValueError(f"forward_func must return a float tensor, got {type(out).__name__}")
    out = out.detach()
    inside = bool(((out >= 0) & (out <= 1)).all())
    if output == "auto":
        if inside:
            warnings.warn("LatentShift: every classifier output lies in [0, 1], so they are read as probabilities "
                          "(no sigmoid); pass output='logits' or output='probs' to say which", stacklevel=3)
        return "probs" if inside else "logits"
    if output == "probs" and not inside:
        raise ValueError(f"output='probs' but the classifier returned values in [{float(out.min()):.4g}, "
                         f"{float(out.max()):.4g}], outside [0, 1]: these are logits (use output='logits')")
    return output


def _scorer(target, out: Tensor, b: int, output: str):
    """``score(outputs, repeat=1, rows=slice) -> (rows * repeat,)`` the prediction of the target per row."""
    squash = torch.sigmoid if output == "logits" else (lambda v: v)
    if callable(target) and not isinstance(target, Tensor):
        def score(o, repeat=1, rows=None):
            s = target(o)
            if not isinstance(s, Tensor) or s.shape != (o.shape[0],):
                raise ValueError(f"a callable target must return one score per image, shape ({o.shape[0]},), got "
                                 f"{getattr(s, 'shape', type(s).__name__)}")
            return squash(s)
        return score
    if out.dim() != 2:
        raise ValueError(f"an integer target needs classifier outputs (batch, outputs), got {tuple(out.shape)}; "
                         f"pass a callable target for other shapes")
    n = out.shape[1]
    idx = torch.as_tensor(target, dtype=torch.long)
    if idx.dim() == 0:
        idx = idx.expand(b)
    if idx.shape != (b,) or (isinstance(target, Tensor) and target.is_floating_point()):
        raise ValueError(f"target must be an int, one int per image (shape ({b},)) or a callable, got "
                         f"{target!r}")
    if (idx < 0).any() or (idx >= n).any():
        bad = int(idx[(idx < 0) | (idx >= n)][0])
        raise ValueError(f"target {bad} is not an output of the classifier: it has {n} outputs (targets 0..{n - 1})")

    def score(o, repeat=1, rows=None):
        i = idx if rows is None else idx[rows]
        return squash(o.gather(1, i.repeat_interleave(repeat)[:, None])[:, 0])
    return score


def _fires(preds: Tensor, pixels: Tensor, pixel_sum: Tensor, sign: float, drop, drop_abs, min_pred, stop_on_rise,
           max_pixel_change) -> tuple[Tensor, list[str], dict[str, Tensor]]:
    """``(fires (R, B, K) bool, rule names in priority order, the goal rules' (B, K) masks)``: where each rule fires
    on the grid (never at lambda 0; NaN, a grid point not evaluated, fires nothing)."""
    p0 = preds[:, :1]
    progress = sign * (preds - p0)  # how far the prediction moved the asked way: p_0 - p when lowering
    false = torch.zeros_like(preds, dtype=torch.bool)
    goal = {"drop": progress >= drop * p0.abs() if drop is not None else false,  # p0 - p >= drop p0
            "drop_abs": progress >= drop_abs if drop_abs is not None else false,  # p0 - p >= drop_abs
            "min_pred": ((preds < min_pred) if sign < 0 else (preds > 1 - min_pred)) if min_pred is not None
            else false}
    back = {"rise": torch.cat([false[:, :1], progress.diff(dim=1) < 0], 1) if stop_on_rise else false,
            "pixel_change": pixels > max_pixel_change * pixel_sum[:, None] if max_pixel_change is not None
            else false}
    fires = torch.stack(list(goal.values()) + list(back.values()))  # (R, B, K)
    fires[:, :, 0] = False  # lambda 0 never stops
    return fires, list(goal) + list(back), goal


def _stop(preds: Tensor, pixels: Tensor, pixel_sum: Tensor, sign: float, drop, drop_abs, min_pred, stop_on_rise,
          max_pixel_change) -> tuple[Tensor, list[str], Tensor]:
    """The stopping grid index per image (the first index at which a rule fires; rise and pixel_change stop one
    index earlier), its rule, and whether the target change was reached there; all rules on the grid at once."""
    b, k = preds.shape
    fires, names, goal = _fires(preds, pixels, pixel_sum, sign, drop, drop_abs, min_pred, stop_on_rise,
                                max_pixel_change)
    any_rule = fires.any(0)  # (B, K)
    hit = any_rule.any(1)  # (B,)
    first = torch.where(hit, any_rule.int().argmax(1), torch.full((b,), k - 1))  # first firing index, else the end
    rows = torch.arange(b)
    which = fires[:, rows, first].int().argmax(0)  # (B,) the first rule (in priority order) firing there
    stop = torch.where(hit & (which >= len(goal)), first - 1, first)
    rule = [names[w] if h else "max_lambda" for w, h in zip(which.tolist(), hit.tolist(), strict=True)]
    want = [goal[n] for n in ("drop", "drop_abs") if (drop if n == "drop" else drop_abs) is not None] or \
        ([goal["min_pred"]] if min_pred is not None else [])
    reached = torch.stack(want).any(0)[rows, stop] if want else torch.zeros(b, dtype=torch.bool)
    return stop, rule, reached


# ----------------------------------------------------------------------------------------------------------- checks
def _check_options(drop, drop_abs, min_pred, max_pixel_change, direction, frames, map, output, chunk) -> None:
    for name, v, lo, hi in (("drop", drop, 0.0, 1.0), ("drop_abs", drop_abs, 0.0, math.inf),
                            ("min_pred", min_pred, 0.0, 1.0), ("max_pixel_change", max_pixel_change, 0.0, math.inf)):
        if v is not None and not (isinstance(v, int | float) and lo < v <= hi):
            raise ValueError(f"{name} must be None or a number in ({lo}, {hi}], got {v!r}")
    if direction not in ("lower", "raise"):
        raise ValueError(f"direction must be 'lower' (lambda <= 0, the paper) or 'raise', got {direction!r}")
    if type(frames) is not int or frames < 2:
        raise ValueError(f"frames must be an int >= 2 (lambda 0 and the stopping lambda at least), got {frames!r}")
    if map not in MAPS:
        raise ValueError(f"map must be one of {MAPS}, got {map!r}")
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    if chunk is not None and (type(chunk) is not int or chunk < 1):
        raise ValueError(f"internal_batch_size must be None or a positive int, got {chunk!r}")


def _check_inputs(x: Tensor, rng: tuple[float, float] | None) -> None:
    if not isinstance(x, Tensor) or x.dim() < 2 or not x.is_floating_point() or x.shape[0] < 1:
        got = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"inputs must be a float tensor (batch, C, H, W), got {got}")
    if rng is not None:
        lo, hi = rng
        if float(x.min()) < lo or float(x.max()) > hi:
            raise ValueError(f"inputs lie in [{float(x.min()):.4g}, {float(x.max()):.4g}], outside the "
                             f"autoencoder's input range [{lo}, {hi}]: scale them as it was trained")


def _check_decoded(x0: Tensor, x: Tensor) -> None:
    if not isinstance(x0, Tensor) or x0.shape != x.shape:
        got = tuple(x0.shape) if isinstance(x0, Tensor) else type(x0).__name__
        raise ValueError(f"the autoencoder's decode(encode(x)) has shape {got}, expected the input's shape "
                         f"{tuple(x.shape)}")
