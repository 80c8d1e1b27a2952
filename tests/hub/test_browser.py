"""The main flow in a real browser (Playwright driving Debian's Chromium against uvicorn on loopback): register, log
in, browse Hot, open a paper with a paperzoo badge and follow the link to its report, create a private list, add
papers, reorder, make it public, write a note, follow another user, see their activity in the feed, log out, and
check a private list is not reachable. Screenshots of the main pages go to the test artifacts
(test-artifacts/hub/ or $PAPERZOO_HUB_ARTIFACTS)."""

import json

import pytest
from hub_helpers import LiveServer, make_settings

from paperzoo.hub.config import REPO_ROOT

XSS = '<img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def live_hub(tmp_path_factory, sqlite_template):
    import shutil

    from paperzoo.hub.app import create_app
    from paperzoo.hub.config import PACKAGE_DIR, REPO_ROOT
    from paperzoo.hub.db import make_engine, session_factory
    from paperzoo.hub.ingest.arxiv import parse_snapshot, upsert
    from paperzoo.hub.ingest.mentions import ingest_sample, parse_export
    from paperzoo.hub.ingest.registry import ingest_registry

    home = tmp_path_factory.mktemp("live")
    shutil.copy(sqlite_template, home / "hub.db")
    settings = make_settings(home, f"sqlite:///{home / 'hub.db'}", recommend_on_change=True)
    factory = session_factory(make_engine(settings.db_url))
    ingest_registry(factory, REPO_ROOT)
    upsert(factory, parse_snapshot((PACKAGE_DIR / "sample" / "arxiv.jsonl").read_text())[0], sample=True)
    ingest_sample(factory, settings, parse_export((PACKAGE_DIR / "sample" / "mentions.jsonl").read_text())[0])
    app = create_app(settings)
    with LiveServer(app) as server:
        yield server
    app.state.engine.dispose()


def submit(page, selector):
    """Click a form's button and wait for the page the POST redirects to."""
    with page.expect_navigation():
        page.click(selector)


def register(page, url, name, display=""):
    page.goto(f"{url}/register")
    page.fill("input[name=username]", name)
    page.fill("input[name=display_name]", display)
    page.fill("input[name=password]", "correct horse 1")
    submit(page, "form.register button")
    page.wait_for_url(f"{url}/")


def test_main_flow(live_hub, chromium_browser, chromium_page, artifacts):
    browser = chromium_browser
    url = live_hub.url
    alerts = []
    page = chromium_page
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))

    # bob, in another browser context, keeps a public list and has an XSS payload as display name
    bob_ctx = browser.new_context()
    bob = bob_ctx.new_page()
    bob.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    register(bob, url, "bob", XSS)
    bob.goto(f"{url}/lists")
    bob.fill("form.new-list input[name=name]", "bob picks")
    bob.check("form.new-list input[name=public]")
    submit(bob, "form.new-list button")
    bob.goto(f"{url}/papers/2101.03961")
    submit(bob, "form.add-to-list button")

    # alice registers, logs out, logs in
    register(page, url, "alice", "Alice")
    submit(page, "header form button")  # log out
    page.goto(f"{url}/login")
    page.fill("form.login input[name=username]", "alice")
    page.fill("form.login input[name=password]", "correct horse 1")
    submit(page, "form.login button")
    page.wait_for_url(f"{url}/")
    assert page.locator(".whoami").inner_text() == "Alice"

    # Hot: every registered paper in the paperzoo strip, the sample marked as such
    assert page.locator(".implemented li").count() >= 14
    assert page.locator("ol.papers li.paper").count() == 30
    assert page.locator(".tag.sample").first.is_visible()
    page.screenshot(path=str(artifacts / "hot.png"), full_page=True)

    # a paper with a paperzoo badge, and its report
    page.click(".implemented a:text-is('nerf')")
    page.wait_for_url(f"{url}/papers/2003.08934")
    verdict = json.loads((REPO_ROOT / "docs/reports/nerf/result.json").read_text())["verdict"]
    assert page.locator(".paperzoo .verdict").inner_text() == verdict
    page.screenshot(path=str(artifacts / "paper.png"), full_page=True)
    page.click("a.report-link")
    page.wait_for_url(f"{url}/reports/nerf")
    assert page.locator(".verdict").inner_text() == verdict
    assert page.locator(".report img").count() >= 1
    page.screenshot(path=str(artifacts / "report.png"))

    # a private list, two papers, reorder, make it public
    page.goto(f"{url}/lists")
    page.fill("form.new-list input[name=name]", "to read")
    submit(page, "form.new-list button")
    assert page.locator(".visibility").inner_text() == "private"
    list_url = page.url
    for arxiv_id in ("2003.08934", "2011.12948"):
        page.goto(f"{url}/papers/{arxiv_id}")
        page.select_option("form.add-to-list select", label="to read (private)")
        submit(page, "form.add-to-list button")
    page.goto(list_url)
    order = lambda: page.locator("li.list-item").evaluate_all("els => els.map(e => e.dataset.arxiv)")
    assert order() == ["2003.08934", "2011.12948"]
    with page.expect_navigation():
        page.locator("li.list-item").first.locator("button.down").click()
    assert order() == ["2011.12948", "2003.08934"]
    page.check("form.edit-list input[name=public]")
    submit(page, "form.edit-list button")
    assert page.locator(".visibility").inner_text() == "public"
    page.screenshot(path=str(artifacts / "list.png"), full_page=True)

    # a note with Markdown and a payload
    page.goto(f"{url}/papers/2003.08934")
    page.click("a.note-link")
    page.fill("form.note-form textarea", f"**Volume rendering** with $C(r)$. {XSS}")
    submit(page, "form.note-form button")
    page.wait_for_url(f"{url}/papers/2003.08934")
    assert page.locator(".note .md strong").inner_text() == "Volume rendering"
    assert XSS in page.locator(".note .md").inner_text()  # shown as text, not run
    assert page.locator(".note .md .math .katex").count() == 1  # the math typeset by KaTeX
    page.locator(".note").screenshot(path=str(artifacts / "note.png"))

    # follow bob, his public activity in the feed
    page.goto(f"{url}/u/bob")
    submit(page, "button.follow")
    assert page.locator("button.follow").inner_text() == "Unfollow"
    page.goto(f"{url}/feed")
    assert page.locator("li.event").count() >= 1 and "bob picks" in page.locator("ul.feed").inner_text()
    page.screenshot(path=str(artifacts / "feed.png"), full_page=True)

    # a private list is not reachable by anyone else
    page.goto(f"{url}/lists")
    page.fill("form.new-list input[name=name]", "hidden plans")
    submit(page, "form.new-list button")
    hidden_url = page.url
    submit(page, "header form button")  # log out
    page.goto(hidden_url)
    assert page.locator("h1").inner_text() == "404" and "hidden plans" not in page.content()
    bob.goto(hidden_url)
    assert bob.locator("h1").inner_text() == "404"
    page.goto(f"{url}/search?q=NEAR(%22volume")
    assert page.locator("h1").inner_text() == "Search"
    assert alerts == []  # no payload ever ran
    bob_ctx.close()
