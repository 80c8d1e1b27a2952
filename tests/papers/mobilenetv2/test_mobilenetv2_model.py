"""MobileNetV2 architecture: exact sizes, the paper's rules, every flag."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from paperzoo.papers.mobilenetv2.model import (
    MobileNetV2Config,
    MobileNetV2ForImageClassification,
    MobileNetV2Model,
    count_madds,
    count_parameters,
    make_divisible,
)

# Measured with count_parameters / count_madds (1000 classes, 224x224, keep_head_channels=True).
SIZE_TABLE = {  # width: (parameters, multiply-adds)
    "1.4": (6_108_776, 582_195_824),
    "1.0": (3_504_872, 300_774_272),
    "0.75": (2_636_424, 209_069_792),
    "0.5": (1_968_680, 97_131_840),
    "0.35": (1_677_128, 59_285_808),
}



def _four_row_net(**overrides) -> MobileNetV2Config:
    """The recipe's smoke-test network: model preset tiny with a four-row table (two shortcut-eligible blocks)."""
    return MobileNetV2Config.preset("tiny", width_multiplier=1.0, stem_channels=16, head_channels=128,
                                    blocks=((1, 8, 1, 1), (6, 16, 2, 2), (6, 24, 2, 2), (6, 32, 1, 1)), **overrides)

def test_width_1_parameter_count_is_torchvisions():
    model = MobileNetV2ForImageClassification(MobileNetV2Config())
    assert count_parameters(model) == 3_504_872


def test_width_1_madds_within_1_percent_of_300m():
    model = MobileNetV2ForImageClassification(MobileNetV2Config())
    madds = count_madds(model, 224)
    assert abs(madds - 300e6) / 300e6 < 0.01
    # torch's own counter agrees: it reports 2 FLOPs per multiply-add for conv and linear
    with FlopCounterMode(display=False) as fc:
        copy.deepcopy(model).to("meta").eval()(pixel_values=torch.zeros(1, 3, 224, 224, device="meta"))
    assert fc.get_total_flops() == 2 * madds


@pytest.mark.parametrize("width", sorted(SIZE_TABLE))
def test_size_table(width):
    model = MobileNetV2ForImageClassification(MobileNetV2Config.preset(width))
    assert (count_parameters(model), count_madds(model, 224)) == SIZE_TABLE[width]


def test_make_divisible_rule():
    for v in [x / 4 for x in range(1, 4000)]:
        r = make_divisible(v, 8)
        assert r % 8 == 0 and r >= 8 and (r >= 0.9 * v or r == 8)
        assert r <= max(8, v + 8)
    assert make_divisible(11.2, 8) == 16  # 8 would be 29% below
    assert make_divisible(32 * 0.35, 8) == 16 and make_divisible(1280 * 1.4, 8) == 1792


def test_paper_table_structure():
    cfg = MobileNetV2Config()
    model = MobileNetV2Model(cfg)
    specs = cfg.block_specs()
    assert len(specs) == 17 and specs[0] == (32, 32, 16, 1, 1)
    assert model.blocks[0].expand is None  # the t=1 group has no expansion conv
    assert all(b.expand is not None for b in model.blocks[1:])
    # residual only when stride 1 and in == out: 10 of the 17 blocks
    assert [b.use_residual for b in model.blocks] == [s == 1 and i == o for i, _, o, s, _ in specs]
    assert sum(b.use_residual for b in model.blocks) == 10
    assert model.stem.conv.stride == (2, 2) and model.head.conv.out_channels == 1280
    assert isinstance(model.stem.act, nn.ReLU6) and isinstance(model.blocks[3].project.act, nn.Identity)
    out = model(pixel_values=torch.randn(1, 3, 64, 64))
    assert out.last_hidden_state.shape == (1, 1280, 2, 2) and out.pooler_output.shape == (1, 1280)


def test_defaults_follow_the_papers_reference_code():
    cfg = MobileNetV2Config()
    assert (cfg.tf_padding, cfg.keep_head_channels, cfg.round_expansion, cfg.norm_eps) == (True, True, True, 1e-3)
    assert cfg.bn_momentum == pytest.approx(1 - 0.997) and cfg.dropout == 0.2 and cfg.linear_bottleneck
    bn = MobileNetV2Model(cfg).stem.bn
    assert bn.momentum == pytest.approx(0.003) and bn.eps == 1e-3


def test_keep_head_channels_flag():
    assert MobileNetV2Config(width_multiplier=0.5).last_channels == 1280
    assert MobileNetV2Config(width_multiplier=0.5, keep_head_channels=False).last_channels == 640
    assert MobileNetV2Config(width_multiplier=1.4).last_channels == 1792


def test_round_expansion_flag():
    # only a non-integer t (or a divisor that does not divide the widths) can tell them apart
    a = MobileNetV2Config(expand_ratio=2.5).block_specs()
    b = MobileNetV2Config(expand_ratio=2.5, round_expansion=False).block_specs()
    assert a[1][1] == 40 and b[1][1] == 40  # 16 * 2.5
    assert a[2][1] == 64 and b[2][1] == 60  # 24 * 2.5 = 60 -> 64 when rounded to 8
    assert MobileNetV2Config().block_specs() == MobileNetV2Config(round_expansion=False).block_specs()


def test_tf_same_padding_matches_explicit_pad():
    torch.manual_seed(0)
    cfg = MobileNetV2Config.preset("tiny", stem_stride=2, tf_padding=True)
    model = MobileNetV2Model(cfg).eval()
    conv = model.stem.conv
    for size in (32, 33):
        x = torch.randn(1, 3, size, size)
        total = max(3 - (2 if size % 2 == 0 else 1), 0)
        ref = F.conv2d(F.pad(x, (total // 2, total - total // 2) * 2), conv.weight, stride=2)
        got = model.stem.conv(F.pad(x, _pads(model.stem, x)))
        torch.testing.assert_close(got, ref)
    # stride-1 layers use the conv's own symmetric padding, identical to SAME
    assert not model.blocks[0].depthwise.same_pad and model.blocks[0].depthwise.conv.padding == (1, 1)
    assert model.blocks[1].depthwise.same_pad and model.blocks[1].depthwise.conv.padding == (0, 0)


def _pads(layer, x):
    from paperzoo.papers.mobilenetv2.model import _same_padding

    return _same_padding(x.shape[-2:], layer.conv.kernel_size, layer.conv.stride)


def test_small_input_variant():
    model = MobileNetV2ForImageClassification(MobileNetV2Config.preset("cifar")).eval()
    assert model.mobilenet_v2.stem.conv.stride == (1, 1)
    out = model(pixel_values=torch.randn(2, 3, 32, 32))
    assert out.logits.shape == (2, 10)
    assert model.mobilenet_v2(pixel_values=torch.randn(1, 3, 32, 32)).last_hidden_state.shape[-1] == 2


def test_linear_bottleneck_flag():
    model = MobileNetV2Model(_four_row_net(linear_bottleneck=False))
    assert all(isinstance(b.project.act, nn.ReLU6) for b in model.blocks)
    out = model.blocks[2](torch.randn(1, 16, 8, 8) - 5.0)
    assert model.blocks[2].use_residual and out.shape == (1, 16, 8, 8)


def _manual_expansion_forward(model, x):
    """Reference for shortcut='expansion': wide tensors of consecutive blocks are joined."""
    x = model.stem(x)
    prev = None
    for b in model.blocks:
        h = x if b.expand is None else b.expand(x)
        if prev is not None:
            h = h + prev
        prev = h if (b.stride == 1 and b.in_channels == b.out_channels) else None
        x = b.project(b.depthwise(h))
    return model.head(x)


def test_shortcut_modes():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 32, 32)
    base = MobileNetV2Model(_four_row_net()).eval()
    state = base.state_dict()
    outs = {}
    for mode in ("bottleneck", "expansion", "none"):
        m = MobileNetV2Model(_four_row_net(shortcut=mode)).eval()
        m.load_state_dict(state)  # same parameters: only the wiring differs
        assert sum(b.use_residual for b in m.blocks) == (2 if mode == "bottleneck" else 0)
        with torch.no_grad():
            outs[mode] = m(pixel_values=x).last_hidden_state
        if mode == "expansion":
            with torch.no_grad():
                torch.testing.assert_close(outs[mode], _manual_expansion_forward(m, x))
    assert not torch.allclose(outs["bottleneck"], outs["none"])
    assert not torch.allclose(outs["expansion"], outs["none"])


@pytest.mark.parametrize("t", [1, 2, 6])
def test_expand_ratio_override(t):
    cfg = MobileNetV2Config(expand_ratio=t)
    specs = cfg.block_specs()
    assert specs[0][4] == 1 and all(s[4] == t for s in specs[1:])
    model = MobileNetV2Model(cfg)
    assert all((b.expand is None) == (t == 1) for b in model.blocks[1:])
    if t != 1:
        assert specs[1][1] == 16 * t


def test_classification_loss_and_grad():
    torch.manual_seed(0)
    model = MobileNetV2ForImageClassification(_four_row_net())
    out = model(pixel_values=torch.randn(4, 3, 32, 32), labels=torch.tensor([0, 1, 2, 3]))
    out.loss.backward()
    assert out.loss.item() == pytest.approx(torch.log(torch.tensor(10.0)).item(), abs=0.2)
    assert all(p.grad is not None for p in model.parameters())


def test_input_validation():
    model = MobileNetV2ForImageClassification(MobileNetV2Config.preset("tiny"))
    with pytest.raises(ValueError, match=r"\(batch, 3, height, width\)"):
        model(pixel_values=torch.randn(3, 32, 32))
    with pytest.raises(ValueError, match="floating-point"):
        model(pixel_values=torch.zeros(1, 3, 32, 32, dtype=torch.uint8))
    with pytest.raises(ValueError, match="pixel_values is required"):
        model()
    with pytest.raises(ValueError, match="labels must be"):
        model(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="stem_stride"):
        MobileNetV2Config(stem_stride=3)
    with pytest.raises(ValueError, match="shortcut"):
        MobileNetV2Config(shortcut="dense")
    with pytest.raises(ValueError, match="unknown preset"):
        MobileNetV2Config.preset("2.0")


def test_input_dtype_must_be_the_models():
    """float64 pixels into a float32 model: a ValueError naming both dtypes, not conv's "expected scalar type"."""
    model = MobileNetV2ForImageClassification(MobileNetV2Config.preset("tiny")).eval()
    x = torch.randn(1, 3, 32, 32)
    with pytest.raises(ValueError, match=r"torch\.float32.*got torch\.float64"):
        model(pixel_values=x.double())
    with pytest.raises(ValueError, match=r"torch\.float32.*got torch\.float64"):
        model.mobilenet_v2(pixel_values=x.double())
    assert model.double()(pixel_values=x.double()).logits.dtype == torch.float64  # a float64 model takes float64
    model.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):  # under autocast the conv casts: bf16 or fp32 inputs are fine
        assert model(pixel_values=x.bfloat16()).logits.shape == (1, 10)


@pytest.mark.parametrize(("preset", "stride"), [("tiny", 32), ("cifar", 16)])
def test_images_smaller_than_the_total_stride_raise(preset, stride):
    """Below the total stride (32, or 16 with the small-input stem) the last stride-2 layers run on a 1x1 map that is
    mostly padding: the smallest image is one cell of the final feature map."""
    cfg = MobileNetV2Config.preset(preset)
    assert cfg.total_stride == stride
    model = MobileNetV2ForImageClassification(cfg).eval()
    for h, w in ((1, 1), (2, 2), (stride - 1, stride), (stride, stride - 1)):
        with pytest.raises(ValueError, match=rf"at least {stride}x{stride}.*total stride.*got {h}x{w}"):
            model(pixel_values=torch.randn(1, 3, h, w))
    with torch.no_grad():
        out = model.mobilenet_v2(pixel_values=torch.randn(1, 3, stride, stride))
    assert out.last_hidden_state.shape[-2:] == (1, 1)
