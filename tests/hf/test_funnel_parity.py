"""FunnelModel / FunnelBaseModel / FunnelForSequenceClassification parity with Hugging Face (random models, offline):
outputs to 1e-5 fp32 with padding and token types (incl. the [CLS] type 2), gradients, and the round trip."""

import pytest
import torch
import transformers

from paperzoo.hf import from_hf, to_hf
from paperzoo.papers.funnel.model import FunnelBase, FunnelClassifier, FunnelModel

CONFIGS = {
    "2-2-relshift": dict(block_sizes=[2, 2], num_decoder_layers=2),
    "1-2x2-1-factorized": dict(block_sizes=[1, 2, 1], block_repeats=[1, 2, 1], attention_type="factorized",
                               hidden_act="gelu"),
    "nosep-kvpool-max": dict(block_sizes=[1, 1, 1], separate_cls=False, pool_q_only=False, pooling_type="max"),
    "notrunc-relu": dict(block_sizes=[1, 1, 2], truncate_seq=False, hidden_act="relu", num_decoder_layers=1),
}
CLASSES = {"FunnelModel": FunnelModel, "FunnelBaseModel": FunnelBase,
           "FunnelForSequenceClassification": FunnelClassifier}


def make_hf(cls_name, name):
    cfg = transformers.FunnelConfig(vocab_size=61, d_model=32, n_head=2, d_head=16, d_inner=48, num_labels=3,
                                    **CONFIGS[name])
    torch.manual_seed(0)
    hf = getattr(transformers, cls_name)(cfg)
    with torch.no_grad():  # distinct values everywhere, so a mis-mapped tensor cannot hide
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return hf.eval()


def inputs(batch=3, seq=11):
    g = torch.Generator().manual_seed(seq)
    ids = torch.randint(0, 61, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, seq - 4:] = 0
    # not shorter: with min-pooled masks and no separate [CLS], a 3-token row is all padding by the third block, and
    # a fully masked row's softmax over "score - 1e6" only reflects fp32 rounding at 1e6 (in both libraries)
    mask[2, 6:] = 0
    types = torch.randint(0, 2, (batch, seq), generator=g)
    types[:, 0] = 2  # the [CLS] type: same segment as everything
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def _out(o):
    return o.logits if hasattr(o, "logits") and o.logits is not None else o.last_hidden_state


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("cls_name", list(CLASSES))
def test_outputs_match(cls_name, name):
    hf = make_hf(cls_name, name)
    ours = from_hf(hf)
    assert isinstance(ours, CLASSES[cls_name]) and not ours.training
    for seq in (11, 16):  # odd and even lengths
        _compare(hf, ours, inputs(seq=seq))


def _compare(hf, ours, x):
    with torch.no_grad():
        a, b = _out(hf(**x)), _out(ours(**x))
    assert a.shape == b.shape
    if a.shape[:2] == x["input_ids"].shape:  # token-level output: padded positions are free in both libraries
        a, b = a[x["attention_mask"].bool()], b[x["attention_mask"].bool()]
    assert float((a - b).abs().max()) <= 1e-5


def test_defaults_without_mask_and_types():
    hf = make_hf("FunnelModel", "2-2-relshift")
    ours = from_hf(hf)
    ids = inputs()["input_ids"]
    with torch.no_grad():
        assert float((hf(input_ids=ids).last_hidden_state - ours(input_ids=ids).last_hidden_state).abs().max()) <= 1e-5


@pytest.mark.parametrize("name", ["2-2-relshift", "1-2x2-1-factorized"])
def test_gradients_match(name):
    hf = make_hf("FunnelForSequenceClassification", name)
    ours = from_hf(hf)
    x = inputs(seq=13)
    labels = torch.tensor([0, 2, 1])
    hf(**x, labels=labels).loss.backward()
    ours(**x, labels=labels).loss.backward()
    theirs = dict(hf.named_parameters())
    for n, p in ours.named_parameters():
        assert float((p.grad - theirs[n].grad).abs().max()) <= 1e-5, n


@pytest.mark.parametrize("cls_name", list(CLASSES))
def test_round_trip(cls_name):
    hf = make_hf(cls_name, "1-2x2-1-factorized")
    back = to_hf(from_hf(hf))
    assert type(back).__name__ == cls_name and back.config.block_repeats == [1, 2, 1]
    x = inputs()
    with torch.no_grad():
        assert float((_out(hf(**x)) - _out(back(**x))).abs().max()) == 0.0
    for (n, p), (m, q) in zip(hf.state_dict().items(), back.state_dict().items(), strict=True):
        assert n == m and torch.equal(p, q)


def test_wrong_class_raises():
    from paperzoo.papers.funnel.hf import funnel_from_hf, funnel_to_hf

    with pytest.raises(ValueError, match="FunnelModel"):
        funnel_from_hf(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="FunnelModel"):
        funnel_to_hf(torch.nn.Linear(2, 2))


def test_native_model_to_hf():
    from paperzoo.papers.funnel.model import FunnelConfig

    torch.manual_seed(0)
    ours = FunnelBase(FunnelConfig.preset("tiny", blocks="1-2x2", attention_type="factorized")).eval()
    hf = to_hf(ours)
    assert type(hf).__name__ == "FunnelBaseModel" and hf.config.attention_type == "factorized"
    x = inputs(seq=12)
    x["input_ids"] = x["input_ids"] % ours.config.vocab_size
    _compare(hf, ours, x)
