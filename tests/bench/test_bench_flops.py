import pytest
import torch

from paperzoo.bench import count_flops, matmul_peak_gflops
from paperzoo.measure import best_matmul


def test_count_flops_of_a_matmul_is_2mnk():
    m, k, n = 7, 11, 13
    a, b = torch.randn(m, k), torch.randn(k, n)
    assert count_flops(lambda: a @ b) == 2 * m * n * k


def test_count_flops_forward_and_backward_of_linear():
    lin = torch.nn.Linear(16, 8, bias=False)
    x = torch.randn(4, 16)
    fwd = count_flops(lambda: lin(x))
    assert fwd == 2 * 4 * 16 * 8
    assert count_flops(lambda: lin(x).sum().backward()) == 2 * fwd  # grad wrt weight only (x needs no grad)


def test_count_flops_validates():
    with pytest.raises(ValueError, match="callable"):
        count_flops(42)


def test_matmul_peak_is_positive_and_restores_threads():
    before = torch.get_num_threads()
    g = matmul_peak_gflops(n=64, threads=1, repeats=2)
    assert g > 0 and torch.get_num_threads() == before
    rows = best_matmul((32, 48), repeats=1)
    assert [n for n, _, _ in rows] == [32, 48] and all(t > 0 and gf > 0 for _, t, gf in rows)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n": 0}, "positive int"), ({"dtype": torch.int32}, "floating"), ({"threads": 0}, "threads"),
])
def test_matmul_peak_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        matmul_peak_gflops(**kwargs)


@pytest.mark.slow
def test_matmul_peak_at_full_size_is_plausible():
    assert 5 < matmul_peak_gflops() < 100_000
