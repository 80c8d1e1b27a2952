"""``paperzoo bench compile`` with dynamo's eager backend (traces, generates no code: seconds): what a row reports."""

import pytest
import torch
import torch._dynamo

from paperzoo.bench import compile as cb

pytestmark = pytest.mark.usefixtures("one_thread")


class _Breaks(torch.nn.Module):
    """A forward with one graph break (an explicit one) between two linear layers."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)

    def forward(self, x):
        h = self.a(x)
        torch._dynamo.graph_break()
        return self.b(h)


def test_a_row_reports_compile_time_graphs_breaks_and_recompiles_apart_from_the_timing():
    x = torch.randn(4, 8)
    row = cb.compile_row("toy", _Breaks(), lambda m: m(x).square().mean(), "toy", backend="eager", warmup=1,
                         repeats=1, peak=100.0)
    assert row.name == "compile toy train step" and row.peer == "eager" and row.ratio > 0
    assert row.extra["compile_s"] > 0 and row.extra["backend"] == "eager"
    assert row.extra["graph_breaks"] >= 1 and row.extra["graphs"] >= 2 and row.extra["recompiles"] == 0
    assert any("graph_break" in r.lower() for r in row.extra["break_reasons"]), row.extra["break_reasons"]
    plain = cb.compile_row("mlp", torch.nn.Linear(8, 1), lambda m: m(x).square().mean(), "mlp", backend="eager",
                           warmup=1, repeats=1)
    assert plain.extra["graph_breaks"] == 0 and plain.extra["graphs"] == 1
    assert plain.flops == 2 * (2 * 4 * 8)  # forward and the weight gradient (the input needs none)


@pytest.mark.parametrize("case", ["transformer-mods", "nerf", "electra", "switch"])
def test_training_steps_compile_in_one_graph(monkeypatch, case):
    """The training step, not only the eval forward (the model contract's test): NeRF's random fine draws,
    ELECTRA's generator on the masked positions only and Switch's buffer as long as its fullest expert (both
    data-dependent sizes, traced by :func:`paperzoo.train.compile_model`) give no graph break."""
    monkeypatch.setenv("PAPERZOO_BENCH_QUICK", "1")
    rows, meta = cb.run(cases=(case,), backend="eager", repeats=1)
    assert meta["failed"] == {}
    (row,) = rows
    assert row.extra["graph_breaks"] == 0 and row.extra["graphs"] == 1, row.extra["break_reasons"]
    assert row.extra["recompiles"] == 0


def test_a_model_that_does_not_compile_is_reported(monkeypatch):
    monkeypatch.setenv("PAPERZOO_BENCH_QUICK", "1")

    def broken(b, t):
        return torch.nn.Linear(2, 2), lambda m: m(torch.randn(3, 5)).sum(), "wrong shape"
    monkeypatch.setitem(cb.CASES, "broken", broken)
    rows, meta = cb.run(cases=("broken",), backend="eager", repeats=1)
    assert rows == [] and meta["failed"]["broken"].startswith("RuntimeError")
    with pytest.raises(ValueError, match="unknown compile cases"):
        cb.run(cases=("nope",))
