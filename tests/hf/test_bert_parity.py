"""BertModel / ElectraModel parity: random-init HF models (offline, from configs) converted with from_hf."""

import dataclasses

import pytest
import torch
import transformers

from paperzoo.hf import from_hf, to_hf
from paperzoo.nn.transformer import TextEncoder, TextEncoderConfig

CONFIGS = {
    "bert-96h3": ("BertModel", dict(hidden_size=96, num_attention_heads=3, num_hidden_layers=2, intermediate_size=160)),
    "bert-80h5": ("BertModel", dict(hidden_size=80, num_attention_heads=5, num_hidden_layers=3, intermediate_size=128,
                                    type_vocab_size=3)),
    "electra-e32": ("ElectraModel", dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2,
                                         intermediate_size=256, embedding_size=32)),
    "electra-e48h5": ("ElectraModel", dict(hidden_size=120, num_attention_heads=5, num_hidden_layers=2,
                                           intermediate_size=128, embedding_size=48, hidden_act="gelu_new")),
    "electra-noproj": ("ElectraModel", dict(hidden_size=128, num_attention_heads=2, num_hidden_layers=2,
                                            intermediate_size=128, embedding_size=128)),
}


def make_hf(name: str, impl: str = "sdpa", **over):
    cls_name, kw = CONFIGS[name]
    cfg_cls = transformers.ElectraConfig if cls_name == "ElectraModel" else transformers.BertConfig
    cfg = cfg_cls(vocab_size=101, max_position_embeddings=40, attn_implementation=impl, **{**kw, **over})
    torch.manual_seed(0)
    hf = getattr(transformers, cls_name)(cfg)
    with torch.no_grad():  # make every tensor distinct so a mis-mapped weight cannot hide (LayerNorms start at 1/0)
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return hf.eval()


def inputs(hf, batch=3, seq=13):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, hf.config.vocab_size, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    types = torch.randint(0, hf.config.type_vocab_size, (batch, seq), generator=g)
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


CASES = [(name, "sdpa") for name in CONFIGS] + [("bert-80h5", "eager"), ("electra-e48h5", "eager")]


@pytest.mark.parametrize(("name", "impl"), CASES)
def test_last_hidden_state_and_embedding_gradients_match(name, impl):
    hf = make_hf(name, impl)
    ours = from_hf(hf)
    assert isinstance(ours, TextEncoder) and not ours.training
    x = inputs(hf)
    a, b = hf(**x), ours(**x)
    assert (a.last_hidden_state - b.last_hidden_state).abs().max() <= 1e-5
    if getattr(a, "pooler_output", None) is not None:
        assert (a.pooler_output - b.pooler_output).abs().max() <= 1e-5
    # also without a mask and without token types
    a0, b0 = hf(input_ids=x["input_ids"]), ours(input_ids=x["input_ids"])
    assert (a0.last_hidden_state - b0.last_hidden_state).abs().max() <= 1e-5
    # gradients w.r.t. the word-embedding table, through a fixed random projection of the outputs
    w = torch.randn(a.last_hidden_state.shape, generator=torch.Generator().manual_seed(2))
    (a.last_hidden_state * w).sum().backward()
    (b.last_hidden_state * w).sum().backward()
    g_hf, g_ours = hf.embeddings.word_embeddings.weight.grad, ours.embeddings.word.weight.grad
    assert g_hf.abs().max() > 0
    assert (g_hf - g_ours).abs().max() <= 1e-4
    q_hf = hf.encoder.layer[0].attention.self.query.weight.grad
    q_ours = ours.encoder.layers[0].attn.qkv.weight.grad[: hf.config.hidden_size]
    assert (q_hf - q_ours).abs().max() <= 1e-4


def test_inputs_embeds_gradients_match():
    hf = make_hf("electra-e32")
    ours = from_hf(hf)
    x = inputs(hf)
    emb = hf.embeddings.word_embeddings(x["input_ids"]).detach()
    e1, e2 = emb.clone().requires_grad_(), emb.clone().requires_grad_()
    a = hf(inputs_embeds=e1, attention_mask=x["attention_mask"]).last_hidden_state
    b = ours(inputs_embeds=e2, attention_mask=x["attention_mask"]).last_hidden_state
    assert (a - b).abs().max() <= 1e-5
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    assert (e1.grad - e2.grad).abs().max() <= 1e-4


def test_train_mode_is_kept_and_matches_without_dropout():
    hf = make_hf("bert-96h3", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).train()
    ours = from_hf(hf)
    assert ours.training and all(m.training for m in ours.modules())
    x = inputs(hf)
    assert (hf(**x).last_hidden_state - ours(**x).last_hidden_state).abs().max() <= 1e-5
    assert from_hf(make_hf("bert-96h3")).cfg.transformer.dropout == pytest.approx(0.1)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_round_trip_state_dict_identical(name):
    hf = make_hf(name)
    back = to_hf(from_hf(hf))
    assert type(back) is type(hf) and not back.training
    assert (getattr(back, "pooler", None) is None) == (getattr(hf, "pooler", None) is None)
    s1, s2 = hf.state_dict(), back.state_dict()
    assert s1.keys() == s2.keys()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    x = inputs(hf)
    assert torch.equal(hf(**x).last_hidden_state, back(**x).last_hidden_state)


def test_to_hf_from_a_paperzoo_model_and_errors():
    cfg = TextEncoderConfig.bert(dim=32, num_layers=2, num_heads=4, ffn_dim=64, vocab_size=50, max_len=16)
    ours = TextEncoder(cfg).eval()
    hf = to_hf(ours)
    assert type(hf).__name__ == "BertModel"
    ids = torch.randint(0, 50, (2, 7))
    assert (hf(input_ids=ids).last_hidden_state - ours(ids).last_hidden_state).abs().max() <= 1e-5
    electra = TextEncoder(dataclasses.replace(cfg, embedding_dim=16, pooler=False, hf_class="ElectraModel"))
    assert type(to_hf(electra)).__name__ == "ElectraModel"
    prenorm = TextEncoder(dataclasses.replace(cfg, transformer=dataclasses.replace(cfg.transformer, prenorm=True)))
    with pytest.raises(ValueError, match="BERT-shaped"):
        to_hf(prenorm)
    with pytest.raises(ValueError, match="pooler"):
        to_hf(TextEncoder(dataclasses.replace(cfg, hf_class="ElectraModel")))
    with pytest.raises(ValueError, match="decoder"):
        from_hf(transformers.BertModel(transformers.BertConfig(
            vocab_size=20, hidden_size=16, num_attention_heads=2, num_hidden_layers=1, intermediate_size=16,
            is_decoder=True)))
