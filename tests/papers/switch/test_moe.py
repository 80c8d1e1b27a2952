"""Semantics of the Switch MoE layer: each rule of the paper checked on its own (see DESIGN.md, Lessons)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig, balance_loss, expert_capacity, router_z_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def layer(dim: int, ffn_dim: int, num_experts: int, **kw) -> SwitchMoE:
    return SwitchMoE(SwitchMoEConfig(dim=dim, ffn_dim=ffn_dim, num_experts=num_experts, **kw))


def reference(moe: SwitchMoE, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """A slow loop over choices, tokens and experts, written straight from the paper's rules."""
    xt = x.reshape(-1, moe.config.dim)
    T, E, k = xt.shape[0], moe.config.num_experts, moe.config.k
    valid = torch.ones(T, dtype=torch.bool) if mask is None else mask.reshape(-1).bool()
    with torch.no_grad():
        probs = F.linear(xt.float(), moe.router.weight).softmax(-1)
    gate, idx = probs.topk(k, dim=-1)
    if k > 1:
        gate = gate / gate.sum(-1, keepdim=True)
    G = x.shape[0] if moe.config.route_per_sequence else 1
    Tg = T // G
    C = moe.current_capacity(Tg)
    y = torch.zeros_like(xt)
    for g in range(G):
        used = [0] * E
        for j in range(k):
            for t in range(g * Tg, (g + 1) * Tg):
                e = int(idx[t, j])
                if not valid[t] or used[e] >= C:
                    continue
                used[e] += 1
                h = F.relu(xt[t] @ moe.w1[e]) @ moe.w2[e]
                y[t] += gate[t, j] * h
    return y.reshape(x.shape)


def all_to_expert0(T: int = 16, E: int = 4, **kw) -> tuple[SwitchMoE, torch.Tensor]:
    """A layer whose router sends every token to expert 0 (feature 0 is positive, router row 0 reads it)."""
    torch.manual_seed(0)
    moe = layer(8, 16, E, **kw)
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0, 0] = 5.0
    x = torch.randn(1, T, 8)
    x[..., 0] = x[..., 0].abs() + 0.5
    return moe, x


def test_capacity_formula():
    assert expert_capacity(1024, 8, 1.25) == 160
    assert expert_capacity(1000, 8, 1.0) == 125
    assert expert_capacity(1001, 8, 1.0) == 125  # floor
    assert expert_capacity(10, 8, 1.0, min_capacity=4) == 4
    assert expert_capacity(1024, 8, 1.0, k=2) == 256
    moe = layer(8, 16, 4, min_capacity=1)
    x = torch.randn(2, 16, 8)
    assert int(moe.train()(x).aux["capacity"]) == math.floor(1.25 * 32 / 4)
    assert int(moe.eval()(x).aux["capacity"]) == math.floor(2.0 * 32 / 4)
    assert int(layer(8, 16, 4, capacity=3)(x).aux["capacity"]) == 3


def test_position_priority_dropping_and_zero_output():
    moe, x = all_to_expert0(T=16, E=4, min_capacity=1, capacity_factor=1.0, jitter_eps=0.0)
    x.requires_grad_(True)
    y, aux = moe.train()(x)
    C = int(aux["capacity"])
    assert C == 4
    torch.testing.assert_close(y[0, :C], reference(moe, x)[0, :C])
    assert torch.all(y[0, C:] == 0)  # exactly zero: residual only
    assert abs(float(aux["fraction_dropped"]) - 12 / 16) < 1e-7
    assert aux["expert_count"].tolist() == [4.0, 0.0, 0.0, 0.0]
    assert aux["expert_load"].tolist() == [1.0, 0.0, 0.0, 0.0]
    y.sum().backward()
    assert torch.all(x.grad[0, C:] == 0)  # a dropped token gets no gradient through the MoE


def test_matches_loop_reference_with_binding_capacity():
    torch.manual_seed(1)
    for k, per_seq in ((1, False), (2, False), (1, True), (2, True)):
        moe = layer(8, 16, 4, k=k, min_capacity=1, capacity_factor=0.5, jitter_eps=0.0,
                    route_per_sequence=per_seq).train()
        x = torch.randn(3, 10, 8)
        mask = torch.rand(3, 10) > 0.2
        y, aux = moe(x, mask)
        assert float(aux["fraction_dropped"]) > 0
        torch.testing.assert_close(y, reference(moe, x, mask), atol=1e-6, rtol=1e-5)


def test_output_scaled_by_router_probability():
    torch.manual_seed(2)
    moe = layer(8, 16, 4).eval()
    x = torch.randn(1, 6, 8)
    y, _ = moe(x)
    probs = F.linear(x[0], moe.router.weight).softmax(-1)
    p, e = probs.max(-1)
    for t in range(6):
        h = F.relu(x[0, t] @ moe.w1[e[t]]) @ moe.w2[e[t]]
        torch.testing.assert_close(y[0, t], p[t] * h)


def test_balance_loss_is_one_under_uniform_routing():
    torch.manual_seed(3)
    E = 4
    probs = torch.full((32, E), 1 / E)
    top1 = torch.arange(32) % E
    assert float(balance_loss(probs, top1)) == pytest.approx(1.0, abs=1e-7)
    # f uniform and P uniform through the layer: two mirrored tokens, two experts.
    moe = layer(2, 4, 2).eval()
    with torch.no_grad():
        moe.router.weight.copy_(torch.tensor([[1.0, 0.0], [-1.0, 0.0]]))
    x = torch.tensor([[[1.0, 0.3], [-1.0, 0.3]]])
    assert moe(x).aux["balance_loss"].item() == pytest.approx(1.0, abs=1e-7)
    # all tokens on one confident expert: the loss approaches E.
    moe, x = all_to_expert0(T=16, E=4)
    assert moe.eval()(x * 10).aux["balance_loss"].item() > 3.9


def test_z_loss_on_raw_logits():
    torch.manual_seed(4)
    moe = layer(8, 16, 4).eval()
    x = torch.randn(2, 5, 8)
    logits = F.linear(x.reshape(-1, 8), moe.router.weight)
    expect = torch.logsumexp(logits, -1).square().mean()
    torch.testing.assert_close(moe(x).aux["z_loss"], expect)
    # on probabilities it would be different (logsumexp of a softmax is not log Z)
    assert abs(router_z_loss(logits.softmax(-1)).item() - expect.item()) > 1e-3
    # it is shift-sensitive: adding c to every logit changes log Z by c
    torch.testing.assert_close(router_z_loss(logits + 1.0), (torch.logsumexp(logits, -1) + 1).square().mean())


def test_router_stays_fp32_under_bf16_autocast():
    torch.manual_seed(5)
    moe = layer(8, 16, 4, jitter_eps=0.0).eval()
    x = torch.randn(2, 5, 8)
    seen = []
    moe.router.register_forward_hook(lambda m, i, o: seen.append(o))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, aux = moe(x)
    assert seen[0].dtype == torch.float32
    torch.testing.assert_close(seen[0], F.linear(x.reshape(-1, 8), moe.router.weight), rtol=0, atol=0)
    assert aux["z_loss"].dtype == torch.float32 and aux["balance_loss"].dtype == torch.float32
    x.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, aux = moe.train()(x)
        (y.float().square().sum() + aux["balance_loss"]).backward()
    assert y.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert moe.router.weight.grad.dtype == torch.float32 and torch.isfinite(moe.w1.grad).all()


def test_jitter_only_in_training():
    torch.manual_seed(6)
    moe = layer(8, 16, 4, jitter_eps=0.1)
    x = torch.randn(2, 5, 8)
    seen = []
    moe.router.register_forward_hook(lambda m, i, o: seen.append(o.detach()))
    moe.eval()
    moe(x), moe(x)
    clean = F.linear(x.reshape(-1, 8), moe.router.weight)
    torch.testing.assert_close(seen[0], clean, rtol=0, atol=0)
    torch.testing.assert_close(seen[1], clean, rtol=0, atol=0)
    moe.train()
    moe(x)
    assert not torch.equal(seen[2], clean)
    # the jitter touches the router input only, never the tokens the experts see
    moe.router.jitter_eps = 0.0
    y0 = moe(x).hidden_states
    moe.router.jitter_eps = 1e-6  # too small to flip a choice, so only the gate moves (by ~1e-6)
    torch.testing.assert_close(moe(x).hidden_states, y0, atol=1e-5, rtol=1e-4)


def test_padding_ignored_by_routing_and_losses():
    moe, x = all_to_expert0(T=16, E=4, min_capacity=1, capacity_factor=1.0, jitter_eps=0.0)
    mask = torch.ones(1, 16, dtype=torch.bool)
    mask[0, :2] = False
    y, aux = moe.train()(x, mask)
    assert torch.all(y[0, :2] == 0)
    assert torch.all(y[0, 2:6] != 0) and torch.all(y[0, 6:] == 0)  # padding took no capacity
    assert abs(float(aux["fraction_dropped"]) - 10 / 14) < 1e-7
    torch.testing.assert_close(aux["expert_load"], torch.tensor([1.0, 0.0, 0.0, 0.0]))
    # losses equal those computed on the real tokens alone, whatever the padding holds
    x2 = x.clone()
    x2[0, :2] = 100 * torch.randn(2, 8)
    aux2 = moe(x2, mask).aux
    ref = moe(x[:, 2:]).aux
    for name in ("balance_loss", "z_loss"):
        torch.testing.assert_close(aux2[name], ref[name])


def test_fraction_dropped_and_load_metrics():
    torch.manual_seed(7)
    moe = layer(8, 16, 4, min_capacity=1, capacity_factor=0.5, jitter_eps=0.0).train()
    x = torch.randn(4, 8, 8)
    aux = moe(x).aux
    C = int(aux["capacity"])
    top1 = F.linear(x.reshape(-1, 8), moe.router.weight).argmax(-1)
    routed = torch.bincount(top1, minlength=4).float()
    torch.testing.assert_close(aux["expert_load"], routed / 32)
    torch.testing.assert_close(aux["expert_count"], routed.clamp(max=C))
    torch.testing.assert_close(aux["fraction_dropped"], 1 - routed.clamp(max=C).sum() / 32)


def test_losses_differentiable_and_router_gets_gate_gradient():
    torch.manual_seed(8)
    moe = layer(8, 16, 4).train()
    y, aux = moe(torch.randn(2, 6, 8))
    (y.square().sum()).backward(retain_graph=True)
    assert moe.router.weight.grad.abs().sum() > 0 and moe.w1.grad.abs().sum() > 0
    moe.zero_grad()
    (aux["balance_loss"] + aux["z_loss"]).backward()
    assert moe.router.weight.grad.abs().sum() > 0


def test_expert_dropout_and_init_scale():
    torch.manual_seed(9)
    moe = layer(256, 512, 8, expert_dropout=0.5, jitter_eps=0.0)
    x = torch.randn(2, 16, 256)
    moe.eval()
    torch.testing.assert_close(moe(x).hidden_states, moe(x).hidden_states)
    moe.train()
    assert not torch.equal(moe(x).hidden_states, moe(x).hidden_states)
    for w, fan_in in ((moe.w1, 256), (moe.w2, 512), (moe.router.weight, 256)):
        std = math.sqrt(0.1 / fan_in)
        assert w.abs().max() <= 2 * std + 1e-7  # truncated at 2 std, as TF's truncated_normal
        assert w.std().item() == pytest.approx(0.88 * std, rel=0.05)  # std of a 2-sigma truncated normal


class _LargestTensor(TorchDispatchMode):
    """Records the element count of the largest tensor any operator returns while active."""

    def __init__(self):
        super().__init__()
        self.largest, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.numel() > self.largest:
                self.largest, self.op = t.numel(), func
        return out


@pytest.mark.parametrize("train", [False, True])
def test_memory_is_linear_no_dense_dispatch_tensor(train):
    """Every tensor the layer makes, forward and backward, stays within a few (tokens x experts) router-sized
    arrays; a dense (T, E, C) dispatch or combine tensor (GShard/Mesh-TF style) would be 64x larger than that."""
    torch.manual_seed(10)
    moe = layer(16, 32, 128).train(train)
    x = torch.randn(8, 512, 16, requires_grad=train)
    T, E = 8 * 512, 128
    with _LargestTensor() as seen:
        y, aux = moe(x)
        if train:
            (y.square().mean() + aux["balance_loss"] + aux["z_loss"]).backward()
    assert y.shape == (8, 512, 16) and int(aux["capacity"]) >= 32
    dense = T * E * int(aux["capacity"])  # >= 16.8M elements
    assert seen.largest <= 2 * T * E, (seen.largest, seen.op, dense)


def test_validation_errors():
    moe = layer(8, 16, 4)
    with pytest.raises(ValueError, match=r"\(batch, seq, 8\)"):
        moe(torch.randn(2, 3, 7))
    with pytest.raises(ValueError, match="floating"):
        moe(torch.ones(2, 3, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="mask must have shape"):
        moe(torch.randn(2, 3, 8), torch.ones(2, 4))
    with pytest.raises(ValueError, match="activation"):
        layer(8, 16, 4, activation="tanh")
    with pytest.raises(ValueError, match="at least one token"):
        moe(torch.randn(0, 8))
    with pytest.raises(ValueError, match="k must be"):
        layer(8, 16, 4, k=5)


def test_trimmed_buffer_identical_to_full_capacity():
    torch.manual_seed(11)
    for k, per_seq in ((1, False), (1, True), (2, True)):
        a = layer(8, 16, 4, k=k, min_capacity=1, capacity_factor=0.75, jitter_eps=0.0,
                  route_per_sequence=per_seq).train()
        b = layer(8, 16, 4, k=k, min_capacity=1, capacity_factor=0.75, jitter_eps=0.0,
                  route_per_sequence=per_seq, trim_capacity=False).train()
        b.load_state_dict(a.state_dict())
        x = torch.randn(3, 10, 8)
        mask = torch.rand(3, 10) > 0.2
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ya, yb = a(xa, mask).hidden_states, b(xb, mask).hidden_states
        torch.testing.assert_close(ya, yb, rtol=0, atol=1e-7)
        ya.square().sum().backward()
        yb.square().sum().backward()
        for ga, gb in ((xa.grad, xb.grad), (a.w1.grad, b.w1.grad), (a.router.weight.grad, b.router.weight.grad)):
            torch.testing.assert_close(ga, gb, rtol=1e-6, atol=1e-7)
