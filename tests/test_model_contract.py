"""One contract over every registered model (as timm's test_models does): new papers get these checks for free.

Every name in a paper's ``Paper.models`` is exported by its package ``paperzoo.papers.<paper>`` and is an
``nn.Module`` class with

* ``config_class``: its config dataclass, whose ``preset("tiny")`` builds in well under a second;
* ``example_inputs(cfg, batch=2)``: a dict of keyword inputs the model accepts.

The contract: it builds from ``tiny``, runs forward and backward on CPU (every trainable parameter that the
output depends on gets a finite gradient), raises ``ValueError`` for an input of the wrong rank and of the wrong
dtype, round-trips through safetensors with identical outputs, runs under bf16 autocast (the training engine's
``precision="bf16"``) close to fp32 with finite gradients, and, where a Hugging Face converter is registered,
converts to HF and back with identical outputs.
"""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch
from safetensors.torch import load_model, save_model

from paperzoo import registry


def _models() -> list[tuple[str, str]]:
    return [(p.name, m) for p in registry.papers() for m in p.models]


def _hf_models() -> list[tuple[str, str]]:
    """The registered models with a Hugging Face converter (``paperzoo.hf.to_hf`` accepts them)."""
    import paperzoo.hf as hf

    hf._load()
    return [(p, m) for p, m in _models() if any(c in hf._TO for c in _cls(p, m).__mro__)]


def _cls(paper: str, name: str) -> type:
    pkg = importlib.import_module(f"paperzoo.papers.{paper.replace('-', '_')}")
    assert hasattr(pkg, name), f"paperzoo.papers.{paper} must export {name} (it is in Paper.models)"
    return getattr(pkg, name)


def _tensors(out) -> list[torch.Tensor]:
    """The floating tensors of a model output (a tensor, a tuple, a dataclass or a mapping)."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if dataclasses.is_dataclass(out):
        out = [getattr(out, f.name) for f in dataclasses.fields(out)]
    elif isinstance(out, dict):
        out = list(out.values())
    elif hasattr(out, "to_tuple"):  # HF ModelOutput
        out = list(out.to_tuple())
    if isinstance(out, tuple | list):
        return [t for o in out for t in _tensors(o)]
    return []


def _build(paper: str, name: str, seed: int = 0):
    cls = _cls(paper, name)
    assert isinstance(cls, type) and issubclass(cls, torch.nn.Module), f"{name} must be an nn.Module class"
    for attr in ("config_class", "example_inputs"):
        assert hasattr(cls, attr), f"{paper}.{name} must define {attr} (see this file's docstring)"
    cfg = cls.config_class.preset("tiny")
    torch.manual_seed(seed)
    return cls, cfg, cls(cfg), cls.example_inputs(cfg)


def _primary(inputs: dict) -> str:
    return next(k for k, v in inputs.items() if isinstance(v, torch.Tensor))


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models: one thread (see tests/conftest.py)."""


@pytest.mark.parametrize(("paper", "name"), _models())
def test_forward_backward(paper, name):
    _, _, model, inputs = _build(paper, name)
    model.train()
    outs = _tensors(model(**inputs))
    assert outs, f"{name}'s output holds no floating tensor"
    assert all(torch.isfinite(t).all() for t in outs)
    sum(t.float().sum() for t in outs if t.requires_grad).backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    assert grads, f"no parameter of {name} received a gradient"
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize(("paper", "name"), _models())
def test_wrong_rank_and_dtype_raise_value_error(paper, name):
    _, _, model, inputs = _build(paper, name)
    key = _primary(inputs)
    x = inputs[key]
    with pytest.raises(ValueError):
        model(**{**inputs, key: x.reshape(-1)})  # one rank where the model expects more
    wrong = torch.int64 if x.is_floating_point() else torch.float32
    with pytest.raises(ValueError):
        model(**{**inputs, key: x.to(wrong)})


@pytest.mark.parametrize(("paper", "name"), _models())
def test_safetensors_round_trip(paper, name, tmp_path):
    cls, cfg, model, inputs = _build(paper, name)
    save_model(model, str(tmp_path / "model.safetensors"))
    again = cls(cfg)
    load_model(again, str(tmp_path / "model.safetensors"))
    model.eval()
    again.eval()
    with torch.no_grad():
        a, b = _tensors(model(**inputs)), _tensors(again(**inputs))
    assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


# bf16 keeps 8 bits of mantissa: one rounding is a relative error of up to 2^-8 = 0.4%. The tiny models stack a few
# of them (measured: 0.1-0.8% for the transformers, 2.3% for MobileNetV2's 17 conv blocks); 4% is about ten roundings
# and far below what a layer computed wrongly in bf16 (a softmax, a norm, a router) produces.
BF16_REL_TOL = 0.04


@pytest.mark.parametrize(("paper", "name"), _models())
def test_bf16_autocast_matches_fp32_and_backpropagates(paper, name):
    _, _, model, inputs = _build(paper, name)
    model.eval()
    with torch.no_grad():
        ref = _tensors(model(**inputs))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            amp = _tensors(model(**inputs))
    assert len(ref) == len(amp)
    for x, y in zip(ref, amp, strict=True):
        x, y = x.float(), y.float()
        assert torch.isfinite(y).all()
        rel = float((x - y).norm() / x.norm().clamp_min(1e-12))
        assert rel <= BF16_REL_TOL, f"{name}: bf16 output differs from fp32 by {rel:.2%} (limit {BF16_REL_TOL:.0%})"
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outs = _tensors(model(**inputs))
    sum(t.float().sum() for t in outs if t.requires_grad).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize(("paper", "name"), _hf_models())
def test_hf_round_trip_where_a_converter_exists(paper, name):
    import paperzoo.hf as hf

    _, _, model, inputs = _build(paper, name)
    model.eval()
    back = hf.from_hf(hf.to_hf(model)).eval()
    with torch.no_grad():
        a, b = _tensors(model(**inputs)), _tensors(back(**inputs))
    assert a and len(a) <= len(b)
    for x, y in zip(a, b, strict=False):
        assert x.shape == y.shape and (x - y).abs().max() <= 1e-5


def test_the_papers_with_hf_models_are_in_the_round_trip():
    assert {p for p, _ in _hf_models()} >= {"electra", "funnel", "mobilenetv2", "perceiver", "swin"}


# Implemented papers whose mechanism is not a network (so there is no nn.Module for this contract), and why.
NOT_A_NETWORK = {
    "iws": "an interactive labelling method: IWSSession over a batched MLP ensemble (ExpertModel) and a label model",
}


def test_every_implemented_paper_registers_models():
    for p in registry.papers():
        if p.status != "planned" and p.name not in NOT_A_NETWORK:
            assert p.models, f"{p.name} registers no models"
    assert all(not registry.get(name).models for name in NOT_A_NETWORK)


def _token_models() -> list[tuple[str, str]]:
    """The registered models whose primary input is integer token ids."""
    out = []
    for p, m in _models():
        cls = _cls(p, m)
        inputs = cls.example_inputs(cls.config_class.preset("tiny"))
        if not inputs[_primary(inputs)].is_floating_point():
            out.append((p, m))
    return out


@pytest.mark.parametrize(("paper", "name"), _token_models())
def test_token_ids_outside_the_vocabulary_raise_value_error(paper, name):
    """An id >= vocab_size (or < 0) is a ValueError naming the vocabulary size, not torch's IndexError deep inside
    (or a device-side assert on a GPU)."""
    _, cfg, model, inputs = _build(paper, name)
    key = _primary(inputs)
    for bad in (cfg.vocab_size, -1):
        x = inputs[key].clone()
        x[0, 1] = bad
        with pytest.raises(ValueError, match=f"vocab_size={cfg.vocab_size}"):
            model(**{**inputs, key: x})


def test_the_token_models_are_in_the_vocabulary_check():
    assert {p for p, _ in _token_models()} >= {"electra", "funnel", "posenc", "switch"}


# Models whose forward cannot be one graph, and why (everything else must compile with fullgraph=True).
GRAPH_BREAKS = {
    "Nerfies": "the elastic loss's Jacobians come from torch.autograd.grad inside the forward, which dynamo does not "
               "trace (its trace_autograd_ops is off); the rest compiles in pieces (tests/papers/nerfies)",
}


def _one_model_per_paper() -> list[tuple[str, str]]:
    """Each paper's last-listed model (the head on its backbone where it has several), tracing being seconds each."""
    return list({p: (p, m) for p, m in _models()}.values())


@pytest.mark.parametrize(("paper", "name"), _one_model_per_paper())
def test_forward_traces_as_one_graph(paper, name):
    """torch.compile(fullgraph=True), as the training engine compiles (data-dependent sizes traced:
    :func:`paperzoo.train.compile_model`), traces the tiny model's forward without a graph break (dynamo only,
    backend "eager": no code generation, so this stays cheap); value checks on inputs run in eager mode only. One
    model per paper (the others share its modules); a paper whose model cannot be one graph says why in
    GRAPH_BREAKS."""
    if name in GRAPH_BREAKS:
        pytest.skip(f"{name}: {GRAPH_BREAKS[name]}")
    import torch._dynamo

    _, _, model, inputs = _build(paper, name)
    model.eval()
    from paperzoo.train import compile_model

    torch._dynamo.reset()
    flags = {"capture_dynamic_output_shape_ops": True, "capture_scalar_outputs": True}  # what compile_model sets
    with torch._dynamo.config.patch(**flags), torch.no_grad():  # restored afterwards
        compiled = compile_model(model, fullgraph=True, backend="eager")
        got, want = _tensors(compiled(**inputs)), _tensors(model(**inputs))
    assert got and len(got) == len(want)
    for a, b in zip(got, want, strict=True):  # equal up to kernel choice (eager may skip an all-true mask)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_the_graph_break_list_names_registered_models():
    assert set(GRAPH_BREAKS) <= {m for _, m in _models()}
