"""Funnel as the ELECTRA discriminator: the objective is ELECTRA's own; embeddings tied; loss falls; transfer."""

import pytest
import torch

from paperzoo.papers.funnel.model import FunnelBase, FunnelConfig, FunnelModel
from paperzoo.papers.funnel.pretrain import build_pretrainer, classifier_from_pretrained


def test_electra_pretraining_learns_and_transfers():
    torch.manual_seed(0)
    cfg = FunnelConfig.preset("tiny", blocks="1-1", dropout=0.0, attn_dropout=0.0, vocab_size=60)
    model = build_pretrainer(cfg, generator_size=0.5, max_len=32)
    assert isinstance(model.discriminator_body, FunnelModel)
    assert model.generator.body.embeddings.word is model.discriminator_body.embeddings.word_embeddings
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 60, (8, 16), generator=g)
    ids[:, 0] = 2  # [CLS]
    mask = torch.ones_like(ids)
    mask[3, 12:] = 0
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for step in range(40):
        torch.manual_seed(step % 4)  # four fixed maskings, so the fall is learning, not mask luck
        out = model(ids, mask)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        losses.append(out.loss.item())
    assert out.disc_logits.shape == ids.shape
    assert sum(losses[-4:]) < 0.8 * sum(losses[:4])
    clf = classifier_from_pretrained(model, num_labels=3)
    enc = model.discriminator_body
    with torch.no_grad():
        base_out = clf.funnel(ids, mask).last_hidden_state
        ref = FunnelBase(cfg)
        ref.embeddings, ref.encoder = enc.embeddings, enc.encoder
        assert torch.equal(base_out, ref(ids, mask).last_hidden_state)
    assert clf(ids, mask).logits.shape == (8, 3)


def test_build_validates():
    with pytest.raises(ValueError, match="FunnelConfig"):
        build_pretrainer(object())
    with pytest.raises(ValueError, match="generator_size"):
        build_pretrainer(FunnelConfig.preset("tiny"), generator_size=0.0)
    with pytest.raises(ValueError, match="embedding_std"):
        build_pretrainer(FunnelConfig.preset("tiny"), embedding_std=0.0)


def test_tied_word_table_has_electras_init_for_funnel_and_the_standard_baseline():
    """The table the generator's logits use is N(0, 0.02) as ELECTRA's (the official Funnel N(0, 1) made the
    generator's logits ~50x larger); the same for the Funnel and its standard-Transformer baseline."""
    from paperzoo.papers.electra.model import ElectraConfig, build_generator_and_discriminator
    from paperzoo.papers.funnel.pretrain import standard_config

    cfg = FunnelConfig.preset("small", vocab_size=2000, dropout=0.0, attn_dropout=0.0)
    ids = torch.randint(5, 2000, (4, 32), generator=torch.Generator().manual_seed(0))

    def logit_std(model):
        with torch.no_grad():
            return float(model.generator(ids, torch.ones_like(ids)).logits.std())

    torch.manual_seed(0)
    stds = {}
    for name, c in (("funnel", cfg), ("standard", standard_config(cfg, 4))):
        model = build_pretrainer(c, max_len=32)
        w = model.discriminator_body.embeddings.word_embeddings.weight.detach()
        assert model.generator.body.embeddings.word is model.discriminator_body.embeddings.word_embeddings  # tied
        assert float(w[1:].std()) == pytest.approx(0.02, rel=0.05) and float(w[0].abs().max()) == 0.0  # pad row 0
        stds[name] = logit_std(model)
    official = build_pretrainer(cfg, max_len=32, embedding_std=None)
    w_official = official.discriminator_body.embeddings.word_embeddings.weight.detach()
    assert float(w_official.std()) == pytest.approx(1.0, rel=0.05)
    torch.manual_seed(0)
    gen, _ = build_generator_and_discriminator(ElectraConfig.preset("small", vocab_size=2000, max_len=32))
    electra = float(gen(ids, torch.ones_like(ids)).logits.detach().std())
    for s in stds.values():
        assert s == pytest.approx(electra, rel=0.5)  # ELECTRA's scale
    assert logit_std(official) > 20 * electra  # the artefact the old init produced
