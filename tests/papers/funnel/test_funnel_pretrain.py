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
