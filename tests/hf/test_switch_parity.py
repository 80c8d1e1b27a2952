"""Parity with Hugging Face's SwitchTransformersSparseMLP / Top1Router (random weights, built offline)."""

import pytest
import torch
from transformers import SwitchTransformersConfig
from transformers.models.switch_transformers.modeling_switch_transformers import (
    SwitchTransformersSparseMLP,
    SwitchTransformersTop1Router,
    load_balancing_loss_func,
    router_z_loss_func,
)

from paperzoo.hf import from_hf, to_hf
from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def hf_mlp(capacity: int = 64, jitter: float = 0.0, act: str = "relu", seed: int = 0) -> SwitchTransformersSparseMLP:
    torch.manual_seed(seed)
    cfg = SwitchTransformersConfig(d_model=16, d_ff=32, num_experts=4, expert_capacity=capacity,
                                   router_jitter_noise=jitter, dropout_rate=0.0, dense_act_fn=act)
    m = SwitchTransformersSparseMLP(cfg)
    with torch.no_grad():  # a router sharp enough that routing is not near-uniform
        m.router.classifier.weight.normal_(0, 1.0)
    return m


@pytest.mark.parametrize("act", ["relu", "gelu", "gelu_new"])
def test_outputs_and_gradients_match_capacity_not_binding(act):
    hf = hf_mlp(act=act).eval()
    ours = from_hf(hf)
    assert isinstance(ours, SwitchMoE) and not ours.training
    x = torch.randn(3, 7, 16)
    xh, xo = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    yh = hf(xh)
    yo, aux = ours(hidden_states=xo)  # HF's keyword works
    assert float(aux["fraction_dropped"]) == 0.0
    torch.testing.assert_close(yo, yh, atol=1e-6, rtol=1e-5)
    g = torch.randn_like(yh)
    (yh * g).sum().backward()
    (yo * g).sum().backward()
    torch.testing.assert_close(xo.grad, xh.grad, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ours.router.weight.grad, hf.router.classifier.weight.grad, atol=1e-6, rtol=1e-5)
    for i in range(4):
        torch.testing.assert_close(ours.w1.grad[i].T, hf.experts[f"expert_{i}"].wi.weight.grad, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(ours.w2.grad[i].T, hf.experts[f"expert_{i}"].wo.weight.grad, atol=1e-6, rtol=1e-5)


def test_binding_capacity_matches_hf_per_sequence_groups():
    """HF routes each sequence as a group with a fixed integer capacity; the converted layer does the same."""
    hf = hf_mlp(capacity=2).train()  # jitter 0, dropout 0: training mode is deterministic
    ours = from_hf(hf)
    x = torch.randn(2, 12, 16)
    yh = hf(x.clone())
    yo, aux = ours(x)
    assert float(aux["fraction_dropped"]) > 0
    torch.testing.assert_close(yo, yh, atol=1e-6, rtol=1e-5)
    dropped = yh.abs().sum(-1) == 0
    assert dropped.any() and torch.equal(dropped, yo.abs().sum(-1) == 0)  # both: dropped tokens give exactly zero


def test_router_logits_match():
    hf = hf_mlp()
    router = from_hf(hf.router)
    assert isinstance(hf.router, SwitchTransformersTop1Router)
    x = torch.randn(2, 5, 16)
    _, probs, logits = hf.router.eval()(x.clone())
    torch.testing.assert_close(router.eval()(x.reshape(-1, 16)), logits.reshape(-1, 4))
    torch.testing.assert_close(logits.softmax(-1).amax(-1, keepdim=True), probs)


def test_to_hf_round_trip():
    torch.manual_seed(1)
    ours = SwitchMoE(SwitchMoEConfig(dim=16, ffn_dim=32, num_experts=4, capacity=64, route_per_sequence=True,
                                     jitter_eps=0.0)).eval()
    hf = to_hf(ours)
    assert type(hf).__name__ == "SwitchTransformersSparseMLP" and hf.router.expert_capacity == 64
    x = torch.randn(2, 9, 16)
    torch.testing.assert_close(ours(x).hidden_states, hf(x.clone()), atol=1e-6, rtol=1e-5)
    back = from_hf(hf)
    torch.testing.assert_close(back.w1, ours.w1)
    torch.testing.assert_close(back.router.weight, ours.router.weight)


def test_loss_definitions_agree_for_one_group_without_padding():
    """z-loss: identical. Balancing: HF averages E * sum_i f_i P_i over sequences (and over layers, whose logits it
    concatenates); ours is one value per layer over all real tokens. They agree for a single sequence."""
    hf = hf_mlp().eval()
    ours = from_hf(hf)
    x = torch.randn(1, 20, 16)
    aux = ours(x).aux
    logits = hf.router(x.clone())[2]
    torch.testing.assert_close(aux["z_loss"], router_z_loss_func(logits))
    torch.testing.assert_close(aux["balance_loss"], load_balancing_loss_func(logits.softmax(-1), logits.argmax(-1)))


def test_documented_differences():
    # HF's jitter multiplies the caller's hidden states in place; ours leaves the input alone
    ours = from_hf(hf_mlp(jitter=0.1)).train()
    x = torch.randn(2, 5, 16)
    x0 = x.clone()
    ours(x)
    assert torch.equal(x, x0)
    # HF's router follows autocast; ours stays fp32
    hf = hf_mlp().eval()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hf_logits = hf.router(torch.randn(1, 4, 16))[2]
        seen = []
        ours = from_hf(hf)
        ours.router.register_forward_hook(lambda m, i, o: seen.append(o))
        ours(torch.randn(1, 4, 16))
    assert seen[0].dtype == torch.float32
    assert hf_logits.dtype in (torch.bfloat16, torch.float32)  # recorded in README: bf16 in transformers 5.24


def test_unsupported_conversions_raise():
    with pytest.raises(ValueError, match="top-1"):
        to_hf(SwitchMoE(SwitchMoEConfig(dim=16, ffn_dim=32, num_experts=4, k=2)))
