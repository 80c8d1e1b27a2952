"""`paperzoo hub init | ingest | user create | recommend | serve` on a fresh hub folder, as the README runs them."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from hub_helpers import free_port
from typer.testing import CliRunner

from paperzoo.cli import app

SRC = str(Path(__file__).parents[2] / "src")


def run(home, *args, input=None):
    r = CliRunner().invoke(app, ["hub", *args, "--home", str(home)], input=input)
    return r.exit_code, r.output


def test_init_ingest_user_recommend(tmp_path, monkeypatch):
    monkeypatch.delenv("PAPERZOO_HUB_DB", raising=False)
    home = tmp_path / "hub"
    code, out = run(home, "ingest", "registry")
    assert code == 2 and "hub init" in out  # nothing works before init, and it says what to do
    assert run(home, "init")[0] == 0 and (home / "secret_key").exists() and (home / "hub.db").exists()
    assert run(home, "init")[0] == 0  # again: migrations are idempotent, the key is kept
    code, out = run(home, "ingest", "registry")
    assert code == 0 and "registry: 14 added" in out
    code, out = run(home, "ingest", "sample")
    assert code == 0 and "16 added, 14 updated" in out and "650 added" in out
    code, out = run(home, "ingest", "sample")
    assert "0 added, 0 updated, 30 unchanged" in out and "0 added, 0 updated, 650 unchanged" in out
    code, out = run(home, "user", "create", "alice", "--password-stdin", input="correct horse 1\n")
    assert code == 0 and "created user alice" in out
    code, out = run(home, "user", "create", "alice", "--password-stdin", input="correct horse 1\n")
    assert code == 2 and "taken" in out
    assert run(home, "recommend")[0] == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "nope"}\n')
    code, out = run(home, "ingest", "arxiv", str(bad))
    assert code == 0 and "1 malformed" in out and "line 1" in out
    code, out = run(home, "ingest", "mentions")
    assert code == 2 and "either an export" in out


def test_serve_shows_every_registered_paper(tmp_path, monkeypatch):
    from paperzoo import registry

    home = tmp_path / "hub"
    env = {**os.environ, "PYTHONPATH": SRC, "PAPERZOO_HUB_HOME": str(home)}
    env.pop("PAPERZOO_HUB_DB", None)
    monkeypatch.delenv("PAPERZOO_HUB_DB", raising=False)
    cli = [sys.executable, "-c", "from paperzoo.cli import app; app()", "hub"]
    assert run(home, "init")[0] == 0 and run(home, "ingest", "registry")[0] == 0  # in process: one start-up less
    port = free_port()
    server = subprocess.Popen([*cli, "serve", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                front = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and server.poll() is None, "hub serve did not come up"
                time.sleep(0.2)
        for p in registry.papers():
            assert f">{p.name}</a>" in front.text
        nerf = httpx.get(f"http://127.0.0.1:{port}/papers/2003.08934").text
        verdict = json.loads((Path(SRC).parent / "docs/reports/nerf/result.json").read_text())["verdict"]
        assert f'class="verdict">{verdict}<' in nerf
    finally:
        server.terminate()
        server.wait(10)


def test_a_missing_extra_is_one_clear_line(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "alembic" else real(name, *a))
    code, out = run(tmp_path, "init")
    assert code == 2 and "missing alembic" in out and "paperzoo[hub]" in out
