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


def _no_drop_lm():
    """Tiny Switch LM whose capacity holds every token (E = 4, factor 4), so only the mask decides routing."""
    torch.manual_seed(0)
    cfg = SwitchLMConfig.preset("tiny", num_layers=4, capacity_factor=4.0, eval_capacity_factor=4.0, z_loss_coef=1e-3)
    return SwitchLM(cfg).eval()


def _padded(ids: torch.Tensor, pad: int, fill: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    """Row 0 left-padded, every other row right-padded by ``pad`` tokens of id ``fill``; the mask, 1 = token."""
    b, n = ids.shape
    out = torch.full((b, n + pad), fill, dtype=ids.dtype)
    mask = torch.zeros(b, n + pad, dtype=torch.long)
    out[0, pad:], mask[0, pad:] = ids[0], 1
    out[1:, :n], mask[1:, :n] = ids[1:], 1
    return out, mask


def test_attention_mask_padding_changes_no_real_output_loss_or_balance_loss():
    """Padded positions are masked in attention (left padding would be seen by the causal rows), take no expert
    capacity, leave the balance and z losses and the LM loss: the padded batch gives the unpadded batch's figures."""
    m = _no_drop_lm()
    ids = torch.randint(0, m.config.vocab_size, (3, 12), generator=torch.Generator().manual_seed(1))
    ref = m(ids, labels=ids)
    padded, mask = _padded(ids, 4)
    out = m(padded, labels=padded, attention_mask=mask)
    torch.testing.assert_close(out.logits[0, 4:], ref.logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.logits[1:, :12], ref.logits[1:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.lm_loss, ref.lm_loss, atol=1e-6, rtol=1e-6)  # padded targets are not predicted
    torch.testing.assert_close(out.aux_loss, ref.aux_loss, atol=1e-6, rtol=1e-6)
    assert len(out.router) == len(ref.router) == 2
    for a, r in zip(out.router, ref.router, strict=True):
        torch.testing.assert_close(a["balance_loss"], r["balance_loss"], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(a["z_loss"], r["z_loss"], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(a["expert_load"], r["expert_load"])
        assert int(a["expert_count"].sum()) == ids.numel()  # only the 36 real tokens were routed


def test_pad_contents_do_not_matter_and_all_ones_equals_no_mask():
    m = _no_drop_lm()
    ids = torch.randint(0, m.config.vocab_size, (3, 12), generator=torch.Generator().manual_seed(2))
    a, mask = _padded(ids, 4, fill=7)
    b, _ = _padded(ids, 4, fill=300)
    oa, ob = m(a, labels=a, attention_mask=mask), m(b, labels=b, attention_mask=mask)
    keep = mask.bool()
    torch.testing.assert_close(oa.logits[keep], ob.logits[keep])
    torch.testing.assert_close(oa.loss, ob.loss)
    for x, y in zip(oa.router, ob.router, strict=True):
        torch.testing.assert_close(x["balance_loss"], y["balance_loss"])
    full = m(ids, labels=ids)
    ones = m(ids, labels=ids, attention_mask=torch.ones_like(ids))
    assert torch.equal(full.logits, ones.logits) and torch.equal(full.loss, ones.loss)
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        m(ids, attention_mask=torch.ones(3, 11))
