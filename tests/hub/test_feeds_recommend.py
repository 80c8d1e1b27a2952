"""Atom feeds per view and per list; recommendations (tf-idf + linear SVM) precomputed, on topic, never trained in a
request."""

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from hub_helpers import post, register, seed_papers

from paperzoo.hub.ingest.arxiv import ArxivRecord, upsert

ATOM = "{http://www.w3.org/2005/Atom}"


def test_view_and_list_feeds_are_valid_atom(client, factory, backend):
    ids = seed_papers(factory, 3)
    upsert(factory, [ArxivRecord("2401.00099", 1, "A <b>bold</b> & \"quoted\" title", ["X"], "abs", ["cs.LG"],
                                 datetime(2025, 1, 1, tzinfo=UTC), None)])
    feed = ET.fromstring(client.get("/feeds/new.xml").content)
    assert feed.tag == f"{ATOM}feed"
    titles = [e.findtext(f"{ATOM}title") for e in feed.iter(f"{ATOM}entry")]
    assert titles[0] == 'A <b>bold</b> & "quoted" title' and len(titles) == 4  # escaped in XML, intact once parsed
    assert client.get("/feeds/top.xml", params={"window": "day"}).status_code == 200
    assert client.get("/feeds/sideways.xml").status_code == 404
    register(client, "alice")
    r = post(client, "/lists", {"name": "open", "public": "true"})
    lid = r.headers["location"].rsplit("/", 1)[1]
    post(client, f"/lists/{lid}/add", {"arxiv_id": ids[1]})
    lf = ET.fromstring(client.get(f"/lists/{lid}/feed.xml").content)
    assert lf.findtext(f"{ATOM}title") == "paperzoo hub list: open"
    assert [e.findtext(f"{ATOM}id") for e in lf.iter(f"{ATOM}entry")] == [f"https://arxiv.org/abs/{ids[1]}"]


TOPIC_A = "graph neural network message passing over nodes and edges"
TOPIC_B = "image diffusion model denoising pixels with a noise schedule"


def corpus(factory, n=30):
    rng = __import__("random").Random(0)
    recs = []
    for i in range(2 * n):
        words = (TOPIC_A if i % 2 == 0 else TOPIC_B).split()
        rng.shuffle(words)
        recs.append(ArxivRecord(f"2402.{i + 1:05d}", 1, " ".join(words[:5]), [f"Author {rng.randint(0, 50)}"],
                                " ".join(words), ["cs.LG"], datetime(2024, 2, 1, tzinfo=UTC), None))
    upsert(factory, recs)
    return [r.arxiv_id for r in recs]


def test_recommendations_are_on_topic_and_precomputed(client, factory, settings, monkeypatch, backend):
    from paperzoo.hub import recommend

    ids = corpus(factory)
    register(client, "alice")
    lid = int(post(client, "/lists", {"name": "graphs"}).headers["location"].rsplit("/", 1)[1])
    picked = ids[0:6:2]  # three topic-A papers
    for a in picked:
        post(client, f"/lists/{lid}/add", {"arxiv_id": a})
    assert client.get(f"/api/lists/{lid}/recommendations").json() == []  # nothing until computed
    stored = recommend.recommend_list(factory, settings, lid, top=10)
    assert stored == 10
    recs = client.get(f"/api/lists/{lid}/recommendations").json()
    got = [r["paper"]["arxiv_id"] for r in recs]
    assert not set(got) & set(picked)  # never what the list already has
    assert all(int(a.split(".")[1]) % 2 == 1 for a in got), got  # odd numbers are topic A (0-based even index)
    scores = [r["score"] for r in recs]
    assert scores == sorted(scores, reverse=True)

    from sklearn.svm import LinearSVC

    def no_training(*a, **k):
        raise AssertionError("an SVM was trained inside a request")

    monkeypatch.setattr(LinearSVC, "fit", no_training)
    assert client.get(f"/lists/{lid}").status_code == 200
    assert "Recommended for this list" in client.get(f"/lists/{lid}").text
    assert client.get(f"/api/lists/{lid}/recommendations").status_code == 200


def test_features_are_rebuilt_only_when_papers_change(factory, settings, monkeypatch):
    from paperzoo.hub import recommend

    corpus(factory, 5)
    built = []
    real = recommend.build_features
    monkeypatch.setattr(recommend, "build_features", lambda f: built.append(1) or real(f))
    monkeypatch.setattr(recommend, "_memo", {})
    recommend.features(factory, settings)
    recommend.features(factory, settings)
    assert len(built) == 1
    seed_papers(factory, 1, prefix="2403")
    f = recommend.features(factory, settings)
    assert len(built) == 2 and f.x.shape[0] == 11


def test_an_empty_list_gets_no_recommendations(client, factory, settings):
    from paperzoo.hub import recommend

    corpus(factory, 3)
    register(client, "alice")
    lid = int(post(client, "/lists", {"name": "empty"}).headers["location"].rsplit("/", 1)[1])
    assert recommend.recommend_list(factory, settings, lid) == 0
    assert recommend.recommend_all(factory, settings) == {"lists": 1, "recommendations": 0}


def test_recommend_after_list_change_in_the_background(app, client, factory):
    from dataclasses import replace

    app.state.settings = replace(app.state.settings, recommend_on_change=True)
    ids = corpus(factory, 4)
    register(client, "alice")
    lid = int(post(client, "/lists", {"name": "bg"}).headers["location"].rsplit("/", 1)[1])
    post(client, f"/lists/{lid}/add", {"arxiv_id": ids[0]})  # TestClient runs the background task before returning
    assert len(client.get(f"/api/lists/{lid}/recommendations").json()) == 2 * 4 - 1  # every paper but the listed one
