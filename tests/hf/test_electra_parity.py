"""ElectraForPreTraining / ElectraForMaskedLM / ElectraForSequenceClassification parity (random HF models, offline),
and the joint pretraining step against the same step assembled from HF's two models."""

import pytest
import torch
import transformers

from paperzoo.hf import from_hf, to_hf
from paperzoo.papers.electra.model import ElectraClassifier, ElectraDiscriminator, ElectraGenerator

CONFIGS = {
    "e32-h64": dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=128,
                    embedding_size=32),
    "e48-h120-gelu_new": dict(hidden_size=120, num_attention_heads=5, num_hidden_layers=2, intermediate_size=96,
                              embedding_size=48, hidden_act="gelu_new", type_vocab_size=3),
    "noproj-relu": dict(hidden_size=48, num_attention_heads=2, num_hidden_layers=3, intermediate_size=64,
                        embedding_size=48, hidden_act="relu"),
}
CLASSES = {"ElectraForPreTraining": ElectraDiscriminator, "ElectraForMaskedLM": ElectraGenerator,
           "ElectraForSequenceClassification": ElectraClassifier}


def make_hf(cls_name, name, **over):
    cfg = transformers.ElectraConfig(vocab_size=97, max_position_embeddings=40, **{**CONFIGS[name], **over})
    torch.manual_seed(0)
    hf = getattr(transformers, cls_name)(cfg)
    with torch.no_grad():  # distinct values everywhere, so a mis-mapped tensor cannot hide
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return hf.eval()


def inputs(cfg, batch=3, seq=11):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    types = torch.randint(0, cfg.type_vocab_size, (batch, seq), generator=g)
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def _max_diff(a, b, mask=None):
    if mask is not None:  # padded positions are free in both libraries
        a, b = a[mask.bool()], b[mask.bool()]
    return float((a - b).detach().abs().max())


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("cls_name", list(CLASSES))
def test_logits_gradients_and_round_trip(cls_name, name):
    over = {"num_labels": 3} if cls_name == "ElectraForSequenceClassification" else {}
    hf = make_hf(cls_name, name, **over)
    ours = from_hf(hf)
    assert isinstance(ours, CLASSES[cls_name]) and not ours.training
    x = inputs(hf.config)
    a, b = hf(**x).logits, ours(**x).logits
    assert a.shape == b.shape
    tok_mask = x["attention_mask"] if a.ndim >= 2 and a.shape[:2] == x["input_ids"].shape else None
    assert _max_diff(a, b, tok_mask) <= 1e-5
    # gradients through a fixed random projection of the logits
    w = torch.randn(a.shape, generator=torch.Generator().manual_seed(2))
    if tok_mask is not None:
        w = w * (tok_mask if a.ndim == 2 else tok_mask[..., None])
    (a * w).sum().backward()
    (b * w).sum().backward()
    g_hf, g_ours = hf.electra.embeddings.word_embeddings.weight.grad, ours.body.embeddings.word.weight.grad
    assert g_hf.abs().max() > 0 and _max_diff(g_hf, g_ours) <= 1e-4
    # back to HF: same logits
    back = to_hf(ours).eval()
    assert type(back).__name__ == cls_name
    with torch.no_grad():
        assert _max_diff(back(**x).logits, a.detach(), tok_mask) <= 1e-5


def test_losses_match_hf():
    x = inputs(make_hf("ElectraForPreTraining", "e32-h64").config)
    g = torch.Generator().manual_seed(3)
    hf = make_hf("ElectraForPreTraining", "e32-h64")
    y = torch.randint(0, 2, x["input_ids"].shape, generator=g)
    assert abs(float(hf(**x, labels=y).loss - from_hf(hf)(**x, labels=y).loss)) <= 1e-5
    hf = make_hf("ElectraForMaskedLM", "e32-h64")
    y = torch.where(torch.rand(x["input_ids"].shape, generator=g) < 0.3, x["input_ids"], -100)
    assert abs(float(hf(**x, labels=y).loss - from_hf(hf)(**x, labels=y).loss)) <= 1e-5
    hf = make_hf("ElectraForSequenceClassification", "e32-h64", num_labels=3)
    y = torch.tensor([0, 2, 1])
    assert abs(float(hf(**x, labels=y).loss - from_hf(hf)(**x, labels=y).loss)) <= 1e-5


def test_untied_generator_head_round_trips():
    hf = make_hf("ElectraForMaskedLM", "e32-h64", tie_word_embeddings=False)
    assert hf.generator_lm_head.weight is not hf.electra.embeddings.word_embeddings.weight
    ours = from_hf(hf)
    assert ours.head.weight is not None
    x = inputs(hf.config)
    assert _max_diff(hf(**x).logits, ours(**x).logits, x["attention_mask"]) <= 1e-5
    back = to_hf(ours)
    assert back.generator_lm_head.weight is not back.electra.embeddings.word_embeddings.weight
    tied = from_hf(make_hf("ElectraForMaskedLM", "e32-h64"))
    assert tied.head.weight is None


def test_generator_positions_equal_full_logits():
    ours = from_hf(make_hf("ElectraForMaskedLM", "e48-h120-gelu_new"))
    x = inputs(ours.body.cfg)
    pos = torch.rand(x["input_ids"].shape, generator=torch.Generator().manual_seed(4)) < 0.3
    full = ours(**x).logits
    assert _max_diff(ours(**x, positions=pos).logits, full[pos]) <= 1e-6


def test_wrong_class_raises():
    from paperzoo.papers.electra.hf import discriminator_from_hf

    with pytest.raises(ValueError, match="ElectraForPreTraining"):
        discriminator_from_hf(make_hf("ElectraForMaskedLM", "e32-h64"))


@pytest.mark.parametrize("dropout", [0.0])
def test_joint_step_equals_hf_assembly(dropout):
    """Our ElectraPretrainer step = HF ElectraForMaskedLM + ElectraForPreTraining assembled by hand: loss and grads."""
    from paperzoo.bench.electra import _batch, build, hf_pretrain_step

    ours, hf_gen, hf_disc = build(hidden=64, layers=2, embedding=32, vocab=211, dropout=dropout)
    ids, mask = _batch(4, 24, 211)
    masked = ours.mask(ids, mask, torch.Generator().manual_seed(5))
    a = ours(ids, mask, masked=masked, noise_generator=torch.Generator().manual_seed(6))
    b = hf_pretrain_step(hf_gen, hf_disc, ids, mask, masked, noise_generator=torch.Generator().manual_seed(6))
    assert abs(a.loss.item() - b.item()) <= 1e-4 * max(1.0, abs(b.item()))
    a.loss.backward()
    b.backward()
    g1 = ours.discriminator_body.embeddings.word.weight.grad
    g2 = hf_disc.electra.embeddings.word_embeddings.weight.grad
    assert g1.abs().max() > 0 and float((g1 - g2).abs().max()) <= 1e-4
    g1 = ours.generator.body.encoder.layers[0].ffn.fc1.weight.grad
    g2 = hf_gen.electra.encoder.layer[0].intermediate.dense.weight.grad
    assert float((g1 - g2).abs().max()) <= 1e-4
