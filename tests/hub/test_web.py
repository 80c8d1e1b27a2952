"""Pages, accounts and security: argon2, cookies, no default secret, CSRF on every POST, login rate limit, private
lists and notes invisible to others (IDOR), escaped XSS payloads, FTS syntax in search never a 500."""

import os
import re
import stat

import pytest
from hub_helpers import all_routes, csrf, post, register, seed_papers
from sqlalchemy import select

from paperzoo.hub.models import ListItem, Note, ReadingList, User


def make_list(client, name="mine", public=False) -> int:
    data = {"name": name, **({"public": "true"} if public else {})}
    r = post(client, "/lists", data)
    assert r.status_code == 303
    return int(r.headers["location"].rsplit("/", 1)[1])


def test_register_login_logout_and_cookie_flags(client, factory, backend):
    r = register(client, "alice", "correct horse 1", "Alice A.")
    cookie = r.headers["set-cookie"]
    assert "pz_session=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie and "Secure" not in cookie
    assert "Alice A." in client.get("/").text
    with factory() as s:
        assert s.scalar(select(User.password_hash)).startswith("$argon2id$")
    post(client, "/logout")
    assert "Log in" in client.get("/").text
    r = post(client, "/login", {"username": "alice", "password": "wrong password"})
    assert r.status_code == 401 and "wrong username or password" in r.text
    r = post(client, "/login", {"username": "ALICE", "password": "correct horse 1", "next": "//evil.example/x"})
    assert r.status_code == 303 and r.headers["location"] == "/"  # no open redirect
    r = register(client, "bob")  # registration validates names and takes none twice
    bad = post(client, "/register", {"username": "bob", "password": "correct horse 1"})
    assert bad.status_code == 400 and "taken" in bad.text
    bad = post(client, "/register", {"username": "<b>x</b>", "password": "correct horse 1"})
    assert bad.status_code == 400 and "<b>x</b>" not in bad.text


def test_cookies_are_secure_over_https(app):
    from fastapi.testclient import TestClient

    with TestClient(app, base_url="https://hub.example") as c:
        first = c.get("/login").headers["set-cookie"]
        assert "pz_csrf=" in first and "Secure" in first and "HttpOnly" in first
        r = register(c, "carol")
        assert "pz_session=" in r.headers["set-cookie"] and "Secure" in r.headers["set-cookie"]


def test_no_default_secret_key(tmp_path, monkeypatch):
    from paperzoo.hub.config import HubNotInitialised, load_settings, write_secret

    monkeypatch.delenv("PAPERZOO_HUB_SECRET", raising=False)
    with pytest.raises(HubNotInitialised, match="hub init"):
        load_settings(tmp_path / "a")
    key_a, key_b = write_secret(tmp_path / "a"), write_secret(tmp_path / "b")
    assert stat.S_IMODE(os.stat(key_a).st_mode) == 0o600
    assert key_a.read_text() != key_b.read_text() and len(key_a.read_text()) >= 48
    first = key_a.read_text()
    write_secret(tmp_path / "a")  # init again keeps the key (sessions survive)
    assert key_a.read_text() == first and load_settings(tmp_path / "a").secret_key == first


def test_every_post_route_needs_the_csrf_token(app, client, factory, backend):
    seed_papers(factory, 1)
    register(client, "alice")
    lid = make_list(client)
    posts = [r for r in all_routes(app) if "POST" in (getattr(r, "methods", None) or set())]
    assert len(posts) >= 15
    for route in posts:
        path = route.path.replace("{list_id}", str(lid)).replace("{note_id}", "1").replace("{username}", "alice")
        path = path.replace("{arxiv_id:path}", "2401.00001")
        no_token = client.post(path, data={"name": "x"}, follow_redirects=False)
        assert no_token.status_code == 403, (path, no_token.status_code)
        forged = client.post(path, data={"name": "x", "csrf_token": "0" * 64}, follow_redirects=False)
        assert forged.status_code == 403, path
    # a token is bound to its browser's nonce: another browser's token fails here
    from fastapi.testclient import TestClient

    with TestClient(app) as other:
        token = csrf(other)
    assert client.post("/lists", data={"name": "x", "csrf_token": token}, follow_redirects=False).status_code == 403
    with factory() as s:
        assert len(s.scalars(select(ReadingList)).all()) == 1  # nothing was created by the rejected posts


def test_login_rate_limit_per_user_and_per_address(client, factory, backend):
    register(client, "alice", "correct horse 1")
    post(client, "/logout")
    for _ in range(5):
        assert post(client, "/login", {"username": "alice", "password": "nope nope"}).status_code == 401
    r = post(client, "/login", {"username": "alice", "password": "correct horse 1"})
    assert r.status_code == 429 and "Retry-After" in r.headers  # even the right password waits
    r = post(client, "/login", {"username": "someone", "password": "correct horse 1"})
    assert r.status_code == 429  # the same address is blocked for every name


def test_private_lists_and_notes_are_invisible_to_others(client, new_client, factory, backend):
    """IDOR: every private resource, as another user and as anonymous: 404 (or the login page), never the content."""
    (a,) = seed_papers(factory, 1)
    register(client, "alice")
    lid = make_list(client, "SECRET-LIST-NAME")
    post(client, f"/lists/{lid}/add", {"arxiv_id": a})
    post(client, f"/papers/{a}/note", {"body": "SECRET-NOTE-BODY"})
    with factory() as s:
        nid = s.scalar(select(Note.id))
        item = s.scalar(select(ListItem.id))
    public_lid = make_list(client, "open list", public=True)
    assert "SECRET-LIST-NAME" in client.get(f"/lists/{lid}").text  # the owner sees it

    bob = new_client()
    register(bob, "bob")
    anon = new_client()
    gets = [f"/lists/{lid}", f"/lists/{lid}/bibtex", f"/lists/{lid}/feed.xml", f"/api/lists/{lid}",
            f"/api/lists/{lid}/recommendations", f"/notes/{nid}"]
    for who in (bob, anon):
        for path in gets:
            r = who.get(path, follow_redirects=False)
            assert r.status_code == 404, (path, r.status_code)
            assert "SECRET" not in r.text
        for path in ("/u/alice", "/api/users/alice", f"/papers/{a}", f"/api/papers/{a}", "/feed", "/api/feed",
                     f"/lists/{public_lid}", "/search?q=secret", "/api/me/lists"):
            r = who.get(path)
            assert "SECRET" not in r.text, path
    bob.post("/u/alice/follow", data={"csrf_token": csrf(bob)})
    assert "SECRET" not in bob.get("/feed").text
    writes = [(f"/lists/{lid}/edit", {"name": "pwned", "public": "true"}), (f"/lists/{lid}/add", {"arxiv_id": a}),
              (f"/lists/{lid}/remove", {"item_id": item}), (f"/lists/{lid}/move", {"item_id": item, "direction": "up"}),
              (f"/lists/{lid}/delete", {}), (f"/notes/{nid}/delete", {}),
              (f"/papers/{a}/add", {"list_id": lid})]
    for path, data in writes:
        r = post(bob, path, data)
        assert r.status_code == 404, (path, r.status_code)
        r = post(anon, path, data)
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), path
    with factory() as s:
        lst = s.get(ReadingList, lid)
        assert lst.name == "SECRET-LIST-NAME" and not lst.public and len(lst.items) == 1
        assert s.get(Note, nid).body == "SECRET-NOTE-BODY"


PAYLOADS = ['<script>alert("x")</script>', '<img src=x onerror=alert(1)>', '"><svg onload=alert(1)>']


def test_a_reports_relative_images_are_served_from_its_files_route_and_other_sources_are_left_alone():
    from paperzoo.hub.render import markdown

    html = str(markdown("![a](acc.png) ![b](/static/x.png) ![c](https://example.org/y.png) ![d](javascript:alert(1))"
                        "\n\n`src=\"acc.png\"`", base="/reports/nerf/files/"))
    assert '<img src="/reports/nerf/files/acc.png"' in html and '<img src="/static/x.png"' in html
    assert '<img src="https://example.org/y.png"' in html and 'src="javascript' not in html
    assert "src=&quot;acc.png&quot;" in html  # text is never rewritten, only image sources
    assert '<img src="acc.png"' in str(markdown("![a](acc.png)"))


def test_xss_payloads_are_escaped_everywhere(client, factory, new_client, backend):
    from datetime import UTC, datetime

    from paperzoo.hub.ingest.arxiv import ArxivRecord, upsert

    upsert(factory, [ArxivRecord("2401.00009", 1, f"Title {PAYLOADS[0]}", [f"Eve {PAYLOADS[1]}"],
                                 f"Abstract {PAYLOADS[2]}", ["cs.LG"], datetime(2024, 1, 1, tzinfo=UTC), None)])
    register(client, "eve", display_name=PAYLOADS[1])
    post(client, "/settings", {"display_name": PAYLOADS[1], "bio": PAYLOADS[0] + " [x](javascript:alert(1))"})
    lid = make_list(client, PAYLOADS[2], public=True)
    post(client, f"/lists/{lid}/add", {"arxiv_id": "2401.00009"})
    post(client, "/papers/2401.00009/note", {"body": f"{PAYLOADS[0]}\n\n[click](javascript:alert(1)) $<b>x</b>$",
                                             "public": "true"})
    viewer = new_client()
    pages = ["/", "/new", "/papers/2401.00009", f"/lists/{lid}", "/u/eve", "/search?q=" + PAYLOADS[0],
             f"/lists/{lid}/feed.xml", "/feeds/new.xml", "/notes/1"]
    for path in pages:
        body = viewer.get(path).text
        for raw in PAYLOADS + ["<b>x</b>", 'href="javascript:']:
            assert raw not in body, (path, raw)
    assert "&lt;script&gt;" in viewer.get("/papers/2401.00009").text
    assert viewer.get("/").headers["content-security-policy"].startswith("default-src 'self'")


@pytest.mark.parametrize("q", ['"', 'NEAR(', '*', '-', 'a OR', ')', 'title:x', '"unbalanced', 'NEAR(a b, 2)', '^x',
                               'attention*', '-attention', 'AND', '{}', "'; DROP TABLE papers; --", 'ü∑ 😀', ' '])
def test_fts_syntax_never_fails(client, factory, q, backend):
    seed_papers(factory, 3)
    for path in ("/search", "/api/search"):
        r = client.get(path, params={"q": q})
        assert r.status_code == 200, (path, q, r.text[:200])


def test_search_ranks_title_matches_first(client, factory, backend):
    from datetime import UTC, datetime

    from paperzoo.hub.ingest.arxiv import ArxivRecord, upsert

    when = datetime(2024, 1, 1, tzinfo=UTC)
    upsert(factory, [ArxivRecord("2401.00001", 1, "Something else", ["A B"], "mentions sparsity once", ["cs.LG"], when,
                                 None),
                     ArxivRecord("2401.00002", 1, "Sparsity everywhere", ["C D"], "about sparsity", ["cs.LG"], when,
                                 None),
                     ArxivRecord("2401.00003", 1, "Unrelated", ["E F"], "nothing", ["cs.LG"], when, None)])
    r = client.get("/api/search", params={"q": "sparsity"}).json()
    assert [p["arxiv_id"] for p in r["items"]] == ["2401.00002", "2401.00001"] and r["total"] == 2
    assert client.get("/api/search", params={"q": "\"C D\" sparsity"}).json()["total"] == 1  # authors are indexed


def test_reading_list_flow_reorder_public_bibtex(client, factory, backend):
    a, b, c = seed_papers(factory, 3)
    register(client, "alice")
    lid = make_list(client, "to read")
    for x in (a, b, c):
        post(client, f"/lists/{lid}/add", {"arxiv_id": x})
    post(client, f"/lists/{lid}/add", {"arxiv_id": a})  # twice: still once

    def order():
        return [p["arxiv_id"] for p in client.get(f"/api/lists/{lid}").json()["papers"]]

    assert order() == [a, b, c]
    with factory() as s:
        items = {i.paper.arxiv_id: i.id for i in s.scalars(select(ListItem)).all()}
    post(client, f"/lists/{lid}/move", {"item_id": items[c], "direction": "up"})
    post(client, f"/lists/{lid}/move", {"item_id": items[a], "direction": "up"})  # already first: no change
    assert order() == [a, c, b]
    post(client, f"/lists/{lid}/remove", {"item_id": items[b]})
    assert order() == [a, c]
    post(client, f"/lists/{lid}/edit", {"name": "to read", "public": "true"})
    assert client.get(f"/api/lists/{lid}").json()["public"] is True
    bib = client.get(f"/lists/{lid}/bibtex").text
    assert bib.count("@misc{") == 2 and f"eprint = {{{a}}}" in bib and "author = {Author 0 and Shared Author}" in bib


def test_follow_and_feed(client, new_client, factory, backend):
    (a,) = seed_papers(factory, 1)
    register(client, "alice")
    pub = make_list(client, "public one", public=True)
    priv = make_list(client, "private one")
    post(client, f"/lists/{pub}/add", {"arxiv_id": a})
    post(client, f"/lists/{priv}/add", {"arxiv_id": a})
    post(client, f"/papers/{a}/note", {"body": "public thoughts", "public": "true"})
    bob = new_client()
    register(bob, "bob")
    assert "Nothing yet" in bob.get("/feed").text
    post(bob, "/u/alice/follow")
    assert bob.get("/api/users/alice").json()["followers"] == 1
    feed = bob.get("/api/feed").json()
    assert sorted((e["kind"], e.get("list_id")) for e in feed) == [("added", pub), ("noted", None)]
    assert "public one" in bob.get("/feed").text and "private one" not in bob.get("/feed").text
    post(bob, "/u/alice/unfollow")
    assert bob.get("/api/feed").json() == []


def test_pages_render_and_paginate(app, client, factory, backend):
    from dataclasses import replace

    from paperzoo.hub.config import REPO_ROOT
    from paperzoo.hub.ingest.registry import ingest_registry

    seed_papers(factory, 5)
    ingest_registry(factory, REPO_ROOT)
    app.state.settings = replace(app.state.settings, page_size=4)
    for path in ("/", "/hot", "/new", "/top?window=day", "/top?window=all", "/rising", "/about", "/search?q=paper",
                 "/login", "/register", "/reports/nerf", "/code/nerf", "/papers/2003.08934", "/u/nobody",
                 "/hot?cat=cs.CV", "/api/docs"):
        r = client.get(path)
        assert r.status_code == (404 if path == "/u/nobody" else 200), path
    first = client.get("/new").text
    assert 'rel="next"' in first and "page 1 of" in first
    second = client.get("/new?page_no=2").text
    assert 'rel="prev"' in second
    titles = lambda html: re.findall(r'class="title" href="/papers/([^"]+)"', html)
    assert not set(titles(first)) & set(titles(second))
    assert client.get("/top?window=year").status_code == 422
    register(client, "lister")
    for k in range(5):
        make_list(client, f"list-{k}", public=True)
    mine = client.get("/lists").text
    assert 'rel="next"' in mine and mine.count('href="/lists/') == 4
    assert client.get("/lists?page_no=2").text.count('href="/lists/') == 1
    assert 'rel="next"' in client.get("/u/lister").text


def test_front_page_lists_every_registered_paper_and_the_verdict(client, factory, backend):
    import json

    from paperzoo import registry
    from paperzoo.hub.config import REPO_ROOT
    from paperzoo.hub.ingest.registry import ingest_registry

    ingest_registry(factory, REPO_ROOT)
    front = client.get("/").text
    for p in registry.papers():
        assert f">{p.name}</a>" in front and p.status in front
    verdict = json.loads((REPO_ROOT / "docs/reports/nerf/result.json").read_text())["verdict"]
    page = client.get("/papers/2003.08934").text
    assert f'class="verdict">{verdict}<' in page and 'href="/reports/nerf"' in page and 'href="/code/nerf"' in page
    report = client.get("/reports/nerf").text
    assert '<img src="/reports/nerf/files/psnr.png"' in report
    assert client.get("/reports/nerf/files/psnr.png").headers["content-type"] == "image/png"
    assert client.get("/reports/nerf/files/..%2F..%2Fpyproject.toml").status_code == 404


def test_a_report_of_another_budget_and_of_another_recipe_have_pages_and_files(client, factory, backend):
    from paperzoo import registry
    from paperzoo.hub.config import REPO_ROOT
    from paperzoo.hub.ingest.registry import ingest_registry

    ingest_registry(factory, REPO_ROOT)
    arxiv = registry.get("perceiver").arxiv
    paper = client.get(f"/papers/{arxiv}").text
    assert 'href="/reports/perceiver/perceiver/fsdd-long"' in paper and 'href="/reports/perceiver"' in paper
    long = client.get("/reports/perceiver/perceiver/fsdd-long")
    assert long.status_code == 200 and "docs/reports/perceiver/fsdd-long/report.md" in long.text
    assert '<img src="/reports/perceiver/perceiver/fsdd-long/files/accuracy.png"' in long.text
    assert 'class="current">not reproduced (fsdd-long)<' in long.text  # the nav marks the page's own report
    main = client.get("/reports/perceiver").text
    assert 'href="/reports/perceiver/perceiver/fsdd-long"' in main and "docs/reports/perceiver/report.md" in main
    png = client.get("/reports/perceiver/perceiver/fsdd-long/files/accuracy.png")
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png.content == (REPO_ROOT / "docs/reports/perceiver/fsdd-long/accuracy.png").read_bytes()
    ablations = client.get("/reports/electra/electra-ablations")
    assert ablations.status_code == 200 and "docs/reports/electra-ablations/report.md" in ablations.text
    for missing in ("/reports/perceiver/perceiver/nope", "/reports/perceiver/electra-ablations",
                    "/reports/perceiver/perceiver/fsdd-long/files/..%2Freport.md",
                    "/reports/perceiver/perceiver/fsdd-long/files/nope.png", "/reports/electra/perceiver/fsdd-long"):
        assert client.get(missing).status_code == 404, missing
    api = client.get(f"/api/papers/{arxiv}").json()["paperzoo"]["reports"]
    assert {r["path"]: r["preset"] for r in api} == {"perceiver": "small", "perceiver/fsdd-long": "fsdd-long"}


def test_every_request_session_commits_before_the_response(app):
    """get_db is always function-scoped: its commit runs before the response goes out, so a client never sees a
    write acknowledged (or a session cookie) that is not yet in the database."""
    from paperzoo.hub.deps import get_db

    def walk(dep):
        yield dep
        for d in dep.dependencies:
            yield from walk(d)

    uses = [d for r in all_routes(app) if hasattr(r, "dependant") for d in walk(r.dependant) if d.call is get_db]
    assert len(uses) > 30
    assert {d.scope for d in uses} == {"function"}


def test_the_app_hashes_with_argon2id_default_costs():
    """Outside the tests' cheap hasher (conftest), the app uses argon2-cffi's defaults (RFC 9106 low-memory)."""
    import importlib

    from paperzoo.hub import auth

    fresh = importlib.reload(auth)
    assert (fresh._hasher.time_cost, fresh._hasher.memory_cost) == (3, 65536)


def test_a_page_set_plugs_in(settings, tmp_path):
    """What a new page set does (as /label does): its router and templates through create_app, the shared auth, CSRF
    and base template."""
    from fastapi import APIRouter, Depends, Form, Request
    from fastapi.testclient import TestClient

    from paperzoo.hub.app import create_app
    from paperzoo.hub.auth import verify_csrf
    from paperzoo.hub.deps import DB, page, require_user

    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "label.html").write_text('{% extends "base.html" %}{% block content %}<h1>Label {{ n }}</h1>'
                                                 '<form method="post">{{ csrf_field() }}</form>{% endblock %}')
    router = APIRouter(include_in_schema=False)
    got = []

    @router.get("/pageset")
    def label(request: Request, db=DB, user=Depends(require_user)):
        return page(request, "label.html", n=user.username)

    @router.post("/pageset", dependencies=[Depends(verify_csrf)])
    def save(vote: str = Form(...), db=DB, user=Depends(require_user)):
        got.append((user.username, vote))
        return {"ok": True}

    app = create_app(settings, routers=[router], template_dirs=[tmp_path / "tpl"])
    with TestClient(app) as c:
        assert c.get("/pageset", follow_redirects=False).headers["location"].startswith("/login")
        register(c, "labeller")
        body = c.get("/pageset").text
        assert "<h1>Label labeller</h1>" in body and "paperzoo hub" in body  # inside the hub's base template
        assert c.post("/pageset", data={"vote": "1"}).status_code == 403
        assert post(c, "/pageset", {"vote": "1"}).status_code == 200 and got == [("labeller", "1")]
    app.state.engine.dispose()
