"""The recipe skeleton: presets, jobs with cached results, and the verdict rules with their sentences."""

import json
from dataclasses import dataclass

import pytest

from paperzoo.recipes import (
    AtLeast,
    AtMost,
    Beats,
    Job,
    NonInferior,
    Paired,
    Preset,
    all_of,
    cached,
    pick,
    run_jobs,
    smoke,
)
from paperzoo.train import TrainConfig


@dataclass(frozen=True, kw_only=True)
class DemoPreset(Preset):
    subset: int | None = None


PRESETS = {"tiny": DemoPreset(model=None, train=TrainConfig(steps=2), seeds=2, subset=8),
           "small": DemoPreset(model=None, train=TrainConfig(steps=5))}


def test_pick_defaults_replaces_seeds_and_names_the_valid_presets():
    assert pick(PRESETS, None, "demo") == ("small", PRESETS["small"])
    name, p = pick(PRESETS, "tiny", "demo", seeds=5)
    assert name == "tiny" and p.seeds == 5 and p.subset == 8
    with pytest.raises(ValueError, match="unknown preset 'huge' for demo; valid: tiny, small"):
        pick(PRESETS, "huge", "demo")
    with pytest.raises(ValueError, match="seeds: expected an int >= 1"):
        pick(PRESETS, "tiny", "demo", seeds=0)
    with pytest.raises(ValueError, match="Preset.train: expected a TrainConfig"):
        DemoPreset(model=None, train={"steps": 2})


def _square(job, out, resume, progress, offset):
    (out / "calls").write_text(str(int((out / "calls").read_text() if (out / "calls").exists() else 0) + 1))
    return {"value": job.seed ** 2 + offset, "variant": job.variant}


def test_run_jobs_caches_each_job_in_its_folder_and_resumes(tmp_path):
    jobs = [Job(v, s) for v in ("a", "b") for s in range(2)]
    res = run_jobs(_square, jobs, tmp_path, args=(10,))
    assert res.values("a", "value") == [10, 11] and res["b", 1] == {"value": 11, "variant": "b"}
    assert res.variants == ["a", "b"] and res.seeds("a") == [0, 1] and "a" in res and "c" not in res
    assert json.loads((tmp_path / "a" / "seed-1" / "job.json").read_text()) == {"value": 11, "variant": "a"}
    again = run_jobs(_square, jobs, tmp_path, resume=True, args=(99,))  # finished jobs are read back, not rerun
    assert again.values("a", "value") == [10, 11]
    assert (tmp_path / "a" / "seed-0" / "calls").read_text() == "1"
    rerun = run_jobs(_square, jobs[:1], tmp_path, resume=False, args=(99,))  # without resume: recomputed
    assert rerun.values("a", "value") == [99]
    with pytest.raises(ValueError, match="would write into one folder"):
        run_jobs(_square, [Job("a", 0), Job("a", 0, {"other": 1})], tmp_path)


def test_run_jobs_in_two_worker_processes_matches_one(tmp_path):
    jobs = [Job("a", s) for s in range(3)]
    one = run_jobs(_square, jobs, tmp_path / "one", args=(1,))
    two = run_jobs(_square, jobs, tmp_path / "two", workers=2, args=(1,))
    assert one.values("a", "value") == two.values("a", "value") == [1, 2, 5]


def test_a_damaged_cached_result_names_the_remedy(tmp_path):
    (tmp_path / "job.json").write_text("{half")
    with pytest.raises(ValueError, match="damaged.*delete it to recompute"):
        cached(tmp_path, True, lambda: {})
    assert cached(tmp_path, False, lambda: {"x": (1, 2)}) == {"x": [1, 2]}  # JSON types, as a resume reads back


def test_beats_above_across_and_below():
    up = Beats().judge([0.90, 0.91, 0.92], [0.80, 0.81, 0.82], "ours", "peer")
    assert up.verdict == "reproduced" and "interval above 0" in up.reason and up.comparison.diff > 0
    across = Beats().judge([0.80, 0.90, 0.85], [0.84, 0.86, 0.85])
    assert across.verdict == "inconclusive" and "across 0" in across.reason
    down = Beats(higher_is_better=False).judge([3.0, 3.1, 3.2], [2.0, 2.1, 2.2], "switch", "dense")
    assert down.verdict == "not reproduced" and "interval below 0" in down.reason
    assert Beats().judge([0.9], [0.8]).verdict == "inconclusive"  # one seed: no interval
    threshold = Beats().judge([0.90, 0.91, 0.92], 0.88, "accuracy", "88%")
    assert threshold.verdict == "reproduced" and "over 88%" in threshold.reason


def test_non_inferior_and_paired():
    # 0.01 worse on average, within a 0.05 margin
    ok = NonInferior(0.05).judge([0.80, 0.81, 0.82], [0.81, 0.82, 0.83])
    assert ok.verdict == "reproduced" and ok.comparison.margin == -0.05
    assert Beats().judge([0.80, 0.81, 0.82], [0.81, 0.82, 0.83]).verdict == "inconclusive"  # superiority: unclear
    with pytest.raises(ValueError, match="margin must be > 0"):
        NonInferior(0.0)
    # seed-to-seed noise hides a consistent per-seed gain from Welch's test; pairing sees it
    a, b = [10.0, 20.0, 30.0], [10.5, 20.4, 30.6]
    assert Beats(higher_is_better=False).judge(a, b).verdict == "inconclusive"
    assert Paired(higher_is_better=False).judge(a, b).verdict == "reproduced"
    with pytest.raises(ValueError, match="one value per seed"):
        Paired().judge([1.0, 2.0], [1.0])


def test_single_value_rules_all_of_and_smoke():
    assert AtMost(1.15).judge(0.98, "slope").verdict == "reproduced"
    assert AtMost(1.15).judge(1.2, "slope").reason == "slope is 1.2, above 1.15"
    assert AtLeast(1.6).judge(1.87, "slope").verdict == "reproduced"
    assert AtLeast(1.6).judge(1.2, "slope").verdict == "not reproduced"
    yes, no = AtMost(2).judge(1), AtMost(0).judge(1)
    maybe = Beats().judge([1.0], [0.0])
    assert all_of(yes, yes).verdict == "reproduced"
    assert all_of(yes, maybe).verdict == "inconclusive"
    assert all_of(yes, maybe, no).verdict == "not reproduced"
    assert all_of(yes, no).reason == f"{yes.reason}; {no.reason}"
    with pytest.raises(ValueError):
        all_of()
    assert "smoke test" in smoke(yes, "tiny").reason and smoke(yes, "small") == yes
