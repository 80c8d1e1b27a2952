import math

import pytest
import torch
from torch import nn

from paperzoo.nn.norm import LayerNorm, ReZero, RMSNorm, ScaleNorm, make_norm


def test_rmsnorm_formula():
    torch.manual_seed(0)
    norm = RMSNorm(16, eps=1e-6).double()
    nn.init.normal_(norm.weight)
    x = torch.randn(3, 5, 16, dtype=torch.float64) * 3 + 1
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expected)
    # no mean subtraction: unlike LayerNorm, a constant shift changes the output
    assert not torch.allclose(norm(x + 5), norm(x))
    plain = RMSNorm(16, elementwise_affine=False)
    assert plain.weight is None and len(list(plain.parameters())) == 0
    y = plain(torch.randn(4, 16))
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(4), atol=1e-4, rtol=0)


def test_rmsnorm_half_precision_normalised_in_fp32():
    norm = RMSNorm(64)
    x = (torch.randn(2, 64) * 100).to(torch.bfloat16)
    y = norm(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, RMSNorm(64)(x.float()).to(torch.bfloat16))


def test_scalenorm_formula_and_init():
    dim = 9
    norm = ScaleNorm(dim).double()
    assert norm.g.item() == pytest.approx(math.sqrt(dim)) and norm.g.numel() == 1
    x = torch.randn(4, 7, dim, dtype=torch.float64)
    torch.testing.assert_close(norm(x), math.sqrt(dim) * x / x.norm(dim=-1, keepdim=True))
    with torch.no_grad():
        norm.g.fill_(2.5)
    torch.testing.assert_close(norm(x).norm(dim=-1), torch.full((4, 7), 2.5, dtype=torch.float64))
    assert torch.isfinite(norm(torch.zeros(2, dim, dtype=torch.float64))).all()  # eps guards the zero vector


def test_layernorm_is_torch_layernorm():
    ln = LayerNorm(8, eps=1e-12)
    assert isinstance(ln, nn.LayerNorm) and ln.eps == 1e-12 and ln.normalized_shape == (8,)
    x = torch.randn(3, 8)
    expected = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-12)
    torch.testing.assert_close(ln(x), expected)


def test_rezero_starts_as_identity_and_learns():
    rz = ReZero()
    sublayer = nn.Linear(6, 6)
    x = torch.randn(5, 6)
    out = x + rz(sublayer(x))
    assert torch.equal(out, x)  # the residual block is exactly the identity at init
    out.sum().backward()
    assert rz.alpha.grad is not None and rz.alpha.grad.abs() > 0  # alpha receives gradient, so it can grow


def test_make_norm():
    assert isinstance(make_norm("layernorm", 8, 1e-12), LayerNorm) and make_norm("layernorm", 8, 1e-12).eps == 1e-12
    assert isinstance(make_norm("RMSNorm", 8), RMSNorm) and make_norm("rmsnorm", 8).eps == 1e-6
    assert isinstance(make_norm("scalenorm", 8), ScaleNorm)
    assert isinstance(make_norm("rezero", 8), ReZero)
    assert isinstance(make_norm("none", 8), nn.Identity)
    with pytest.raises(ValueError, match="layernorm"):
        make_norm("batchnorm", 8)
    with pytest.raises(ValueError):
        make_norm("layernorm", 0)


@pytest.mark.parametrize("norm", [RMSNorm(8), ScaleNorm(8)])
def test_bad_inputs(norm):
    with pytest.raises(ValueError, match="dim=8"):
        norm(torch.randn(2, 7))
    with pytest.raises(ValueError, match="floating-point"):
        norm(torch.ones(2, 8, dtype=torch.long))
