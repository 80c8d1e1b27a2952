"""``paperzoo bench compile``: each model's training step compiled (``torch.compile``, inductor) vs eager.

Per model (the bench's own model, size and batch: our encoder, Funnel, Swin, the Switch layer, Perceiver,
MobileNetV2, NeRF, VATT, the modifications study's baseline LM, the ELECTRA pretrainer), in each precision of the
bench's passes (:mod:`paperzoo.bench.precision`: fp32, then bf16 autocast where the CPU computes it fast):

* ``compile_s``: the wall time of the first compiled step (tracing, the inductor's code generation for forward and
  backward, and the step itself), reported apart from the timings;
* graphs, graph breaks (with their reasons) and recompiles, from ``torch._dynamo``'s counters: ``graphs`` compiled
  by the first step, ``recompiles`` = graphs compiled after it (during the warm-up and the timed steps: a guard
  that failed, such as a changing shape), ``graph_breaks`` = the number of breaks dynamo took;
* after that warm-up, the step compiled (ours) against the same model eager (peer) interleaved:
  ``ratio = eager time / compiled time`` (> 1: compiling pays). The step is ``zero_grad``, the forward and its loss
  under the pass's autocast, and backward; no optimizer (the same for both). A bf16 pass does not re-time the
  step in fp32 in the same rounds, as the other benches do: switching autocast would recompile (a guard).

A model that fails to compile is reported in the meta (``failed``) with the error, not as a row. The latent-shift
and IWS benches time explanation and query loops, not a model's training step, and are not here.

Environment: ``PAPERZOO_BENCH_QUICK=1`` runs batches of 2 and short sequences (a smoke test);
``PAPERZOO_COMPILE_BACKEND`` picks another backend (tests use ``eager``: dynamo's tracing without code generation);
``PAPERZOO_COMPILE_CASES`` (comma-separated) selects cases.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch

from paperzoo.bench.precision import autocast, current, peak_gflops
from paperzoo.bench.results import BenchResult
from paperzoo.measure import count_flops, time_interleaved
from paperzoo.train.compiled import compile_model

__all__ = ["CASES", "compile_row", "run"]

Case = tuple[torch.nn.Module, Callable[[torch.nn.Module], torch.Tensor], str]


def _mean_square(out: Any) -> torch.Tensor:
    """A scalar loss of a model's main output: its mean square (in fp32)."""
    for name in ("last_hidden_state", "hidden_states", "logits"):
        if hasattr(out, name):
            out = getattr(out, name)
            break
    return out.float().square().mean()


def _encoder(b: int, t: int) -> Case:
    from paperzoo.bench.encoder import build_pair

    _, ours = build_pair()
    ids = torch.randint(0, 30522, (b, t), generator=torch.Generator().manual_seed(0))
    return ours, lambda m: _mean_square(m(input_ids=ids)), f"TextEncoder d 256, 4 layers, batch {b} x {t}"


def _funnel(b: int, t: int) -> Case:
    from paperzoo.bench.funnel import VOCAB, build_pair, inputs

    _, ours = build_pair("2-2")
    x = inputs(b, t, VOCAB)
    return ours, lambda m: _mean_square(m(**x)), f"Funnel 2-2 + 2 decoder layers, d 256, batch {b} x {t}, padded"


def _swin(b: int, t: int) -> Case:
    from paperzoo.bench.swin import CASES as SWIN
    from paperzoo.bench.swin import _pair

    _, ours = _pair(SWIN["small 64x64"])
    x = torch.randn(b, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    return ours.train(), lambda m: _mean_square(m(pixel_values=x)), f"Swin small 64x64, batch {b}"


def _switch(b: int, t: int) -> Case:
    from paperzoo.bench.switch import HIDDEN, D
    from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

    torch.manual_seed(0)
    moe = SwitchMoE(SwitchMoEConfig(dim=D, ffn_dim=HIDDEN, num_experts=8, jitter_eps=0.0)).train()
    x = torch.randn(b, t, D, generator=torch.Generator().manual_seed(0))

    def step(m):
        out = m(x)
        return _mean_square(out) + 0.01 * out.aux["balance_loss"] + 0.001 * out.aux["z_loss"]
    return moe, step, f"SwitchMoE 8 experts, d {D}, d_ff {HIDDEN}, {b} x {t} tokens, + balance and z losses"


def _perceiver(b: int, t: int) -> Case:
    from paperzoo.bench.perceiver import build_hf_pair

    _, ours = build_hf_pair(d_model=256)
    g = torch.Generator().manual_seed(3)
    t = 2048  # the model's positions
    ids = torch.randint(0, 262, (b, t), generator=g)
    labels = torch.where(torch.rand(b, t, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    mask = torch.ones(b, t, dtype=torch.long)
    return (ours, lambda m: m(inputs=ids, attention_mask=mask, labels=labels).loss,
            f"Perceiver MLM bytes, 64 latents x 256, batch {b} x {t}")


def _mobilenetv2(b: int, t: int) -> Case:
    from paperzoo.bench.mobilenetv2 import _models

    _, ours, _ = _models(1.0)
    size = 224 if b > 2 else 96
    x = torch.randn(b, 3, size, size, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 1000, (b,), generator=torch.Generator().manual_seed(1))
    return ours.train(), lambda m: m(pixel_values=x, labels=y).loss, f"MobileNetV2 1.0, batch {b}, {size}x{size}"


def _nerf(b: int, t: int) -> Case:
    import torch.nn.functional as F

    from paperzoo.bench.nerf import CASES as NERF
    from paperzoo.bench.nerf import _rays
    from paperzoo.papers.nerf import NeRF, NeRFConfig, RenderConfig

    n_rays, nc, nf = NERF["small"]
    n_rays = n_rays if b > 2 else 64
    torch.manual_seed(0)
    model = NeRF(NeRFConfig.preset("small"), RenderConfig(num_coarse=nc, num_fine=nf)).train()
    o, d, target = _rays(n_rays)

    def step(m):
        out = m(o, d)
        return F.mse_loss(out.rgb_coarse.float(), target) + F.mse_loss(out.rgb.float(), target)
    return model, step, f"NeRF small, {n_rays} rays x ({nc} + {nf}) samples"


def _vatt(b: int, t: int) -> Case:
    from paperzoo.bench.vatt import _batch
    from paperzoo.papers.vatt import VATT, VATTConfig, VATTLoss

    torch.manual_seed(0)
    model = VATT(VATTConfig.preset("small" if b > 2 else "tiny")).train()
    x, loss = _batch(model.cfg, b), VATTLoss()
    return model, lambda m: loss(m(**x))[0], f"VATT {'small' if b > 2 else 'tiny'}, batch {b}, NCE + MIL-NCE"


def _transformer_mods(b: int, t: int) -> Case:
    from paperzoo.bench.transformer_mods import VOCAB
    from paperzoo.papers.transformer_mods.model import ModsConfig, ModsLM
    from paperzoo.papers.transformer_mods.recipe import loss_fn

    cfg = ModsConfig.preset("small", vocab_size=VOCAB)
    torch.manual_seed(0)
    model = ModsLM(cfg).train()
    x = torch.randint(5, VOCAB, (b, cfg.max_len), generator=torch.Generator().manual_seed(0))
    return model, lambda m: loss_fn(m, x)[0], f"modifications baseline LM d {cfg.dim}, batch {b} x {cfg.max_len}"


def _electra(b: int, t: int) -> Case:
    from paperzoo.bench.electra import _batch, build

    ours, _, _ = build()
    ids, mask = _batch(b, t, 30522)
    masked = ours.mask(ids, mask, torch.Generator().manual_seed(1))
    return (ours, lambda m: m(ids, mask, masked=masked).loss,
            f"ELECTRA joint step, d 256, generator 1/4, batch {b} x {t}")


CASES: dict[str, Callable[[int, int], Case]] = {
    "encoder": _encoder, "funnel": _funnel, "swin": _swin, "switch": _switch, "perceiver": _perceiver,
    "mobilenetv2": _mobilenetv2, "nerf": _nerf, "vatt": _vatt, "transformer-mods": _transformer_mods,
    "electra": _electra,
}


def _step(model: torch.nn.Module, loss: Callable[[torch.nn.Module], torch.Tensor]) -> Callable[[], None]:
    def f() -> None:
        model.zero_grad(set_to_none=True)
        with autocast():
            value = loss(model)
        value.backward()
    return f


def _counts() -> dict[str, Any]:
    from torch._dynamo.utils import counters

    breaks = dict(counters["graph_break"])
    return {"graphs": int(counters["stats"]["unique_graphs"]), "graph_breaks": int(sum(breaks.values())),
            "break_reasons": sorted({r.strip().splitlines()[0][:160] for r in breaks})}


def compile_row(name: str, model: torch.nn.Module, loss: Callable[[torch.nn.Module], torch.Tensor], case: str,
                backend: str = "inductor", warmup: int = 2, repeats: int = 5, peak: float | None = None
                ) -> BenchResult:
    """One row: ``model``'s training step compiled with ``backend`` (ours) vs eager (peer), after warm-up; the
    compile time, graphs, breaks and recompiles in the row's fields."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    eager = _step(model, loss)
    eager()  # the eager side's first call (allocator, lazy init) stays out of the compile time
    compiled = _step(compile_model(model, backend=backend), loss)
    t0 = time.perf_counter()
    compiled()
    compile_s = time.perf_counter() - t0
    first = _counts()
    stats = time_interleaved({"compiled": compiled, "eager": eager}, warmup=warmup, repeats=repeats)
    after = _counts()
    flops = count_flops(eager)
    return BenchResult.from_stats(
        f"compile {name} train step", f"{case}, {backend}", stats, flops=flops, peak_gflops=peak,
        compile_s=compile_s, graphs=first["graphs"], recompiles=after["graphs"] - first["graphs"],
        graph_breaks=after["graph_breaks"], break_reasons=after["break_reasons"], backend=backend,
        eager_fraction_of_peak=flops / (stats["eager"].median * 1e9) / peak if peak else None)


def run(cases: tuple[str, ...] | None = None, backend: str | None = None, repeats: int | None = None
        ) -> tuple[list[BenchResult], dict[str, Any]]:
    """Every case (or ``cases``) compiled vs eager in the pass's precision; ``(rows, meta)``."""
    quick = os.environ.get("PAPERZOO_BENCH_QUICK") == "1"
    backend = backend or os.environ.get("PAPERZOO_COMPILE_BACKEND", "inductor")
    chosen = cases or tuple(c for c in os.environ.get("PAPERZOO_COMPILE_CASES", "").split(",") if c) or tuple(CASES)
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        raise ValueError(f"unknown compile cases {unknown}; valid: {', '.join(CASES)}")
    b, t = (2, 32) if quick else (8, 128)
    n = repeats or (2 if quick else 5)
    peak = peak_gflops()
    rows, failed = [], {}
    for name in chosen:
        model, loss, case = CASES[name](b, t)
        try:
            rows.append(compile_row(name, model, loss, case, backend, warmup=1 if quick else 2, repeats=n,
                                    peak=peak))
        except Exception as e:  # noqa: BLE001 (a model that does not compile is a finding, not the end of the bench)
            failed[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        finally:
            torch._dynamo.reset()
    meta = {"threads": torch.get_num_threads(), "backend": backend, "precision": current().to_dict(),
            "peak_gflops": peak, "failed": failed,
            "notes": ("ours = the training step through torch.compile, peer = the same model eager, interleaved after "
                      "warm-up; ratio = eager / compiled (> 1: compiling pays). compile_s = the first compiled step "
                      "(tracing + code generation for forward and backward + the step). graphs: compiled by the "
                      "first step; recompiles: graphs compiled after it; graph_breaks: breaks dynamo took. Step = "
                      "zero_grad + forward and loss under the pass's autocast + backward, no optimizer.")}
    return rows, meta
