"""Helpers of the hub's tests (import as ``from hub_helpers import ...``): forms with the CSRF token, accounts,
seeded papers, a live uvicorn server in a thread."""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_settings(home: Path, db_url: str, **over):
    from paperzoo.hub.config import Settings

    kw = dict(home=home, db_url=db_url, secret_key="t" * 48, ranking_cache_s=0.0, recommend_on_change=False,
              login_max_failures=5)
    kw.update(over)
    return Settings(**kw)


TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf(client, path: str = "/login") -> str:
    r = client.get(path)
    m = TOKEN.search(r.text)
    assert m, f"no CSRF field on {path}"
    return m.group(1)


def post(client, path: str, data: dict | None = None, **kw):
    """POST a form with the page's CSRF token, not following redirects."""
    return client.post(path, data={**(data or {}), "csrf_token": csrf(client)}, follow_redirects=False, **kw)


def register(client, username: str, password: str = "correct horse 1", display_name: str = ""):
    r = post(client, "/register", {"username": username, "password": password, "display_name": display_name})
    assert r.status_code == 303, r.text
    return r


def seed_papers(factory, n: int = 3, prefix: str = "2401") -> list[str]:
    """``n`` papers 2401.00001.. with distinct words in their titles; returns their ids."""
    from datetime import UTC, datetime, timedelta

    from paperzoo.hub.ingest.arxiv import ArxivRecord, upsert

    words = ["attention", "diffusion", "retrieval", "sparsity", "radiance", "alignment", "tokenizer", "routing"]
    recs = [ArxivRecord(arxiv_id=f"{prefix}.{i + 1:05d}", version=1, title=f"Paper about {words[i % len(words)]} {i}",
                        authors=[f"Author {i}", "Shared Author"], abstract=f"We study {words[i % len(words)]}.",
                        categories=["cs.LG"] if i % 2 == 0 else ["cs.CV", "cs.LG"],
                        published=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=i), updated=None)
            for i in range(n)]
    upsert(factory, recs)
    return [r.arxiv_id for r in recs]


class LiveServer:
    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the live server did not start in 20 s")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)




def all_routes(app) -> list:
    """Every route of the app, looking inside included routers."""
    out = []
    for r in app.routes:
        inner = getattr(r, "original_router", None)
        out.extend(all_routes(inner) if inner is not None else [r])
    return out
