import time

import pytest

from paperzoo.bench import Stats, time_interleaved


class FakeClock:
    """A clock that only moves when a fake function 'runs'."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_calls_are_interleaved_abab():
    order = []
    fns = {"ours": lambda: order.append("A"), "peer": lambda: order.append("B")}
    syncs = []
    stats = time_interleaved(fns, warmup=2, repeats=5, sync=lambda: syncs.append(1), disable_gc=False)
    assert order == ["A", "B"] * 7
    assert stats["ours"].n == stats["peer"].n == 5
    assert len(syncs) == 2 + 2 * 2 * 5  # one per warm-up round, two around every timed call


def test_stats_with_a_fake_clock():
    clock = FakeClock()
    durations = {"ours": iter([9.0, 1.0, 2.0, 3.0, 10.0]), "peer": iter([5.0] * 5)}

    def make(name):
        def f():
            clock.now += next(durations[name])
        return f

    stats = time_interleaved({"ours": make("ours"), "peer": make("peer")}, warmup=0, repeats=5, clock=clock,
                             sync=lambda: None, disable_gc=False)
    assert stats["ours"] == Stats(median=3.0, min=1.0, max=10.0, mean=5.0, n=5)
    assert stats["peer"] == Stats(5.0, 5.0, 5.0, 5.0, 5)
    assert stats["ours"].median_ms == 3000.0


def test_min_time_extends_the_rounds():
    clock = FakeClock()

    def tick():
        clock.now += 0.1

    stats = time_interleaved({"a": tick, "b": tick}, warmup=0, repeats=2, min_time=1.0, clock=clock,
                             sync=lambda: None, disable_gc=False)
    assert stats["a"].n == stats["b"].n == 10


def test_real_sleeps_are_ordered():
    stats = time_interleaved({"fast": lambda: time.sleep(0.001), "slow": lambda: time.sleep(0.012)},
                             warmup=1, repeats=3)
    assert stats["fast"].median < stats["slow"].median
    assert stats["slow"].min >= 0.012 and stats["slow"].min <= stats["slow"].median <= stats["slow"].max


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fns": {}}, "non-empty dict"),
    ({"fns": {"a": 3}}, "callable"),
    ({"fns": {"a": lambda: None}, "repeats": 0}, "repeats"),
    ({"fns": {"a": lambda: None}, "warmup": -1}, "warmup"),
    ({"fns": {"a": lambda: None}, "min_time": -1.0}, "min_time"),
])
def test_time_interleaved_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        time_interleaved(**kwargs)
