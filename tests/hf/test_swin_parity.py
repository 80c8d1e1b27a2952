"""Swin parity with Hugging Face: random HF models built offline, converted both ways, outputs and gradients."""

from __future__ import annotations

import pytest
import torch
import transformers

from paperzoo.hf import from_hf, to_hf
from paperzoo.papers.swin.hf import _key_map
from paperzoo.papers.swin.model import SwinConfig, SwinForImageClassification, SwinModel

CONFIGS = {
    "2stage": dict(image_size=32, patch_size=2, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=4),
    "3stage-ape": dict(image_size=32, patch_size=2, embed_dim=24, depths=[2, 1, 2], num_heads=[2, 3, 6],
                       window_size=4, use_absolute_embeddings=True),
    "no-qkv-bias-w3": dict(image_size=24, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[1, 2],
                           window_size=3, qkv_bias=False, mlp_ratio=2.0),
}


def _hf(cls, name: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    cfg = transformers.SwinConfig(drop_path_rate=0.0, num_labels=5, **CONFIGS[name], **extra)
    model = cls(cfg).eval()
    with torch.no_grad():  # HF zero-initialises bias tables; give every weight some signal
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def _grads(model, prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: p.grad for k, p in model.named_parameters()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("cls", [transformers.SwinModel, transformers.SwinForImageClassification])
def test_outputs_and_gradients_match_hf(cls, name):
    hf = _hf(cls, name)
    ours = from_hf(hf)
    assert isinstance(ours, SwinModel if cls is transformers.SwinModel else SwinForImageClassification)
    size = hf.config.image_size
    x = torch.randn(2, 3, size, size)
    a, b = hf(pixel_values=x), ours(pixel_values=x)
    if cls is transformers.SwinModel:
        torch.testing.assert_close(b.last_hidden_state, a.last_hidden_state, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.pooler_output, a.pooler_output, atol=1e-5, rtol=1e-5)
        la, lb = a.last_hidden_state.square().mean(), b.last_hidden_state.square().mean()
    else:
        torch.testing.assert_close(b.logits, a.logits, atol=1e-5, rtol=1e-5)
        la, lb = a.logits.square().mean(), b.logits.square().mean()
    la.backward()
    lb.backward()
    hf_grads = dict(hf.named_parameters())
    prefix = "swin." if cls is transformers.SwinForImageClassification else ""
    km = {prefix + k: v for k, v in _key_map(hf_grads, ours.config, prefix).items()}
    if prefix:
        km.update({"head.weight": ("classifier.weight",), "head.bias": ("classifier.bias",)})
    for k, p in ours.named_parameters():
        ref = torch.cat([hf_grads[n].grad for n in km[k]]).reshape(p.shape)
        torch.testing.assert_close(p.grad, ref, atol=1e-5, rtol=1e-4, msg=k)


@pytest.mark.parametrize("cls", [transformers.SwinModel, transformers.SwinForImageClassification])
def test_round_trip_to_hf(cls):
    hf = _hf(cls, "3stage-ape")
    back = to_hf(from_hf(hf))
    assert type(back) is cls
    for k, v in hf.state_dict().items():
        torch.testing.assert_close(back.state_dict()[k], v, msg=k)


def test_to_hf_from_ours():
    torch.manual_seed(0)
    ours = SwinForImageClassification(SwinConfig.preset("tiny", drop_path_rate=0.0)).eval()
    hf = to_hf(ours)
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(hf(pixel_values=x).logits, ours(pixel_values=x).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("size", [(30, 27), (44, 52), (26, 34)])
def test_non_divisible_sizes_match_hf_with_mask_padding_false(size):
    """HF pads windows with zeros and attends to them: ``mask_padding=False`` (set by from_hf) reproduces it;
    our default masks the padding and so differs exactly there."""
    hf = _hf(transformers.SwinModel, "2stage")
    ours = from_hf(hf)
    assert ours.config.mask_padding is False
    x = torch.randn(1, 3, *size)
    with torch.no_grad():
        ref = hf(pixel_values=x).last_hidden_state
        torch.testing.assert_close(ours(pixel_values=x).last_hidden_state, ref, atol=1e-5, rtol=1e-5)
        ours.set_mask_padding(True)
        assert (ours(pixel_values=x).last_hidden_state - ref).abs().max() > 1e-4


@pytest.mark.slow
def test_swin_t_matches_hf_at_224():
    torch.manual_seed(0)
    hf = transformers.SwinForImageClassification(transformers.SwinConfig(drop_path_rate=0.0, num_labels=1000)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.02 * torch.randn_like(p))
    ours = from_hf(hf)
    assert sum(p.numel() for p in ours.parameters()) == 28_288_354
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(ours(pixel_values=x).logits, hf(pixel_values=x).logits, atol=1e-5, rtol=1e-5)


def test_from_hf_and_to_hf_keep_the_dtype():
    """A bf16 HF model converts to a bf16 paperzoo model with bit-identical weights and back (as the text
    converters do), instead of being silently upcast to fp32 by load_state_dict."""
    hf = _hf(transformers.SwinForImageClassification, "2stage").to(torch.bfloat16)
    ours = from_hf(hf)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    back = to_hf(ours)
    assert {p.dtype for p in back.parameters()} == {torch.bfloat16}
    for (k, a), b in zip(hf.state_dict().items(), back.state_dict().values(), strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b), k

