"""The IWS reproduction: its presets and protocol, and a tiny run on YouTube spam that learns."""

import json

import pytest

from paperzoo.papers.iws.recipe import DATASETS, OFFICIAL_IMDB, PRESETS, STARTUP, run


def test_small_preset_follows_the_official_protocol():
    p = PRESETS["small"]
    assert p.seeds >= 5 and set(p.datasets) == {"imdb", "youtube", "sms", "agnews"}
    s = p.model
    assert (s.r, s.z, s.ensemble.members, s.ensemble.mlp.hidden, s.ensemble.mlp.epochs) == (0.6, 1.96, 50, (10, 10),
                                                                                           200)
    assert (p.end.dim, p.end.mlp.hidden, p.end.mlp.epochs) == (300, (20, 20), 250)
    imdb = DATASETS["imdb"]
    # the official iteration t is answer STARTUP + t + 1: every published point has a checkpoint
    assert all(t + STARTUP + 1 in imdb.checkpoints for t in OFFICIAL_IMDB if t + STARTUP + 1 <= imdb.budget)
    assert imdb.n_predict == 200 and [s for s, _ in imdb.seeds] == ["adorable", "witty", "hated", "stereotypical"]


@pytest.mark.slow
@pytest.mark.data("youtube-spam")
def test_tiny_run_learns(tmp_path, one_thread):
    run_dir = run("tiny", out=tmp_path / "iws", progress=False)
    doc = json.loads((run_dir / "result.json").read_text())
    m = doc["measurements"]
    assert min(m["youtube supervised AUC"]["values"]) > 0.9
    # 12 answers: the seed LFs and what the loop found label the data well above chance (AUC 0.5)
    assert min(m["youtube IWS-LSE-ac AUC @12"]["values"]) > 0.65
    assert min(m["youtube AL (documents) AUC @12"]["values"]) > 0.6
    assert "smoke test" in doc["verdict_reason"] and (run_dir / "youtube_auc_vs_queries.png").stat().st_size > 0
    job = json.loads((run_dir / "youtube" / "lse" / "seed-0" / "job.json").read_text())
    assert job["queries"] == [0, 6, 12] and job["curves"]["lse-ac"]["n_lfs"][0] >= 4
