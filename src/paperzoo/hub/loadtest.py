"""A bounded load test of the hub on loopback: synthetic papers and mentions, uvicorn in its own process, a client
of ``concurrency`` workers sending a fixed mix of page reads, searches, API reads and writes (papers added to
reading lists, notes saved); then every acknowledged write is looked up in the database (no lost writes).

    python -m paperzoo.hub.loadtest --db sqlite:////tmp/hub-load.db [--papers 100000] [--requests 3000]

The database must be empty and migrated (``paperzoo hub init`` or paperzoo.hub.db.migrate). tests/hub/test_load.py
runs it on SQLite and PostgreSQL and writes benchmarks/hub.md.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import platform
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy import insert, select

from .auth import CSRF_COOKIE, SESSION_COOKIE, csrf_token, hash_password, new_nonce, start_session
from .config import Settings
from .db import make_engine, session_factory, transaction
from .models import ListItem, Mention, Note, Paper, ReadingList, User

WORDS = ("attention transformer diffusion sparse retrieval graph radiance field token routing expert mixture "
         "contrastive language vision robot policy reward kernel gaussian latent flow equivariant scaling law "
         "quantization pruning distillation alignment benchmark memory recurrent convolution optimizer").split()
# the request mix: (kind, share)
MIX = (("hot", 0.30), ("new", 0.10), ("search", 0.10), ("paper", 0.15), ("api", 0.10), ("add", 0.15),
       ("note", 0.10))


@dataclass
class Result:
    backend: str
    papers: int
    requests: int
    concurrency: int
    seconds: float
    latencies: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds
    errors: dict[str, int] = field(default_factory=dict)
    acknowledged_writes: int = 0
    lost_writes: int = 0
    seed_seconds: float = 0.0
    load_average: float = 0.0  # the host's 1-minute load average when the requests started

    def summary(self) -> dict:
        every = np.concatenate([np.asarray(v) for v in self.latencies.values()])
        per = {k: {"n": len(v), "p50_ms": 1000 * float(np.percentile(v, 50)),
                   "p95_ms": 1000 * float(np.percentile(v, 95))} for k, v in sorted(self.latencies.items())}
        return {"backend": self.backend, "papers": self.papers, "requests": self.requests,
                "concurrency": self.concurrency, "seconds": self.seconds,
                "throughput_rps": self.requests / self.seconds, "p50_ms": 1000 * float(np.percentile(every, 50)),
                "p95_ms": 1000 * float(np.percentile(every, 95)), "per_kind": per, "errors": self.errors,
                "acknowledged_writes": self.acknowledged_writes, "lost_writes": self.lost_writes,
                "seed_seconds": self.seed_seconds, "load_average": self.load_average}


def seed(factory, n_papers: int, n_users: int, seed_: int = 0, mentions: int = 50000) -> tuple[list[str], list]:
    """``n_papers`` synthetic papers, ``mentions`` mentions over the first 5,000, ``n_users`` users each with a list.
    Returns (arXiv ids, [(user id, list id)])."""
    rng = np.random.default_rng(seed_)
    now = datetime.now(UTC)
    ids = [f"2{(i // 90000) % 10}{(i // 9000) % 10 + 1:02d}.{i % 90000 + 10000:05d}" for i in range(n_papers)]
    words = np.array(WORDS)
    w = rng.integers(0, len(WORDS), size=(n_papers, 12))  # (papers, 12) word indices
    with transaction(factory) as s:
        for start in range(0, n_papers, 5000):
            rows = [{"arxiv_id": ids[i], "version": 1, "title": " ".join(words[w[i, :6]]),
                     "authors_text": f"Author {i % 997}, Author {(i * 7) % 991}",
                     "abstract": " ".join(words[w[i]]), "categories": "cs.LG" if i % 3 else "cs.CV cs.LG",
                     "primary_category": "cs.LG" if i % 3 else "cs.CV", "published": now - timedelta(hours=i % 5000),
                     "updated": None, "doi": "", "comment": "", "journal_ref": "", "sample": False,
                     "ingested_at": now} for i in range(start, min(start + 5000, n_papers))]
            s.execute(insert(Paper), rows)
        pid = dict(s.execute(select(Paper.arxiv_id, Paper.id)).all())
        hot = min(5000, n_papers)
        which = rng.zipf(1.3, size=mentions) % hot
        s.execute(insert(Mention), [
            {"source": "load", "post_id": f"m{k}", "account": f"acct{rng.integers(20000)}",
             "posted_at": now - timedelta(minutes=int(rng.integers(0, 7 * 24 * 60))), "reposts": int(rng.poisson(1)),
             "likes": 0, "url": "", "paper_id": pid[ids[int(which[k])]], "sample": False} for k in range(mentions)])
        pw = hash_password("load-test-password")
        users = []
        for u in range(n_users):
            user = User(username=f"load{u:03d}", password_hash=pw)
            s.add(user)
            s.flush()
            lst = ReadingList(owner_id=user.id, name=f"list of load{u:03d}")
            s.add(lst)
            s.flush()
            users.append((user, lst.id))
    return ids, users


def _serve(settings: Settings, port: int) -> None:
    import uvicorn

    from .app import create_app

    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(db_url: str, backend: str, papers: int = 100_000, requests: int = 3000, concurrency: int = 20,
        home: Path | None = None, seed_: int = 0, progress=print) -> Result:
    """Seed, serve, drive, verify. Returns the measured :class:`Result`."""
    import tempfile

    home = Path(home or tempfile.mkdtemp(prefix="hub-load-"))
    settings = Settings(home=home, db_url=db_url, secret_key=os.urandom(32).hex(), recommend_on_change=False)
    engine = make_engine(db_url)
    factory = session_factory(engine)
    t = time.perf_counter()
    ids, users = seed(factory, papers, concurrency, seed_)
    seed_s = time.perf_counter() - t
    progress(f"{backend}: seeded {papers} papers, 50000 mentions, {concurrency} users in {seed_s:.1f} s")
    cookies, csrfs = [], []
    with transaction(factory) as s:
        for user, _ in users:
            nonce = new_nonce()
            cookies.append({SESSION_COOKIE: start_session(s, s.merge(user), settings), CSRF_COOKIE: nonce})
            csrfs.append(csrf_token(settings, nonce))
    rng = np.random.default_rng(seed_ + 1)
    kinds = [k for k, _ in MIX]
    picks = rng.choice(len(MIX), size=requests, p=[p for _, p in MIX])
    plan = []
    for n, k in enumerate(picks):  # requests are spread over workers round-robin by the queue; writes name their user
        w = n % concurrency
        kind = kinds[k]
        a = ids[int(rng.integers(len(ids)))]
        if kind == "hot":
            plan.append((kind, f"/hot?page_no={int(rng.integers(1, 20))}", None))
        elif kind == "new":
            plan.append((kind, f"/new?page_no={int(rng.integers(1, 50))}", None))
        elif kind == "search":
            q = "+".join(WORDS[int(i)] for i in rng.integers(len(WORDS), size=2))
            plan.append((kind, f"/search?q={q}", None))
        elif kind == "paper":
            plan.append((kind, f"/papers/{a}", None))
        elif kind == "api":
            plan.append((kind, f"/api/papers?view=top&window=week&page={int(rng.integers(1, 5))}", None))
        elif kind == "add":
            plan.append((kind, f"/lists/{users[w][1]}/add",
                         {"data": {"arxiv_id": a}, "csrf": csrfs[w], "check": (users[w][1], a), "w": w}))
        else:
            body = f"load note {n}"
            plan.append((kind, f"/papers/{a}/note",
                         {"data": {"body": body}, "csrf": csrfs[w], "check": (users[w][0].id, a, body), "w": w}))
    # each worker sends its own user's writes: deal the plan so request n goes to worker n % concurrency
    per_worker = [[p for i, p in enumerate(plan) if i % concurrency == w] for w in range(concurrency)]
    port = _free_port()
    ctx = mp.get_context("spawn")
    server = ctx.Process(target=_serve, args=(settings, port), daemon=True)
    server.start()
    base = f"http://127.0.0.1:{port}"
    _wait_for(base)
    result = Result(backend, papers, requests, concurrency, 0.0, seed_seconds=seed_s, load_average=os.getloadavg()[0])
    acked: list = []
    t = time.perf_counter()
    asyncio.run(_drive_per_worker(base, per_worker, cookies, result, acked))
    result.seconds = time.perf_counter() - t
    server.terminate()
    server.join(10)
    result.acknowledged_writes = len(acked)
    result.lost_writes = lost_writes(factory, acked)
    engine.dispose()
    progress(f"{backend}: {requests} requests in {result.seconds:.1f} s, {len(acked)} writes acknowledged, "
             f"{result.lost_writes} lost")
    return result


async def _drive_per_worker(base, per_worker, cookies, result, acked) -> None:
    import httpx

    async def worker(w: int) -> None:
        async with httpx.AsyncClient(base_url=base, cookies=cookies[w], timeout=60.0) as c:
            for kind, path, form in per_worker[w]:
                t = time.perf_counter()
                try:
                    if form is None:
                        r = await c.get(path)
                    else:
                        r = await c.post(path, data=form["data"], headers={"X-CSRF-Token": form["csrf"]})
                    ok = r.status_code in (200, 303)
                except httpx.HTTPError:
                    ok = False
                result.latencies.setdefault(kind, []).append(time.perf_counter() - t)
                if not ok:
                    result.errors[kind] = result.errors.get(kind, 0) + 1
                elif form is not None:
                    acked.append((kind, form["check"]))

    await asyncio.gather(*(worker(w) for w in range(len(per_worker))))


def _wait_for(base: str, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/about", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the hub did not come up at {base} within {timeout:.0f} s")


def lost_writes(factory, acked: list) -> int:
    """Acknowledged writes that are not in the database (the last note body per user and paper must be there)."""
    with factory() as s:
        pid = {}
        wanted = {chk[1] for _, chk in acked}
        for chunk in _chunks(sorted(wanted), 2000):
            pid.update(dict(s.execute(select(Paper.arxiv_id, Paper.id).where(Paper.arxiv_id.in_(chunk))).all()))
        items = set(s.execute(select(ListItem.list_id, ListItem.paper_id)).all())
        notes = {(o, p): b for o, p, b in s.execute(select(Note.owner_id, Note.paper_id, Note.body)).all()}
    last_note: dict = {}
    for kind, chk in acked:  # a user's later note on the same paper replaces the earlier one (in send order)
        if kind == "note":
            last_note[(chk[0], pid[chk[1]])] = chk[2]
    lost = sum(1 for kind, chk in acked if kind == "add" and (chk[0], pid[chk[1]]) not in items)
    lost += sum(1 for key, body in last_note.items() if notes.get(key) != body)
    return lost


def _chunks(xs: list, n: int):
    for i in range(0, len(xs), n):
        yield xs[i: i + n]


def markdown(results: list[Result], command: str) -> str:
    rows = [r.summary() for r in results]
    lines = ["# Hub load test", "", f"- command: `{command}`", "",
             f"`{command}` on {platform.node() or 'this machine'} ({os.cpu_count()} CPUs, shared with other work), "
             f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}. One uvicorn worker process on loopback; an "
             f"asyncio httpx client with one connection per simulated user; request mix "
             + ", ".join(f"{k} {int(p * 100)}%" for k, p in MIX)
             + " (add = POST a paper to the user's reading list, note = POST a note; both with session and CSRF "
               "token). After the run every acknowledged write is looked up in the database.", "",
             "| backend | papers | requests | concurrency | throughput (req/s) | p50 (ms) | p95 (ms) | errors | "
             "acknowledged writes | lost writes |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['papers']:,} | {r['requests']:,} | {r['concurrency']} | "
                     f"{r['throughput_rps']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
                     f"{sum(r['errors'].values())} | {r['acknowledged_writes']} | {r['lost_writes']} |")
    lines += ["", "Per request kind (p50 / p95 ms):", "",
              "| backend | " + " | ".join(k for k, _ in MIX) + " |", "|---|" + "---|" * len(MIX)]
    for r in rows:
        lines.append(f"| {r['backend']} | " + " | ".join(
            f"{r['per_kind'][k]['p50_ms']:.0f} / {r['per_kind'][k]['p95_ms']:.0f}" if k in r["per_kind"] else "-"
            for k, _ in MIX) + " |")
    lines += ["", "Seeding (bulk insert of papers, 50,000 mentions, users): "
              + ", ".join(f"{r['backend']} {r['seed_seconds']:.0f} s" for r in rows) + ". Host load average (1 min) "
              "when the requests started: " + ", ".join(f"{r['backend']} {r.get('load_average', 0):.1f}" for r in rows)
              + " (other jobs shared the 2 cores; the figures are of a busy machine).", "",
              "Hot and Top recompute their ranking over all papers at most every 20 s (Settings.ranking_cache_s), "
              "so a few requests in each window pay for the full ranking; the p95 of `hot` shows them.", ""]
    return "\n".join(lines)


def write(results: list[Result], out: Path, command: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown(results, command))
    out.with_suffix(".json").write_text(json.dumps([r.summary() for r in results], indent=1) + "\n")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="an empty, migrated database URL")
    ap.add_argument("--papers", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here (and .json beside it)")
    a = ap.parse_args()
    res = run(a.db, a.db.split(":")[0].split("+")[0], a.papers, a.requests, a.concurrency)
    print(json.dumps(res.summary(), indent=1))
    if a.out:
        write([res], a.out, "python -m paperzoo.hub.loadtest " + " ".join(os.sys.argv[1:]))
