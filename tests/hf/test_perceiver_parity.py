"""Perceiver interop: HF PerceiverModel (bytes preprocessor / raw features) and PerceiverForMaskedLM, random
weights built offline; outputs and gradients match to 1e-5 in fp32, and round trips are exact."""

import pytest
import torch
import transformers
from transformers.models.perceiver.modeling_perceiver import PerceiverTextPreprocessor

from paperzoo.hf import from_hf, to_hf
from paperzoo.papers.perceiver.model import Perceiver

CONFIGS = {
    "default-kv": dict(),
    "qk-shape-q-multihead": dict(cross_attention_shape_for_attention="q", num_cross_attention_heads=2,
                                 num_self_attention_heads=4, num_blocks=2, self_attention_widening_factor=2),
    "explicit-qk-v": dict(qk_channels=32, v_channels=48, num_self_attends_per_block=3, use_query_residual=False,
                          cross_attention_widening_factor=2, hidden_act="gelu_new"),
}


def _cfg(**kw):
    base = dict(num_latents=12, d_latents=48, d_model=32, num_blocks=1, num_self_attends_per_block=2,
                num_self_attention_heads=4, num_cross_attention_heads=1, vocab_size=262,
                max_position_embeddings=40, attention_probs_dropout_prob=0.0)
    return transformers.PerceiverConfig(**{**base, **kw})


def _inputs(b=3, s=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 262, (b, s), generator=g)
    mask = torch.ones(b, s, dtype=torch.long)
    mask[1, 25:] = 0
    mask[2, 7:] = 0
    return ids, mask


@pytest.mark.parametrize("name", list(CONFIGS))
def test_masked_lm_logits_and_grads_match(name):
    torch.manual_seed(0)
    hf = transformers.PerceiverForMaskedLM(_cfg(**CONFIGS[name])).eval()
    ours = from_hf(hf)
    assert isinstance(ours, Perceiver) and ours.config.scheme == "io"
    ids, mask = _inputs()
    labels = ids.clone()
    labels[:, ::3] = -100
    ref = hf(inputs=ids, attention_mask=mask, labels=labels)
    out = ours(inputs=ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == ref.logits.shape == (3, 40, 262)
    assert (out.logits - ref.logits).abs().max() < 1e-5
    assert abs(out.loss.item() - ref.loss.item()) < 1e-5
    ref.loss.backward()
    out.loss.backward()
    g_hf = hf.perceiver.encoder.self_attends[0].attention.self.query.weight.grad
    d = ours.config.self_qk_dim
    g_ours = ours.encoder.latent[0][0].attn.qkv.weight.grad[:d]
    assert (g_hf - g_ours).abs().max() < 1e-5
    assert (hf.perceiver.embeddings.latents.grad - ours.encoder.latents.grad).abs().max() < 1e-5


def test_masked_lm_accepts_input_ids_and_round_trips():
    torch.manual_seed(1)
    hf = transformers.PerceiverForMaskedLM(_cfg()).eval()
    ours = from_hf(hf)
    ids, mask = _inputs(seed=1)
    assert (ours(input_ids=ids, attention_mask=mask).logits - hf(input_ids=ids, attention_mask=mask).logits
            ).abs().max() < 1e-5
    back = to_hf(ours)
    assert type(back).__name__ == "PerceiverForMaskedLM"
    sd, sd2 = hf.state_dict(), back.state_dict()
    assert set(sd) == set(sd2) and all(torch.equal(sd[k], sd2[k]) for k in sd)


@pytest.mark.parametrize("name", ["default-kv", "qk-shape-q-multihead"])
def test_perceiver_model_with_text_preprocessor(name):
    torch.manual_seed(2)
    cfg = _cfg(**CONFIGS[name])
    hf = transformers.PerceiverModel(cfg, input_preprocessor=PerceiverTextPreprocessor(cfg)).eval()
    ours = from_hf(hf)
    ids, mask = _inputs(s=31, seed=2)  # shorter than max_position_embeddings
    ref = hf(inputs=ids, attention_mask=mask).last_hidden_state
    out = ours(inputs=ids, attention_mask=mask).last_hidden_state
    assert out.shape == ref.shape == (3, 12, 48)
    assert (out - ref).abs().max() < 1e-5
    back = to_hf(ours)
    assert isinstance(back.input_preprocessor, PerceiverTextPreprocessor)
    assert (back(inputs=ids, attention_mask=mask).last_hidden_state - ref).abs().max() == 0


def test_perceiver_model_on_raw_features():
    torch.manual_seed(3)
    hf = transformers.PerceiverModel(_cfg(num_blocks=3)).eval()
    ours = from_hf(hf)
    x = torch.randn(2, 50, 32)
    assert (ours(inputs=x).last_hidden_state - hf(inputs=x).last_hidden_state).abs().max() < 1e-5


def test_unsupported_hf_models_are_refused():
    cfg = _cfg(num_labels=3)
    hf = transformers.PerceiverForSequenceClassification(cfg)
    with pytest.raises(TypeError, match="no paperzoo converter"):
        from_hf(hf)
