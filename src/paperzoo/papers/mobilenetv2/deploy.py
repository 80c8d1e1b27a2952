"""Deploying MobileNetV2: folded BatchNorm, channels_last, ONNX export, post-training int8, and an export command.

The paper's motivation is inference on phones, so the deployed form matters:

* :func:`fold_batchnorm` merges each BatchNorm into the convolution before it (eval-mode statistics),
  ``w' = w * gamma / sqrt(var + eps)``, ``b' = beta - mean * gamma / sqrt(var + eps)``, removing 52 ops.
* :func:`optimize_for_inference` = fold + ``channels_last`` (NHWC), the layout in which oneDNN's depthwise
  convolutions are fast on CPU.
* :func:`export_onnx` writes an ONNX graph; :func:`onnx_max_abs_diff` runs it with onnxruntime.
* :func:`quantize_int8` is post-training static quantization (torch.ao eager mode, x86/fbgemm backend):
  per-channel int8 weights, per-tensor uint8 activations calibrated on sample images.
* :func:`export` is the command-line entry: a saved model folder -> ``.onnx`` / ``.pt`` files.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from paperzoo.nn.outputs import ClassifierOutput
from paperzoo.papers.mobilenetv2.model import (
    ConvNormAct,
    InvertedResidual,
    MobileNetV2Config,
    MobileNetV2ForImageClassification,
    MobileNetV2Model,
    _same_padding,
    normalize,
)

# ----------------------------------------------------------------------------------------------- save / load


def save_pretrained(model: nn.Module, directory: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` (weights and BN statistics) to ``directory``."""
    from safetensors.torch import save_file

    if not isinstance(model, MobileNetV2ForImageClassification | MobileNetV2Model):
        raise ValueError(f"expected a MobileNetV2 model, got {type(model).__name__}")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cfg = asdict(model.config)
    cfg["class"] = type(model).__name__
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(d / "model.safetensors"))
    return d


def from_pretrained(directory: str | Path) -> nn.Module:
    """Load a model written by :func:`save_pretrained` (in eval mode)."""
    from safetensors.torch import load_file

    d = Path(directory)
    if not (d / "config.json").is_file() or not (d / "model.safetensors").is_file():
        raise ValueError(f"{d} must contain config.json and model.safetensors (see save_pretrained)")
    try:
        cfg = json.loads((d / "config.json").read_text())
    except ValueError as e:
        raise ValueError(f"{d / 'config.json'} is not valid JSON ({e})") from e
    if not isinstance(cfg, dict):
        raise ValueError(f"{d / 'config.json'}: expected a JSON object of MobileNetV2Config fields")
    cls = MobileNetV2Model if cfg.pop("class", "") == "MobileNetV2Model" else MobileNetV2ForImageClassification
    if "bn_eps" in cfg:  # saved before the config's epsilon was named norm_eps
        cfg["norm_eps"] = cfg.pop("bn_eps")
    _check_config_keys(cfg, d / "config.json")
    try:
        cfg["blocks"] = tuple(tuple(r) for r in cfg["blocks"])
        model = cls(MobileNetV2Config(**cfg))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{d / 'config.json'} does not describe a MobileNetV2Config: {e}") from e
    try:
        model.load_state_dict(load_file(str(d / "model.safetensors")))
    except RuntimeError as e:  # shapes or names that config.json does not build
        first = str(e).strip().splitlines()[0]
        raise ValueError(f"{d / 'model.safetensors'} does not fit the model {d / 'config.json'} describes: "
                         f"{first}") from e
    return model.eval()


# ----------------------------------------------------------------------------------------------- BN folding


@torch.no_grad()
def fold_batchnorm(model: nn.Module) -> nn.Module:
    """A copy of ``model`` in eval mode with every ConvNormAct's BatchNorm folded into its convolution.

    Outputs equal the eval-mode model's up to float rounding (~1e-6). The copy is for inference only:
    training it would no longer normalise.
    """
    folded = copy.deepcopy(model).eval()
    for m in folded.modules():
        if isinstance(m, ConvNormAct) and isinstance(m.bn, nn.BatchNorm2d):
            conv, bn = m.conv, m.bn
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            new = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                            conv.dilation, conv.groups, bias=True)
            new.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
            bias = conv.bias if conv.bias is not None else torch.zeros_like(bn.running_mean)
            new.bias.copy_(bn.bias + (bias - bn.running_mean) * scale)
            m.conv, m.bn = new, nn.Identity()
    return folded


class PointwiseConv(nn.Module):
    """A 1x1 stride-1 convolution computed as one matmul over the channel dimension of an NHWC tensor.

    ``(batch, c_in, h, w)`` (ideally ``channels_last``, where the permute below is free) ->
    ``(batch, c_out, h, w)`` in ``channels_last``. PyTorch's CPU convolution picks a slow im2col path with a
    bias copy for several of MobileNetV2's 1x1 layers; ``F.linear`` calls one GEMM with the bias fused.
    """

    def __init__(self, conv: nn.Conv2d) -> None:
        super().__init__()
        if conv.kernel_size != (1, 1) or conv.stride != (1, 1) or conv.groups != 1 or conv.padding != (0, 0):
            raise ValueError(f"PointwiseConv needs a 1x1, stride 1, ungrouped, unpadded conv, got {conv}")
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        self.weight = nn.Parameter(conv.weight.detach().reshape(conv.out_channels, conv.in_channels).clone())
        self.bias = nn.Parameter(conv.bias.detach().clone()) if conv.bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.permute(0, 2, 3, 1), self.weight, self.bias).permute(0, 3, 1, 2)


def optimize_for_inference(model: nn.Module, channels_last: bool = True) -> nn.Module:
    """Folded BatchNorm and, by default, ``channels_last`` weights with 1x1 convolutions run as matmuls
    (:class:`PointwiseConv`). Feed it ``x.contiguous(memory_format=torch.channels_last)`` (any layout works,
    NCHW costs one conversion). Returns a new eval-mode model with the same outputs (~1e-6)."""
    fast = fold_batchnorm(model)
    if channels_last:
        fast = fast.to(memory_format=torch.channels_last)
        for m in fast.modules():
            if isinstance(m, ConvNormAct) and m.conv.kernel_size == (1, 1) and m.conv.stride == (1, 1):
                m.conv = PointwiseConv(m.conv)
    return fast


# ----------------------------------------------------------------------------------------------- ONNX


class _LogitsOnly(nn.Module):
    """``(batch, 3, H, W) -> (batch, num_classes)`` logits (or pooled features): a plain-tensor forward to export."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        out = self.model(pixel_values=pixel_values)
        return out.logits if isinstance(out, ClassifierOutput) else out.pooler_output


def export_onnx(model: nn.Module, path: str | Path, image_size: int = 224, batch_size: int = 1,
                fold: bool = True, opset: int = 18) -> Path:
    """Export ``model`` (folded by default) to ONNX with input ``pixel_values`` (batch, C, image_size, image_size)
    and output ``logits``. The batch dimension is dynamic; the spatial size is fixed (TF "SAME" padding is
    computed from it)."""
    if image_size < 8:
        raise ValueError(f"image_size must be >= 8, got {image_size}")
    model = fold_batchnorm(model) if fold else copy.deepcopy(model).eval()
    wrapped = _LogitsOnly(model).eval()
    x = torch.randn(batch_size, model.config.in_channels, image_size, image_size)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(wrapped, (x,), str(path), input_names=["pixel_values"], output_names=["logits"],
                      dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, opset_version=opset,
                      dynamo=False, external_data=False)
    return path


def onnx_max_abs_diff(model: nn.Module, path: str | Path, pixel_values: torch.Tensor) -> float:
    """Largest |onnxruntime(path) - model| over the outputs for ``pixel_values`` (model in eval mode)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"pixel_values": pixel_values.numpy()})
    with torch.no_grad():
        ref = _LogitsOnly(copy.deepcopy(model).eval())(pixel_values)
    return float((torch.from_numpy(got) - ref).abs().max())


# ----------------------------------------------------------------------------------------------- int8


class _QuantConvNormAct(nn.Module):
    """A folded ConvNormAct with quantization-friendly pieces (padding works on quantized tensors)."""

    def __init__(self, m: ConvNormAct) -> None:
        super().__init__()
        self.same_pad, self.conv, self.act = m.same_pad, m.conv, m.act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.same_pad:
            x = F.pad(x, _same_padding(x.shape[-2:], self.conv.kernel_size, self.conv.stride))
        return self.act(self.conv(x))


class _QuantBlock(nn.Module):
    """An InvertedResidual whose shortcut add is a FloatFunctional (so eager-mode quantization can observe it)."""

    def __init__(self, b: InvertedResidual) -> None:
        super().__init__()
        self.expand = _QuantConvNormAct(b.expand) if b.expand is not None else None
        self.depthwise, self.project = _QuantConvNormAct(b.depthwise), _QuantConvNormAct(b.project)
        self.eligible, self.use_residual = b.eligible, b.use_residual
        self.add = torch.ao.nn.quantized.FloatFunctional() if b.use_residual else None

    def expansion(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.expand is None else self.expand(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.project(self.depthwise(self.expansion(x)))
        return self.add.add(x, out) if self.use_residual else out


class QuantizableMobileNetV2(nn.Module):
    """Float (then int8) classifier built from a folded :class:`MobileNetV2ForImageClassification`.

    ``(batch, C, H, W)`` float -> ``(batch, num_classes)`` float logits; quantize/dequantize stubs at the ends.
    The ``"expansion"`` shortcut variant is not supported.
    """

    def __init__(self, model: MobileNetV2ForImageClassification) -> None:
        super().__init__()
        if model.config.shortcut == "expansion":
            raise ValueError("quantization supports shortcut='bottleneck' or 'none', got 'expansion'")
        folded = fold_batchnorm(model)
        backbone = folded.mobilenet_v2
        self.quant = torch.ao.quantization.QuantStub()
        self.stem = _QuantConvNormAct(backbone.stem)
        self.blocks = nn.Sequential(*[_QuantBlock(b) for b in backbone.blocks])
        self.head = _QuantConvNormAct(backbone.head)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = folded.classifier
        self.dequant = torch.ao.quantization.DeQuantStub()
        self.config = model.config

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(self.quant(pixel_values))))
        return self.dequant(self.classifier(torch.flatten(self.pool(x), 1)))


@torch.no_grad()
def quantize_int8(model: MobileNetV2ForImageClassification, calibration: torch.Tensor | Any,
                  backend: str = "x86") -> nn.Module:
    """Post-training static int8 quantization (torch.ao eager mode) of a trained classifier.

    ``calibration`` is a float tensor ``(N, C, H, W)`` or an iterable of such batches, preprocessed like the
    model's inputs (a few hundred images suffice). Weights: per-channel symmetric int8; activations:
    per-tensor affine uint8 with histogram observers. The result maps float ``(batch, C, H, W)`` to float
    logits and runs on CPU with the ``backend`` engine (``"x86"``, ``"fbgemm"`` or ``"qnnpack"``).
    """
    if not isinstance(model, MobileNetV2ForImageClassification):
        raise ValueError(f"expected MobileNetV2ForImageClassification, got {type(model).__name__}")
    if backend not in torch.backends.quantized.supported_engines:
        raise ValueError(f"backend must be one of {torch.backends.quantized.supported_engines}, got {backend!r}")
    torch.backends.quantized.engine = backend
    q = QuantizableMobileNetV2(model).eval()
    q.qconfig = torch.ao.quantization.get_default_qconfig(backend)
    torch.ao.quantization.prepare(q, inplace=True)
    batches = [calibration] if isinstance(calibration, torch.Tensor) else calibration
    for xb in batches:
        if xb.dim() != 4:
            raise ValueError(f"calibration batches must be (batch, C, H, W), got {tuple(xb.shape)}")
        q(xb.float())
    return torch.ao.quantization.convert(q, inplace=True)


def model_size_bytes(model: nn.Module) -> int:
    """Size of ``model``'s saved state dict (torch.save), in bytes: int8 models are ~4x smaller."""
    import io

    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes


# ----------------------------------------------------------------------------------------------- export command


def export(model_dir: str | Path, out: str | Path, fmt: str = "onnx", image_size: int | None = None,
           calibration: torch.Tensor | str | None = None, verify: bool = True) -> Path:
    """Export a model saved with :func:`save_pretrained` (e.g. a recipe run's ``model/``).

    ``fmt``: ``"onnx"`` (folded BN; with ``verify`` its outputs are checked against PyTorch with onnxruntime,
    which must then be installed: ``pip install paperzoo[deploy]``; ``verify=False`` writes it unchecked),
    ``"torchscript"`` (folded, channels_last, traced), or ``"int8"`` (quantized TorchScript; ``calibration``
    is preprocessed images ``(N, C, H, W)`` or ``"cifar10"`` for 512 normalised CIFAR-10 training images, as
    the recipe's models expect; without it random images are used and the result is only a smoke test).
    Returns the written file.
    """
    from paperzoo.context import hint

    if fmt not in ("onnx", "torchscript", "int8"):
        raise ValueError(f"{hint('--format', 'fmt')} must be 'onnx', 'torchscript' or 'int8', got {fmt!r}")
    if image_size is not None and (not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 8):
        raise ValueError(f"{hint('--image-size', 'image_size')} must be an int >= 8 (pixels), got {image_size!r}")
    if isinstance(calibration, str) and calibration != "cifar10":
        raise ValueError(f"{hint('--calibration', 'calibration')} must be {hint('', 'a tensor, ')}'cifar10' or "
                         f"{hint('left out', 'None')}, got {calibration!r}")
    model = from_pretrained(model_dir)
    size = image_size or model.config.image_size
    out = Path(out)
    x = torch.randn(2, model.config.in_channels, size, size)
    if fmt == "onnx":
        if verify and importlib.util.find_spec("onnxruntime") is None:
            raise ImportError(f"onnxruntime is not installed, so the exported graph cannot be checked against "
                              f"PyTorch: `pip install paperzoo[deploy]`, or export it unchecked with "
                              f"{hint('--no-verify', 'verify=False')}")
        path = export_onnx(model, out if out.suffix == ".onnx" else out / "model.onnx", image_size=size)
        if not verify:
            return path
        diff = onnx_max_abs_diff(model, path, x)
        if diff > 1e-4:
            raise RuntimeError(f"ONNX output differs from PyTorch by {diff:.2e} (> 1e-4)")
        return path
    if fmt in ("torchscript", "int8"):
        if fmt == "int8":
            if isinstance(calibration, str):
                if calibration != "cifar10":
                    raise ValueError(f"calibration must be a tensor, 'cifar10' or None, got {calibration!r}")
                from paperzoo.data import load_cifar10

                calibration = normalize(load_cifar10("train").images[:512])
            calib = calibration if calibration is not None else torch.randn(32, model.config.in_channels, size, size)
            net = quantize_int8(model, calib)
        else:
            net = _LogitsOnly(optimize_for_inference(model)).eval()
        path = out if out.suffix == ".pt" else out / f"model-{fmt}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        with torch.no_grad():
            torch.jit.trace(net, x).save(str(path))
        return path
    raise ValueError(f"fmt must be 'onnx', 'torchscript' or 'int8', got {fmt!r}")


def _check_config_keys(cfg: dict, path: Path) -> None:
    """Every MobileNetV2Config field and nothing else: a missing one would silently take the paper's default."""
    fields = {f.name for f in dataclasses.fields(MobileNetV2Config)}
    unknown, missing = sorted(set(cfg) - fields), sorted(fields - set(cfg))
    if unknown or missing:
        parts = ([f"unknown key(s) {', '.join(unknown)} (valid: {', '.join(sorted(fields))})"] if unknown else []) + (
            [f"missing key(s) {', '.join(missing)}"] if missing else [])
        raise ValueError(f"{path}: {'; '.join(parts)}; save_pretrained writes every MobileNetV2Config field")
