"""Fixtures for the data-layer tests: the shared data folder, a private cache, a local HTTP mirror, no internet."""

from __future__ import annotations

import gzip
import ipaddress
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_data_dir() -> Path | None:
    """``$PAPERZOO_DATA`` or the repository's sibling ``../shared/data``; None if neither exists."""
    env = os.environ.get("PAPERZOO_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    if not path.is_absolute():
        path = (REPO / path).resolve()
    return path if path.is_dir() else None


@pytest.fixture(autouse=True)
def _no_mirror(monkeypatch):
    """Tests decide themselves whether a mirror is configured."""
    monkeypatch.delenv("PAPERZOO_MIRROR", raising=False)


@pytest.fixture(autouse=True)
def _no_internet(monkeypatch):
    """Nothing downloads at test time: every public source is unreachable, the local test servers are not."""
    connect = socket.socket.connect

    def local_only(sock, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None:
            try:
                local = ipaddress.ip_address(host).is_loopback
            except ValueError:
                local = host == "localhost"
            if not local:
                raise OSError(f"test tried to reach {host}: tests must not use the network")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


@pytest.fixture(autouse=True)
def _private_user_cache(monkeypatch, tmp_path_factory):
    """Verification verdicts and public archives go to a folder of the test's own, not the user's cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture
def shared(request, monkeypatch, tmp_path_factory) -> Path:
    """The shared data folder, exported as PAPERZOO_DATA; PAPERZOO_CACHE goes to a temp dir.

    A test using it names the sets it reads with ``@pytest.mark.data(...)`` (skipped without them)."""
    if request.node.get_closest_marker("data") is None:
        pytest.fail("a test using the `shared` fixture must name the sets it reads: @pytest.mark.data(...)",
                    pytrace=False)
    path = shared_data_dir()
    if path is None:
        pytest.fail("shared data folder not found: set PAPERZOO_DATA to the shared data (e.g. ../shared/data)")
    monkeypatch.setenv("PAPERZOO_DATA", str(path))
    monkeypatch.setenv("PAPERZOO_CACHE", str(tmp_path_factory.mktemp("cache")))
    return path


@pytest.fixture
def empty_root(monkeypatch, tmp_path) -> Path:
    """An empty data root exported as PAPERZOO_DATA."""
    root = tmp_path / "empty-data"
    root.mkdir()
    monkeypatch.setenv("PAPERZOO_DATA", str(root))
    return root


class _Handler(BaseHTTPRequestHandler):
    """Serves ``/<mode>/<set>/<relpath>`` from the shared folder.

    Modes: ``good`` (exact bytes), ``corrupt`` (same length, some bytes flipped), ``truncate`` (full
    Content-Length, half the body, then the connection closes), ``truncate-nolength`` (no
    Content-Length, half the body), ``regzip`` (a .gz file re-compressed: other wrapper, same content).
    """

    root: Path

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        mode, _, rel = unquote(self.path).lstrip("/").partition("/")
        path = (self.root / rel).resolve()
        if self.root not in path.parents or not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        if mode == "corrupt":
            data = bytes(b ^ 0xFF if i % 997 == 0 else b for i, b in enumerate(data))
        elif mode == "regzip":
            data = gzip.compress(gzip.decompress(data), compresslevel=1, mtime=12345)
        elif mode not in ("good", "truncate", "truncate-nolength"):
            self.send_error(404)
            return
        self.send_response(200)
        if mode != "truncate-nolength":
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        body = data[: len(data) // 2] if mode.startswith("truncate") else data
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def mirror(shared):
    """A local HTTP server on 127.0.0.1 serving the shared folder; yields its base URL (no mode)."""
    handler = type("Handler", (_Handler,), {"root": shared.resolve()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _BytesHandler(BaseHTTPRequestHandler):
    """Serves ``/<name>`` from a dict of bytes and counts the requests."""

    files: dict
    hits: dict

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        name = unquote(self.path).lstrip("/")
        self.hits[name] = self.hits.get(name, 0) + 1
        if name not in self.files:
            self.send_error(404)
            return
        body = self.files[name]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


class Served:
    """What ``serve`` yields: put bytes in ``files``, fetch them from ``url(name)``, count requests in ``hits``."""

    def __init__(self, base: str, files: dict, hits: dict) -> None:
        self.base, self.files, self.hits = base, files, hits

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"


@pytest.fixture
def serve():
    """A local HTTP server for bytes the test makes (the stand-in for a public original)."""
    files, hits = {}, {}
    handler = type("Handler", (_BytesHandler,), {"files": files, "hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Served(f"http://127.0.0.1:{server.server_address[1]}", files, hits)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
