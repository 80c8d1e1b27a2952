"""paperzoo MobileNetV2 vs transformers' MobileNetV2 built offline from configs (random weights)."""

import pytest
import torch
import transformers

from paperzoo.hf import from_hf, to_hf
from paperzoo.papers.mobilenetv2.hf import HF_BN_MOMENTUM, config_to_hf
from paperzoo.papers.mobilenetv2.model import (
    MobileNetV2Config,
    MobileNetV2ForImageClassification,
    MobileNetV2Model,
    count_parameters,
)


def _randomize_bn(model: torch.nn.Module, seed: int = 0) -> None:
    """Non-trivial BatchNorm statistics and affine parameters, so a mis-mapped BN cannot pass."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.rand(n, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            with torch.no_grad():
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.rand(n, generator=g) - 0.5)


def _hf(width: float, tf_padding: bool, num_labels: int = 10, cls=transformers.MobileNetV2ForImageClassification):
    torch.manual_seed(0)
    config = transformers.MobileNetV2Config(depth_multiplier=width, tf_padding=tf_padding, num_labels=num_labels)
    model = cls(config)
    _randomize_bn(model)
    return model


# 0.55 is a width where HF's round-then-make_divisible differs from TF's float rounding
@pytest.mark.parametrize("width", [1.0, 0.35, 0.55])
@pytest.mark.parametrize("tf_padding", [True, False])
def test_logits_parity_eval(width, tf_padding):
    hf = _hf(width, tf_padding).eval()
    ours = from_hf(hf)
    assert isinstance(ours, MobileNetV2ForImageClassification) and not ours.training
    x = torch.randn(2, 3, 97, 97)  # odd size: exercises TF "SAME"'s asymmetric padding
    with torch.no_grad():
        ref = hf(pixel_values=x).logits
        got = ours(pixel_values=x).logits
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)
    assert count_parameters(ours) == count_parameters(hf)


def test_train_mode_outputs_grads_and_running_stats():
    hf = _hf(0.5, True).train()
    hf.dropout.p = 0.0  # dropout masks are random; compare the deterministic rest
    ours = from_hf(hf)
    assert ours.training and ours.dropout.p == 0.8  # HF's default config value (TF's keep probability)
    ours.dropout.p = 0.0
    x = torch.randn(4, 3, 64, 64)
    labels = torch.tensor([1, 2, 3, 4])
    ref = hf(pixel_values=x, labels=labels)
    got = ours(pixel_values=x, labels=labels)
    torch.testing.assert_close(got.logits, ref.logits, atol=1e-5, rtol=0)
    ref.loss.backward()
    got.loss.backward()
    torch.testing.assert_close(ours.classifier.weight.grad, hf.classifier.weight.grad, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.mobilenet_v2.stem.conv.weight.grad,
                               hf.mobilenet_v2.conv_stem.first_conv.convolution.weight.grad, atol=1e-5, rtol=1e-4)
    # the running statistics move identically, because the converter keeps HF's momentum
    torch.testing.assert_close(ours.mobilenet_v2.head.bn.running_mean,
                               hf.mobilenet_v2.conv_1x1.normalization.running_mean)


def test_hf_batchnorm_momentum_is_tf_decay():
    """HF passes TF's decay (0.997) as PyTorch momentum: running stats are ~the last batch's."""
    hf = _hf(0.35, True)
    momenta = {m.momentum for m in hf.modules() if isinstance(m, torch.nn.BatchNorm2d)}
    assert momenta == {HF_BN_MOMENTUM} == {0.997}
    ours = from_hf(hf)
    assert {m.momentum for m in ours.modules() if isinstance(m, torch.nn.BatchNorm2d)} == {0.997}
    from paperzoo.papers.mobilenetv2.hf import mobilenetv2_from_hf

    fixed = mobilenetv2_from_hf(hf, bn_momentum=0.003)
    assert {m.momentum for m in fixed.modules() if isinstance(m, torch.nn.BatchNorm2d)} == {0.003}


def test_base_model_parity_and_tf_head_size():
    hf = _hf(1.0, True, cls=transformers.MobileNetV2Model).eval()
    ours = from_hf(hf)
    assert isinstance(ours, MobileNetV2Model)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        ref, got = hf(pixel_values=x), ours(pixel_values=x)
    torch.testing.assert_close(got.last_hidden_state, ref.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.pooler_output, ref.pooler_output, atol=1e-5, rtol=0)
    # HF's figure for the TF checkpoints' config (1001 classes, class 0 = background)
    tf_like = transformers.MobileNetV2ForImageClassification(transformers.MobileNetV2Config(num_labels=1001))
    assert count_parameters(tf_like) == 3_504_872 + 1280 + 1 == 3_506_153
    assert count_parameters(MobileNetV2ForImageClassification(MobileNetV2Config(num_classes=1001))) == 3_506_153


@pytest.mark.parametrize("tf_padding", [True, False])
def test_round_trip_to_hf(tf_padding):
    torch.manual_seed(1)
    ours = MobileNetV2ForImageClassification(MobileNetV2Config(width_multiplier=0.5, num_classes=7,
                                                               tf_padding=tf_padding)).eval()
    _randomize_bn(ours, seed=3)
    hf = to_hf(ours)
    assert type(hf).__name__ == "MobileNetV2ForImageClassification" and not hf.training
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(hf(pixel_values=x).logits, ours(pixel_values=x).logits, atol=1e-5, rtol=0)
    back = from_hf(hf)
    for (k, a), (_, b) in zip(ours.state_dict().items(), back.state_dict().items(), strict=True):
        assert torch.equal(a, b), k


def test_to_hf_rejects_what_hf_cannot_express():
    with pytest.raises(ValueError, match="linear bottlenecks"):
        config_to_hf(MobileNetV2Config(linear_bottleneck=False))
    with pytest.raises(ValueError, match="stem_stride"):
        config_to_hf(MobileNetV2Config(stem_stride=1))


def test_from_hf_and_to_hf_keep_the_dtype():
    """A bf16 HF model converts to a bf16 paperzoo model with bit-identical weights and back (as the text
    converters do), instead of being silently upcast to fp32 by load_state_dict."""
    hf = _hf(0.35, True).to(torch.bfloat16)
    ours = from_hf(hf)
    assert {p.dtype for p in ours.parameters()} == {torch.bfloat16}
    back = to_hf(ours)
    assert {p.dtype for p in back.parameters()} == {torch.bfloat16}
    for (k, a), b in zip(hf.state_dict().items(), back.state_dict().values(), strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b), k
