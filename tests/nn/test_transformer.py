"""Transformer block/stack/text encoder: norm placement, positions wiring, pluggable FFN, drop-path, masks."""

import dataclasses

import pytest
import torch
from torch import nn

from paperzoo.nn.embedding import TokenEmbeddings
from paperzoo.nn.transformer import (
    DropPath,
    TextEncoder,
    TextEncoderConfig,
    TransformerBlock,
    TransformerConfig,
    TransformerEncoder,
)

CFG = TransformerConfig(dim=32, num_layers=3, num_heads=4, ffn_dim=64)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_block_pre_and_post_norm_formulas():
    x = torch.randn(2, 5, 32)
    for prenorm in (True, False):
        blk = TransformerBlock(dataclasses.replace(CFG, prenorm=prenorm)).eval()
        a, f, n1, n2 = blk.attn, blk.ffn, blk.attn_norm, blk.ffn_norm
        if prenorm:
            h = x + a(n1(x))
            ref = h + f(n2(h))
        else:
            h = n1(x + a(x))
            ref = n2(h + f(h))
        torch.testing.assert_close(blk(x), ref)


@pytest.mark.parametrize("norm", ["rmsnorm", "scalenorm", "layernorm"])
def test_norm_kinds_run(norm):
    enc = TransformerEncoder(dataclasses.replace(CFG, norm=norm)).eval()
    assert enc(torch.randn(2, 4, 32)).last_hidden_state.shape == (2, 4, 32)


def test_rezero_starts_as_identity():
    enc = TransformerEncoder(dataclasses.replace(CFG, norm="rezero")).eval()
    x = torch.randn(2, 4, 32)
    torch.testing.assert_close(enc(x).last_hidden_state, x)
    assert enc.norm is None


def test_drop_path_identity_in_eval_and_per_sample_in_training():
    dp = DropPath(0.5)
    x = torch.randn(64, 3, 4)
    assert torch.equal(dp.eval()(x), x)
    y = dp.train()(x)
    kept = (y != 0).flatten(1).all(1)
    dropped = (y == 0).flatten(1).all(1)
    assert (kept | dropped).all() and kept.any() and dropped.any()
    torch.testing.assert_close(y[kept], x[kept] * 2)
    enc = TransformerEncoder(dataclasses.replace(CFG, drop_path=0.2))
    rates = [getattr(layer.drop_path, "p", 0.0) for layer in enc.layers]
    assert rates == pytest.approx([0.0, 0.1, 0.2])
    enc.eval()
    x = torch.randn(2, 4, 32)
    torch.testing.assert_close(enc(x).last_hidden_state, enc(x).last_hidden_state)


class AuxFFN(nn.Module):
    """A stand-in for an MoE layer: returns (output, aux dict)."""

    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return self.lin(x), {"balance_loss": x.pow(2).mean()}


def test_pluggable_ffn_with_aux():
    blk = TransformerBlock(CFG, ffn=AuxFFN(32))
    out, aux = blk(torch.randn(2, 3, 32))
    assert out.shape == (2, 3, 32) and set(aux) == {"balance_loss"}
    enc = TransformerEncoder(CFG, make_ffn=lambda i: AuxFFN(32) if i % 2 else None)
    res = enc(torch.randn(2, 3, 32))
    assert len(res.aux) == 3 and res.aux[0] == {} and res.aux[2] == {} and "balance_loss" in res.aux[1]
    res.aux[1]["balance_loss"].backward()  # aux stays in the graph
    assert TransformerEncoder(CFG)(torch.randn(1, 2, 32)).aux is None


def test_moe_ffn_gets_the_padding_mask():
    """Padding takes no expert capacity: with binding capacity, padded tokens' content cannot change real outputs."""
    from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

    moe = SwitchMoE(SwitchMoEConfig(dim=32, ffn_dim=64, num_experts=2, capacity=3, jitter_eps=0.0))
    blk = TransformerBlock(CFG, ffn=moe).train()
    x = torch.randn(2, 8, 32)
    keep = torch.ones(2, 8, dtype=torch.bool)
    keep[:, :4] = False  # padding first: without the mask it would win the capacity by position priority
    x2 = x.clone()
    x2[~keep] = torch.randn(int((~keep).sum()), 32)
    (y1, aux1), (y2, _) = blk(x, key_padding_mask=keep), blk(x2, key_padding_mask=keep)
    torch.testing.assert_close(y1[keep], y2[keep])
    assert float(aux1["expert_count"].sum()) <= int(keep.sum())  # only real tokens were processed


def test_no_position_model_is_permutation_equivariant():
    enc = TransformerEncoder(dataclasses.replace(CFG, position="none")).eval()
    x = torch.randn(2, 7, 32)
    perm = torch.randperm(7)
    torch.testing.assert_close(enc(x[:, perm]).last_hidden_state, enc(x).last_hidden_state[:, perm],
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("position", ["sinusoidal", "learned", "t5", "rotary", "alibi"])
def test_positions_break_permutation_equivariance(position):
    enc = TransformerEncoder(dataclasses.replace(CFG, position=position)).eval()
    x = torch.randn(1, 7, 32)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])  # not a reversal: symmetric ALiBi is reversal-invariant
    assert not torch.allclose(enc(x[:, perm]).last_hidden_state, enc(x).last_hidden_state[:, perm], atol=1e-4)


@pytest.mark.parametrize("position", ["t5", "alibi"])
def test_relative_bias_computed_once_and_shared(position):
    enc = TransformerEncoder(dataclasses.replace(CFG, position=position)).eval()
    assert enc.rel_bias is not None
    calls, seen = [], []
    enc.rel_bias.register_forward_hook(lambda m, i, o: calls.append(o))
    for layer in enc.layers:
        layer.attn.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["attn_mask"]), with_kwargs=True)
        assert not any("rel" in n or "bias_table" in n for n, _ in layer.named_parameters())
    enc(torch.randn(2, 5, 32))
    assert len(calls) == 1 and len(seen) == 3
    assert all(s is seen[0] for s in seen)
    torch.testing.assert_close(seen[0][0], calls[0])
    if position == "t5":  # the one table gets gradients from every layer
        enc(torch.randn(2, 5, 32)).last_hidden_state.sum().backward()
        assert enc.rel_bias.relative_attention_bias.weight.grad is not None


def test_rotary_passed_to_every_layer():
    enc = TransformerEncoder(dataclasses.replace(CFG, position="rotary")).eval()
    seen = []
    for layer in enc.layers:
        layer.attn.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["rotary"]), with_kwargs=True)
    enc(torch.randn(1, 5, 32))
    assert len(seen) == 3 and all(r is enc.rotary for r in seen)


def test_encoder_causal_and_padding():
    enc = TransformerEncoder(dataclasses.replace(CFG, causal=True, position="alibi")).eval()
    x = torch.randn(2, 8, 32)
    y = x.clone()
    y[:, 5:] += 1.0
    torch.testing.assert_close(enc(x).last_hidden_state[:, :5], enc(y).last_hidden_state[:, :5])
    enc = TransformerEncoder(dataclasses.replace(CFG, position="t5")).eval()
    pad = torch.ones(2, 8, dtype=torch.bool)
    pad[1, 4:] = False
    a = enc(x, key_padding_mask=pad).last_hidden_state
    b = enc(y, key_padding_mask=pad).last_hidden_state
    torch.testing.assert_close(a[1, :4], b[1, :4])


def test_hidden_states_and_final_norm():
    enc = TransformerEncoder(CFG).eval()  # prenorm -> final norm
    out = enc(torch.randn(2, 4, 32), output_hidden_states=True)
    assert len(out.hidden_states) == 4 and enc.norm is not None
    torch.testing.assert_close(out.last_hidden_state, enc.norm(out.hidden_states[-1]))
    assert TransformerEncoder(dataclasses.replace(CFG, prenorm=False)).norm is None


def test_learned_positions_cannot_extrapolate():
    enc = TransformerEncoder(dataclasses.replace(CFG, position="learned", max_len=8))
    with pytest.raises(ValueError, match="max_len"):
        enc(torch.randn(1, 9, 32))
    enc = TransformerEncoder(dataclasses.replace(CFG, position="sinusoidal", max_len=8))
    assert enc(torch.randn(1, 20, 32)).last_hidden_state.shape == (1, 20, 32)


def test_text_encoder_bert_and_factorised():
    cfg = TextEncoderConfig.bert(dim=32, num_layers=2, num_heads=4, ffn_dim=64, vocab_size=50, max_len=16)
    model = TextEncoder(cfg).eval()
    ids = torch.randint(0, 50, (2, 6))
    out = model(input_ids=ids, attention_mask=torch.ones(2, 6), output_hidden_states=True)
    assert out.last_hidden_state.shape == (2, 6, 32) and out.pooler_output.shape == (2, 32)
    assert len(out.hidden_states) == 3
    torch.testing.assert_close(out.last_hidden_state, model(ids).last_hidden_state)
    fact = TextEncoder(dataclasses.replace(cfg, embedding_dim=16, pooler=False)).eval()
    assert fact.embeddings.word.weight.shape == (50, 16) and fact.embeddings.project is not None
    assert fact(ids).pooler_output is None
    emb = fact.embeddings.word(ids)
    torch.testing.assert_close(fact(inputs_embeds=emb).last_hidden_state, fact(ids).last_hidden_state)


def test_token_embeddings_validation():
    emb = TokenEmbeddings(10, 8, max_len=4, type_vocab_size=2)
    with pytest.raises(ValueError, match="exactly one"):
        emb()
    with pytest.raises(ValueError, match="integer"):
        emb(torch.ones(2, 3))
    with pytest.raises(ValueError, match="token_type_ids"):
        emb(torch.ones(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="max_len"):
        emb(torch.ones(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="position"):
        TokenEmbeddings(10, 8, position="rope")


def test_bad_configs_and_inputs_raise():
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(dim=30, num_heads=4)
    with pytest.raises(ValueError, match="position"):
        TransformerConfig(position="relative")
    with pytest.raises(ValueError, match="norm"):
        TransformerConfig(norm="batchnorm")
    with pytest.raises(ValueError, match="drop_path"):
        TransformerConfig(drop_path=1.0)
    enc = TransformerEncoder(CFG)
    with pytest.raises(ValueError, match="dim=32"):
        enc(torch.randn(2, 3, 16))
    model = TextEncoder(TextEncoderConfig.bert(dim=32, num_layers=1, num_heads=4, ffn_dim=64, vocab_size=50))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 4))


def test_encoder_passes_the_padding_mask_to_a_moe_ffn():
    """The stack merges the padding into one attention mask and still hands the token mask to a MoE FFN."""
    from paperzoo.papers.switch.moe import SwitchMoE, SwitchMoEConfig

    moe = SwitchMoE(SwitchMoEConfig(dim=32, ffn_dim=64, num_experts=2, jitter_eps=0.0))
    enc = TransformerEncoder(dataclasses.replace(CFG, num_layers=1), make_ffn=lambda i: moe).eval()
    keep = torch.ones(2, 8, dtype=torch.bool)
    keep[1, 5:] = False
    res = enc(torch.randn(2, 8, 32), key_padding_mask=keep)
    assert int(res.aux[0]["expert_count"].sum()) == int(keep.sum())  # 13 real tokens routed, not 16


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm", "scalenorm", "none"])
@pytest.mark.parametrize("prenorm", [True, False])
def test_residual_gate_zero_is_rezero_on_any_norm(norm, prenorm):
    # x + alpha F(Norm(x)) with alpha = 0: every pre-norm block starts as the identity and alpha gets a gradient
    cfg = dataclasses.replace(CFG, norm=norm, prenorm=prenorm, residual_gate=0.0)
    blk = TransformerBlock(cfg)
    x = torch.randn(2, 5, 32)
    y = blk(x)
    if prenorm or norm == "none":
        torch.testing.assert_close(y, x)
    y.pow(2).sum().backward()
    assert blk.attn_gate.alpha.grad.abs() > 0 and blk.ffn_gate.alpha.grad.abs() > 0
    # with alpha set, the block is x + alpha * branch: alpha = 1 gives the ungated block
    with torch.no_grad():
        blk.attn_gate.alpha.fill_(1.0)
        blk.ffn_gate.alpha.fill_(1.0)
    plain = TransformerBlock(dataclasses.replace(cfg, residual_gate=None))
    plain.load_state_dict({k: v for k, v in blk.state_dict().items() if "gate" not in k})
    torch.testing.assert_close(blk(x), plain(x))


def test_shared_layers_reuse_blocks_in_order():
    cfg = dataclasses.replace(CFG, num_layers=4, shared_layers=2)
    enc = TransformerEncoder(cfg).eval()
    assert len(enc.layers) == 2 and enc.order == (0, 0, 1, 1)
    one = sum(p.numel() for p in TransformerBlock(cfg).parameters())
    assert sum(p.numel() for p in enc.parameters()) == 2 * one + sum(p.numel() for p in enc.norm.parameters())
    x = torch.randn(2, 5, 32)
    ref = x
    for i in (0, 0, 1, 1):
        ref = enc.layers[i](ref)
    torch.testing.assert_close(enc(x).last_hidden_state, enc.norm(ref))
    universal = TransformerEncoder(dataclasses.replace(CFG, num_layers=3, shared_layers=1))
    assert len(universal.layers) == 1 and universal.order == (0, 0, 0)
    with pytest.raises(ValueError, match="shared_layers must be None or a positive int dividing num_layers=3"):
        dataclasses.replace(CFG, shared_layers=2)


def test_fixup_init_makes_every_block_the_identity_and_scales_first_layers():
    from paperzoo.nn.transformer import fixup_init_

    cfg = dataclasses.replace(CFG, num_layers=4, norm="none", residual_gate=1.0)
    torch.manual_seed(0)
    ref = TransformerEncoder(cfg)
    torch.manual_seed(0)
    enc = fixup_init_(TransformerEncoder(cfg))
    L = 2 * 4  # two residual branches per layer
    for a, b in zip(ref.layers, enc.layers, strict=True):
        assert not b.attn.out.weight.detach().any() and not b.ffn.fc2.weight.detach().any()
        torch.testing.assert_close(b.attn.qkv.weight, a.attn.qkv.weight * L ** -0.5)  # L^(-1/(2m-2)), m = 2
        torch.testing.assert_close(b.ffn.fc1.weight, a.ffn.fc1.weight * L ** -0.5)
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(enc(x).last_hidden_state, x)  # identity at init
    enc(x).last_hidden_state.pow(2).sum().backward()
    assert enc.layers[0].ffn.fc2.weight.grad.abs().sum() > 0  # and it learns
    with pytest.raises(ValueError, match="expects a TransformerEncoder"):
        fixup_init_(nn.Linear(2, 2))


def test_t5_attention_is_unscaled_with_the_scale_folded_into_the_query_init():
    """T5 scores q.k without 1/sqrt(d_head) and initialises W_q 1/sqrt(d_head) smaller: at init the stack computes
    the scaled stack's function (same seed), but its attention scale is 1 and its query rows are the scaled ones'
    times d_head^-1/2; an explicit ``attn_scale`` keeps the usual init. Other schemes keep 1/sqrt(d_head)."""
    t5 = dataclasses.replace(CFG, position="t5", bias=True)
    hd = t5.head_dim
    torch.manual_seed(0)
    unscaled = TransformerEncoder(t5).eval()
    torch.manual_seed(0)
    scaled = TransformerEncoder(dataclasses.replace(t5, attn_scale=hd ** -0.5)).eval()
    for a, b in zip(unscaled.layers, scaled.layers, strict=True):
        assert a.attn.scale == 1.0 and b.attn.scale == pytest.approx(hd ** -0.5)
        torch.testing.assert_close(a.attn.qkv.weight[:t5.dim], b.attn.qkv.weight[:t5.dim] * hd ** -0.5)
        torch.testing.assert_close(a.attn.qkv.bias[:t5.dim], b.attn.qkv.bias[:t5.dim] * hd ** -0.5)
        torch.testing.assert_close(a.attn.qkv.weight[t5.dim:], b.attn.qkv.weight[t5.dim:])  # k, v untouched
    x = torch.randn(2, 9, 32)
    torch.testing.assert_close(unscaled(x).last_hidden_state, scaled(x).last_hidden_state, atol=1e-5, rtol=1e-5)
    for position in ("none", "alibi", "rotary"):
        enc = TransformerEncoder(dataclasses.replace(CFG, position=position))
        assert enc.layers[0].attn.scale == pytest.approx(hd ** -0.5)
