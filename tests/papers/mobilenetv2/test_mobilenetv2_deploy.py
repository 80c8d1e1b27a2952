"""MobileNetV2 deployment: folded BN, channels_last, ONNX + onnxruntime, int8, save/load and export."""

import warnings

import pytest
import torch

from paperzoo.papers.mobilenetv2.deploy import (
    export,
    export_onnx,
    fold_batchnorm,
    from_pretrained,
    model_size_bytes,
    onnx_max_abs_diff,
    optimize_for_inference,
    quantize_int8,
    save_pretrained,
)
from paperzoo.papers.mobilenetv2.model import MobileNetV2Config, MobileNetV2ForImageClassification


def _model(**overrides) -> MobileNetV2ForImageClassification:
    """A tiny classifier with non-trivial BN statistics and O(1) logits."""
    torch.manual_seed(0)
    m = MobileNetV2ForImageClassification(MobileNetV2Config.preset("tiny", **overrides)).eval()
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            n = mod.num_features
            mod.running_mean.copy_(torch.rand(n, generator=g) * 0.2 - 0.1)
            mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            with torch.no_grad():
                mod.weight.copy_(torch.rand(n, generator=g) + 0.5)
                mod.bias.copy_(torch.rand(n, generator=g) * 0.2)
    with torch.no_grad():
        m.classifier.weight.mul_(100)
    return m


@pytest.mark.parametrize("tf_padding", [True, False])
def test_folded_bn_and_channels_last_equal_eager(tf_padding):
    m = _model(tf_padding=tf_padding, stem_stride=2)
    x = torch.randn(3, 3, 33, 33)
    with torch.no_grad():
        ref = m(pixel_values=x).logits
        folded = fold_batchnorm(m)(pixel_values=x).logits
        fast = optimize_for_inference(m)(pixel_values=x.contiguous(memory_format=torch.channels_last)).logits
    assert ref.abs().max() > 0.5  # a meaningful scale for the tolerance
    assert not any(isinstance(b, torch.nn.BatchNorm2d) for b in fold_batchnorm(m).modules())
    torch.testing.assert_close(folded, ref, atol=1e-4, rtol=0)
    torch.testing.assert_close(fast, ref, atol=1e-4, rtol=0)


@pytest.mark.parametrize("tf_padding", [True, False])
def test_onnx_runtime_equals_pytorch(tmp_path, tf_padding):
    m = _model(tf_padding=tf_padding, stem_stride=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_onnx(m, tmp_path / "m.onnx", image_size=32)
    for batch in (1, 4):  # the batch dimension is dynamic
        assert onnx_max_abs_diff(m, path, torch.randn(batch, 3, 32, 32)) < 1e-4


def test_int8_quantization_close_and_smaller():
    m = _model()
    torch.manual_seed(2)
    calib = torch.randn(64, 3, 32, 32)
    q = quantize_int8(m, calib)
    x = torch.randn(16, 3, 32, 32)
    with torch.no_grad():
        ref = m(pixel_values=x).logits
        got = q(x)
    assert got.shape == ref.shape and got.dtype == torch.float32
    rel = ((got - ref).norm() / ref.norm()).item()
    assert rel < 0.06, rel  # measured 0.035 (fbgemm/x86 per-channel weights, calibrated activations)
    assert (got.argmax(1) == ref.argmax(1)).float().mean() >= 0.9  # measured 1.0
    assert model_size_bytes(q) < 0.6 * model_size_bytes(m)  # ~0.27 at full size; packing overhead here
    with pytest.raises(ValueError, match="backend"):
        quantize_int8(m, calib, backend="tpu")


def test_save_load_and_export(tmp_path):
    m = _model()
    save_pretrained(m, tmp_path / "model")
    back = from_pretrained(tmp_path / "model")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(back(pixel_values=x).logits, m(pixel_values=x).logits)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onnx_path = export(tmp_path / "model", tmp_path / "out", fmt="onnx")
        ts_path = export(tmp_path / "model", tmp_path / "out", fmt="torchscript")
    assert onnx_path.suffix == ".onnx" and onnx_path.is_file()
    scripted = torch.jit.load(str(ts_path))
    with torch.no_grad():
        torch.testing.assert_close(scripted(x), m(pixel_values=x).logits, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="fmt must be"):
        export(tmp_path / "model", tmp_path / "out", fmt="tflite")
    with pytest.raises(ValueError, match="config.json"):
        from_pretrained(tmp_path / "nothing")


@pytest.mark.slow
def test_full_size_onnx_and_fold(tmp_path):
    m = MobileNetV2ForImageClassification(MobileNetV2Config()).eval()
    with torch.no_grad():
        m.classifier.weight.mul_(100)
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(optimize_for_inference(m)(pixel_values=x).logits, m(pixel_values=x).logits,
                                   atol=1e-4, rtol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export_onnx(m, tmp_path / "m.onnx", image_size=224)
    assert onnx_max_abs_diff(m, path, x) < 1e-4


@pytest.mark.slow
def test_export_int8_torchscript(tmp_path):
    m = _model()
    save_pretrained(m, tmp_path / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = export(tmp_path / "model", tmp_path / "out", fmt="int8", calibration=torch.randn(64, 3, 32, 32))
    q = torch.jit.load(str(path))
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert q(x).shape == (4, 10)
    with pytest.raises(ValueError, match="calibration"):
        export(tmp_path / "model", tmp_path / "out", fmt="int8", calibration="imagenet")


def test_onnx_export_without_onnxruntime_refuses_to_claim_a_check(tmp_path, monkeypatch):
    """Without onnxruntime the export used to return an unchecked file silently: now --verify (the default) stops
    with the remedy, and --no-verify writes the file and says it is unchecked."""
    import importlib.util

    from typer.testing import CliRunner

    from paperzoo.cli import app

    save_pretrained(_model(), tmp_path / "model")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(ImportError, match=r"onnxruntime is not installed.*paperzoo\[deploy\].*verify=False"):
        export(tmp_path / "model", tmp_path / "out", fmt="onnx")
    runner = CliRunner()
    bad = runner.invoke(app, ["export", str(tmp_path / "model"), "--out", str(tmp_path / "cli")])
    assert bad.exit_code == 2 and "--no-verify" in bad.output and not (tmp_path / "cli").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = runner.invoke(app, ["export", str(tmp_path / "model"), "--out", str(tmp_path / "cli"), "--no-verify"],
                           env={"COLUMNS": "200"})
    assert ok.exit_code == 0 and "not checked" in ok.output and (tmp_path / "cli" / "model.onnx").is_file()
