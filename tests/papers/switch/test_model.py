"""Switch LM and its FLOP-matched dense baseline."""

import pytest
import torch

from paperzoo.measure import count_flops
from paperzoo.nn.ffn import FeedForward
from paperzoo.papers.switch.model import SwitchLM, SwitchLMConfig
from paperzoo.papers.switch.moe import SwitchMoE


def test_switch_every_other_ffn_and_dense_baseline():
    cfg = SwitchLMConfig.preset("tiny", num_layers=4)
    kinds = [type(b.ffn) for b in SwitchLM(cfg).encoder.layers]
    assert kinds == [FeedForward, SwitchMoE, FeedForward, SwitchMoE]
    assert all(type(b.ffn) is FeedForward for b in SwitchLM(cfg.dense()).encoder.layers)


def test_flops_per_token_match_dense_up_to_the_router():
    cfg = SwitchLMConfig.preset("tiny", capacity_factor=1.0, eval_capacity_factor=1.0, min_capacity=1)
    sw, dense = SwitchLM(cfg).eval(), SwitchLM(cfg.dense()).eval()
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    router = 2 * ids.numel() * cfg.dim * cfg.num_experts  # one Switch layer; expert matmuls = dense at cf 1.0
    assert count_flops(lambda: sw(ids)) - count_flops(lambda: dense(ids)) == router
    assert sw.num_parameters(per_token=True) - dense.num_parameters() == cfg.dim * cfg.num_experts
    assert sw.num_parameters() > 3 * dense.num_parameters() // 2  # parameters grow with experts


def test_loss_is_lm_plus_balance_per_layer():
    torch.manual_seed(0)
    cfg = SwitchLMConfig.preset("tiny", num_layers=4, z_loss_coef=1e-3)
    m = SwitchLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    out = m(ids, labels=ids)
    assert len(out.router) == 2
    aux = sum(0.01 * a["balance_loss"] + 1e-3 * a["z_loss"] for a in out.router)
    torch.testing.assert_close(out.aux_loss, aux)
    torch.testing.assert_close(out.loss, out.lm_loss + aux)
    assert out.logits.shape == (2, 16, cfg.vocab_size)
    out.loss.backward()
    assert all(p.grad is not None for p in m.parameters())


def test_init_scale_everywhere():
    cfg = SwitchLMConfig.preset("tiny")
    m = SwitchLM(cfg)
    w = m.encoder.layers[0].ffn.fc1.weight
    std = (0.1 / cfg.dim) ** 0.5
    assert w.abs().max() <= 2 * std + 1e-7


def test_learns_a_repeated_batch():
    torch.manual_seed(0)
    cfg = SwitchLMConfig.preset("tiny")
    m = SwitchLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (4, 32))
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    first = None
    for _ in range(30):
        loss = m(ids, labels=ids).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first - 1.0


def test_validation():
    m = SwitchLM(SwitchLMConfig.preset("tiny"))
    with pytest.raises(ValueError, match="long tensor"):
        m(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="max_len"):
        m(torch.zeros(1, 129, dtype=torch.long))
    with pytest.raises(ValueError, match="preset"):
        SwitchLMConfig.preset("huge")
    with pytest.raises(ValueError, match="num_experts"):
        SwitchLMConfig(num_experts=-1)
