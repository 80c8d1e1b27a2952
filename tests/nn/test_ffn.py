import math

import pytest
import torch
import torch.nn.functional as F

from paperzoo.nn.ffn import FeedForward, ffn_flops, make_activation


def erf_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def tanh_gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize(
    "glu,act",
    [
        ("glu", torch.sigmoid),
        ("geglu", erf_gelu),
        ("reglu", torch.relu),
        ("swiglu", lambda x: x * torch.sigmoid(x)),
        ("liglu", lambda x: x),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_glu_variants_compute_act_xW_times_xV(glu, act, bias):
    """Shazeer (2020): FFN_variant(x) = (act(x W) * (x V)) W2, the gate W being the first half of fc1."""
    torch.manual_seed(0)
    dim, hidden = 6, 10
    ffn = FeedForward(dim, hidden, glu=glu, bias=bias).double()
    assert ffn.fc1.weight.shape == (2 * hidden, dim) and ffn.fc2.weight.shape == (dim, hidden)
    w, v = ffn.fc1.weight[:hidden], ffn.fc1.weight[hidden:]
    bw, bv = (ffn.fc1.bias[:hidden], ffn.fc1.bias[hidden:]) if bias else (0, 0)
    x = torch.randn(3, 4, dim, dtype=torch.float64)
    expected = (act(x @ w.T + bw) * (x @ v.T + bv)) @ ffn.fc2.weight.T + (ffn.fc2.bias if bias else 0)
    torch.testing.assert_close(ffn(x), expected)
    # swapping the halves changes the output (the gate half matters), except for the symmetric bilinear form
    swapped = (act(x @ v.T + bv) * (x @ w.T + bw)) @ ffn.fc2.weight.T + (ffn.fc2.bias if bias else 0)
    assert torch.allclose(ffn(x), swapped) == (glu == "liglu")
    assert (ffn.fc1.bias is None) == (not bias)


@pytest.mark.parametrize(
    "name,fn",
    [
        ("gelu", erf_gelu),
        ("gelu_new", tanh_gelu),
        ("gelu_tanh", tanh_gelu),
        ("relu", torch.relu),
        ("swish", F.silu),
        ("silu", F.silu),
        ("relu2", lambda x: torch.relu(x) ** 2),
        ("sigmoid", torch.sigmoid),
        ("softplus", lambda x: torch.log1p(torch.exp(x))),
        ("elu", lambda x: torch.where(x > 0, x, torch.expm1(x))),
        # SELU's fixed constants (Klambauer et al. 2017, eq. 2): lambda 1.0507..., alpha 1.6732...
        ("selu", lambda x: 1.0507009873554805 * torch.where(x > 0, x, 1.6732632423543772 * torch.expm1(x))),
    ],
)
def test_plain_mlp(name, fn):
    torch.manual_seed(0)
    ffn = FeedForward(8, 32, activation=name).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    expected = fn(x @ ffn.fc1.weight.T + ffn.fc1.bias) @ ffn.fc2.weight.T + ffn.fc2.bias
    torch.testing.assert_close(ffn(x), expected)


def test_default_gelu_is_exact_erf_not_tanh():
    x = torch.linspace(-4, 4, 101, dtype=torch.float64)
    torch.testing.assert_close(make_activation("gelu")(x), erf_gelu(x))
    assert (make_activation("gelu")(x) - tanh_gelu(x)).abs().max() > 1e-5


def test_geglu_honours_a_gelu_flavour_and_variants_fix_their_activation():
    torch.manual_seed(0)
    x = torch.randn(4, 8, dtype=torch.float64)
    t5 = FeedForward(8, 16, activation="gelu_new", glu="geglu", bias=False).double()
    w, v = t5.fc1.weight.chunk(2)
    torch.testing.assert_close(t5(x), (tanh_gelu(x @ w.T) * (x @ v.T)) @ t5.fc2.weight.T)
    # a config's default activation does not turn SwiGLU into something else
    assert FeedForward(8, 16, activation="gelu", glu="swiglu").activation_name == "swish"
    assert FeedForward(8, 16, activation="relu", glu="geglu").activation_name == "gelu"


def test_dropout_on_hidden_only_in_training():
    ffn = FeedForward(8, 64, dropout=0.5)
    x = torch.randn(3, 8)
    ffn.eval()
    torch.testing.assert_close(ffn(x), ffn(x))
    ffn.train()
    torch.manual_seed(1)
    a = ffn(x)
    torch.manual_seed(2)
    assert not torch.allclose(a, ffn(x))


def test_flops_and_hf_bert_names():
    assert ffn_flops(256, 1024) == 4 * 256 * 1024
    assert ffn_flops(256, 1024, glu="swiglu", tokens=10) == 6 * 256 * 1024 * 10
    names = dict(FeedForward(4, 8).named_parameters())
    assert set(names) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


def test_bad_inputs():
    with pytest.raises(ValueError, match="dim=8"):
        FeedForward(8, 16)(torch.randn(2, 7))
    with pytest.raises(ValueError, match="glu"):
        FeedForward(8, 16, glu="fooglu")
    with pytest.raises(ValueError, match="activation"):
        FeedForward(8, 16, activation="mish2")
    with pytest.raises(ValueError):
        FeedForward(8, 0)
    with pytest.raises(ValueError):
        FeedForward(8, 16, dropout=1.5)
