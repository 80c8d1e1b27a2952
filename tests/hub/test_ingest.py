"""Ingestion: arXiv Atom and snapshot lines, mention exports and source adapters (recorded responses), the registry
and committed reports. Idempotent, versions update rows, malformed records reported and skipped, one transaction
per batch."""

import json
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlalchemy import select

from paperzoo.hub.ingest import arxiv, mentions, read_source
from paperzoo.hub.ingest.registry import ingest_registry
from paperzoo.hub.models import (
    Mention,
    MentionSnapshot,
    Paper,
    PaperAuthor,
    PaperVersion,
    PaperzooLink,
    PaperzooReport,
)

HERE = Path(__file__).parent / "recorded"
REPO = Path(__file__).parents[2]


def dump(factory) -> dict:
    """Every row of the ingested tables, for comparing states."""
    out = {}
    with factory() as s:
        for model in (Paper, PaperAuthor, PaperVersion, Mention, MentionSnapshot, PaperzooLink, PaperzooReport):
            rows = s.scalars(select(model)).all()
            out[model.__tablename__] = sorted(
                tuple(str(getattr(r, c.key)) for c in model.__table__.columns) for r in rows)
    return out


def snapshot_line(**over) -> str:
    d = {"id": "2401.00001", "title": "A  title\n over lines", "authors": "Ada Lovelace, Alan Turing and Grace Hopper",
         "abstract": "An abstract.", "categories": "cs.LG stat.ML",
         "versions": [{"version": "v1", "created": "Mon, 1 Jan 2024 10:00:00 GMT"}], "update_date": "2024-01-01"}
    d.update(over)
    return json.dumps(d)


def test_atom_fields_and_a_malformed_entry():
    records, report = arxiv.parse_atom((HERE / "arxiv_atom.xml").read_text())
    assert [r.arxiv_id for r in records] == ["2101.03961", "hep-th/9711200"]
    sw = records[0]
    assert sw.version == 3 and sw.title.startswith("Switch Transformers: Scaling") and "\n" not in sw.title
    assert sw.authors == ["William Fedus", "Barret Zoph", "Noam Shazeer"]
    assert sw.categories == ["cs.LG", "cs.AI"] and sw.doi == "10.0000/test" and sw.comment == "JMLR"
    assert sw.published.isoformat() == "2021-01-11T18:58:25+00:00" and sw.updated.year == 2022
    assert report.malformed == 1 and "not-an-id" in report.examples[0]


def test_snapshot_lines_and_malformed_ones_are_reported():
    text = "\n".join([snapshot_line(), "{not json", snapshot_line(id="bogus"), snapshot_line(id="2401.00002", title=""),
                      json.dumps(["a list"]),
                      snapshot_line(id="2401.00003", authors_parsed=[["Lovelace", "Ada", ""], ["Turing", "Alan", ""]],
                                    versions=[{"version": "v2", "created": "Tue, 2 Jan 2024 10:00:00 GMT"},
                                              {"version": "v1", "created": "Mon, 1 Jan 2024 10:00:00 GMT"}])])
    records, report = arxiv.parse_snapshot(text)
    assert [r.arxiv_id for r in records] == ["2401.00001", "2401.00003"]
    assert records[0].authors == ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    assert records[0].title == "A title over lines" and records[0].categories == ["cs.LG", "stat.ML"]
    assert records[1].version == 2 and records[1].authors == ["Ada Lovelace", "Alan Turing"]
    assert records[1].published.day == 1 and records[1].updated.day == 2
    assert report.malformed == 4 and len(report.examples) == 4
    assert "not JSON" in report.examples[0] and "empty title" in report.examples[2]


def test_arxiv_ingest_is_idempotent_and_versions_update(factory, backend):
    recs, _ = arxiv.parse_snapshot(snapshot_line())
    first = arxiv.upsert(factory, recs)
    assert (first.added, first.updated) == (1, 0)
    state = dump(factory)
    again = arxiv.upsert(factory, arxiv.parse_snapshot(snapshot_line())[0])
    assert (again.added, again.updated, again.unchanged) == (0, 0, 1)
    assert dump(factory) == state  # running it twice changes nothing
    v2 = snapshot_line(title="A better title", versions=[{"version": "v1", "created": "Mon, 1 Jan 2024 10:00:00 GMT"},
                                                          {"version": "v2", "created": "Fri, 5 Jan 2024 10:00:00 GMT"}])
    rep = arxiv.upsert(factory, arxiv.parse_snapshot(v2)[0])
    assert rep.updated == 1
    old = arxiv.upsert(factory, arxiv.parse_snapshot(snapshot_line(title="stale"))[0])  # v1 again: ignored
    assert old.unchanged == 1
    with factory() as s:
        p = s.scalar(select(Paper))
        assert (p.version, p.title, p.authors_text) == (2, "A better title", "Ada Lovelace, Alan Turing, Grace Hopper")
        assert [v.version for v in p.versions] == [1, 2]
        assert s.scalar(select(Paper).where(Paper.arxiv_id == "2401.00001")).id == p.id


def test_a_failing_batch_leaves_nothing_behind(factory, monkeypatch):
    recs, _ = arxiv.parse_snapshot("\n".join(snapshot_line(id=f"2401.{i:05d}") for i in range(1, 7)))
    real = arxiv._apply
    calls = []

    def flaky(s, p, rec, authors):
        calls.append(rec.arxiv_id)
        if rec.arxiv_id == "2401.00005":
            raise RuntimeError("disk full")
        real(s, p, rec, authors)

    monkeypatch.setattr(arxiv, "_apply", flaky)
    with pytest.raises(RuntimeError):
        arxiv.upsert(factory, recs, batch=3)
    with factory() as s:  # the first batch (1-3) committed, nothing of the second (4-6)
        assert sorted(s.scalars(select(Paper.arxiv_id)).all()) == ["2401.00001", "2401.00002", "2401.00003"]
        assert s.scalar(select(PaperAuthor).where(PaperAuthor.paper_id > 3)) is None


def test_mention_exports_jsonl_and_csv(factory, settings, backend):
    jsonl = "\n".join(json.dumps(d) for d in [
        {"source": "twitter", "post_id": "1", "account": "Alice", "posted_at": "2026-01-09T10:00:00Z",
         "text": "https://arxiv.org/abs/2401.00001v2 and arXiv:2401.00002", "reposts": 3, "likes": 9},
        {"source": "twitter", "post_id": "2", "account": "bob", "posted_at": "2026-01-09T11:00:00",
         "paper": "2401.00001"},
        {"source": "twitter", "post_id": "3", "account": "bob", "posted_at": "yesterday", "paper": "2401.00001"},
        {"source": "twitter", "post_id": "4", "account": "bob", "posted_at": "2026-01-09T11:00:00Z", "text": "hi"},
        {"source": "twitter", "account": "bob", "posted_at": "2026-01-09T11:00:00Z", "paper": "2401.00001"},
        {"source": "twitter", "post_id": "5", "account": "bob", "posted_at": "2026-01-09T11:00:00Z",
         "paper": "2401.00001", "reposts": -1}])
    records, report = mentions.parse_export(jsonl)
    assert [(r.post_id, r.account, r.arxiv_ids) for r in records] == [
        ("1", "alice", ("2401.00001", "2401.00002")), ("2", "bob", ("2401.00001",))]
    assert report.malformed == 4
    assert any("ISO 8601" in e for e in report.examples) and any("links no arXiv" in e for e in report.examples)
    rep = mentions.upsert(factory, settings, records, report)
    assert rep.added == 3  # a post linking two papers is two rows
    state = dump(factory)
    rep2 = mentions.upsert(factory, settings, mentions.parse_export(jsonl)[0])
    assert (rep2.added, rep2.updated, rep2.unchanged) == (0, 0, 3) and dump(factory) == state
    csv_text = ("source,post_id,account,posted_at,reposts,likes,url,paper,text\n"
                "twitter,1,alice,2026-01-09T10:00:00Z,7,9,,,https://arxiv.org/abs/2401.00001\n"
                "mastodon,9,carol,2026-01-09T12:00:00Z,0,1,,hep-th/9711200v2,\n"
                "mastodon,10,carol,,0,1,,hep-th/9711200,\n")
    records, report = mentions.parse_export(csv_text)
    assert report.malformed == 1 and "posted_at" in report.examples[0]
    rep3 = mentions.upsert(factory, settings, records)
    assert (rep3.added, rep3.updated) == (1, 1)  # the re-seen post's repost count moved from 3 to 7
    with factory() as s:
        placeholder = s.scalar(select(Paper).where(Paper.arxiv_id == "hep-th/9711200"))
        assert placeholder is not None and placeholder.version == 0 and placeholder.title == ""
        assert s.scalar(select(Mention.reposts).where(Mention.post_id == "1", Mention.paper_id == 1)) in (7, 3)


def test_placeholder_is_filled_by_arxiv_ingest(factory, settings):
    records, _ = mentions.parse_export(json.dumps({"source": "x", "post_id": "1", "account": "a",
                                                   "posted_at": "2026-01-01T00:00:00Z", "paper": "2401.00001"}))
    mentions.upsert(factory, settings, records)
    rep = arxiv.upsert(factory, arxiv.parse_snapshot(snapshot_line())[0])
    assert rep.updated == 1
    with factory() as s:
        assert s.scalar(select(Paper.title)) == "A title over lines"


def test_snapshots_only_after_a_run_that_changed_something(factory, settings):
    line = json.dumps({"source": "x", "post_id": "1", "account": "a", "posted_at": "2026-01-01T00:00:00Z",
                       "paper": "2401.00001"})
    from datetime import UTC, datetime

    at = datetime(2026, 1, 2, tzinfo=UTC)
    mentions.upsert(factory, settings, mentions.parse_export(line)[0], snapshot_at=at)
    mentions.upsert(factory, settings, mentions.parse_export(line)[0], snapshot_at=at)
    with factory() as s:
        assert len(s.scalars(select(MentionSnapshot)).all()) == 1


class FakeApi:
    """Serves recorded responses by URL and cursor; records the requests it got."""

    def __init__(self, pages: dict) -> None:
        self.pages, self.calls = pages, []

    def __call__(self, url, params):
        self.calls.append((url, dict(params)))
        key = (url, params.get("cursor") or params.get("max_id"))
        return self.pages.get(key, {"posts": []} if "bsky" in url else [])


def test_bluesky_adapter_on_recorded_responses(factory, settings):
    b = mentions.Bluesky("arxiv.org")
    api = FakeApi({(b.url, None): json.loads((HERE / "bluesky_searchPosts.json").read_text()),
                   (b.url, "page2"): json.loads((HERE / "bluesky_searchPosts_page2.json").read_text())})
    records, report = mentions.fetch_from(b, api)
    assert [c[1].get("cursor") for c in api.calls] == [None, "page2"]  # followed the cursor, stopped without one
    assert [(r.account, r.arxiv_ids, r.reposts, r.likes) for r in records] == [
        ("alice.bsky.social", ("2101.03961",), 5, 20),  # the facet's full link, not the truncated text
        ("bob.bsky.social", ("2003.08934",), 0, 2)]  # the link card
    assert records[0].url == "https://bsky.app/profile/alice.bsky.social/post/3kabc1"
    assert report.malformed == 1 and "ISO 8601" in report.examples[0]  # page 2's post has a bad date
    rep = mentions.upsert(factory, settings, records, report)
    assert rep.added == 2


def test_mastodon_adapter_on_recorded_responses():
    m = mentions.Mastodon("https://mastodon.social", "arxiv")
    api = FakeApi({(m.url, None): json.loads((HERE / "mastodon_tag_arxiv.json").read_text())})
    records, report = mentions.fetch_from(m, api)
    assert [c[1].get("max_id") for c in api.calls] == [None, "113000000000000001"]
    assert [(r.account, r.arxiv_ids, r.reposts) for r in records] == [
        ("dora", ("2003.08934",), 2), ("eve@sigmoid.social", ("2101.03961", "2003.08934"), 0)]
    assert report.malformed == 0
    with pytest.raises(ValueError, match="https origin"):
        mentions.Mastodon("javascript:alert(1)")


def test_registry_links_every_paper_with_its_committed_verdict(factory, backend):
    from paperzoo import registry

    rep = ingest_registry(factory, REPO)
    names = {p.name for p in registry.papers()}
    assert rep.added == len(names) and rep.malformed == 0
    committed = {p.parent.name: json.loads(p.read_text()) for p in (REPO / "docs" / "reports").glob("*/result.json")}
    with factory() as s:
        links = {link.name: link for link in s.scalars(select(PaperzooLink)).all()}
        assert set(links) == names
        for name, link in links.items():
            if name in committed:
                assert link.verdict == committed[name]["verdict"]
                assert link.report_path == f"docs/reports/{name}/report.md"
            assert link.status == registry.get(name).status
            paper = s.get(Paper, link.paper_id)
            assert paper.arxiv_id == registry.get(name).arxiv and paper.title
    state = dump(factory)
    again = ingest_registry(factory, REPO)
    assert again.unchanged == len(names) and dump(factory) == state


def test_every_committed_report_of_a_paper_gets_a_row_with_its_verdict(factory, backend):
    """Main reports and reports of other budgets (``perceiver/fsdd-long``), as the registry lists them."""
    from paperzoo import registry

    ingest_registry(factory, REPO)
    with factory() as s:
        rows = {r.path: r for r in s.scalars(select(PaperzooReport)).all()}
        for p in registry.papers():
            want = registry.verdicts(p, REPO / "docs" / "reports")
            labels = registry.verdict_labels(p, REPO / "docs" / "reports")
            mine = {k: r for k, r in rows.items() if r.link_name == p.name}
            assert set(mine) == set(want), p.name
            for k, v in want.items():
                assert (mine[k].recipe, mine[k].preset, mine[k].verdict, mine[k].label) == (
                    v.recipe, v.preset, v.verdict, labels[k])
    assert "perceiver/fsdd-long" in rows and rows["perceiver/fsdd-long"].preset == "fsdd-long"


def test_report_rows_follow_the_committed_folders_and_a_damaged_one_is_named(factory, tmp_path):
    import shutil

    from paperzoo import registry

    reports = tmp_path / "docs" / "reports"
    shutil.copytree(REPO / "docs" / "reports" / "perceiver", reports / "perceiver")
    perceiver = [registry.get("perceiver")]
    assert ingest_registry(factory, tmp_path, perceiver).added == 1

    def paths():
        with factory() as s:
            return sorted(r.path for r in s.scalars(select(PaperzooReport)).all())

    assert paths() == ["perceiver", "perceiver/fsdd-long"]
    shutil.copytree(reports / "perceiver" / "fsdd-long", reports / "perceiver" / "fsdd-longer")
    cfg = reports / "perceiver" / "fsdd-longer" / "config.json"
    d = json.loads(cfg.read_text())
    d["config"]["preset"] = "fsdd-longer"
    cfg.write_text(json.dumps(d))
    assert ingest_registry(factory, tmp_path, perceiver).updated == 1
    assert paths() == ["perceiver", "perceiver/fsdd-long", "perceiver/fsdd-longer"]
    shutil.rmtree(reports / "perceiver" / "fsdd-long")
    assert ingest_registry(factory, tmp_path, perceiver).updated == 1
    assert paths() == ["perceiver", "perceiver/fsdd-longer"]
    assert ingest_registry(factory, tmp_path, perceiver).unchanged == 1
    (reports / "perceiver" / "fsdd-longer" / "result.json").write_text("{not json")
    rep = ingest_registry(factory, tmp_path, perceiver)  # named, and the last good rows are kept
    assert rep.malformed == 1 and "fsdd-longer is damaged" in str(rep.examples) and "--resume" in str(rep.examples)
    assert paths() == ["perceiver", "perceiver/fsdd-longer"]


def test_read_source_from_a_local_http_server(tmp_path):
    (tmp_path / "feed.xml").write_text((HERE / "arxiv_atom.xml").read_text())
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        text = read_source(f"http://127.0.0.1:{server.server_address[1]}/feed.xml")
    finally:
        server.shutdown()
    assert len(arxiv.parse(text)[0]) == 2
    with pytest.raises(ValueError, match="no such file"):
        read_source(tmp_path / "missing.jsonl")
