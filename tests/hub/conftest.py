"""Fixtures of the hub's tests: a migrated database per test on SQLite and (``backend`` param) PostgreSQL, the app
and a TestClient, helpers to register and post forms with the CSRF token, a live server and Chromium for the
browser tests.

PostgreSQL: ``$PAPERZOO_HUB_TEST_PG`` (a server URL such as ``postgresql+psycopg://postgres@127.0.0.1:5432/``), else a
throwaway cluster that the session creates with Debian's ``initdb``/``pg_ctl`` in a temp folder. Chromium: Debian's
``chromium`` on PATH. Without them those tests are skipped with one summary line saying what to install; under CI
(``CI`` or ``PAPERZOO_REQUIRE_DATA=1``, as for the data marks: tests/data_plugin.py) they fail instead.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

for mod in ("fastapi", "sqlalchemy", "alembic", "argon2", "httpx", "jinja2"):
    pytest.importorskip(mod, reason="the hub's tests need the [hub] extra: pip install -e '.[hub,dev]'")

from data_plugin import require_data  # noqa: E402  (tests/ is on sys.path: tests/conftest.py)

sys.path.insert(0, str(Path(__file__).parent))
from hub_helpers import free_port, make_settings  # noqa: E402

SKIP_TAG = "hub needs"
HINTS = {"chromium": "apt-get install chromium", "postgresql": "apt-get install postgresql"}
BACKENDS = ["sqlite", "postgresql"]


def missing(tool: str, why: str) -> None:
    """Skip (fail under CI) a test that needs ``tool``."""
    if require_data():
        pytest.fail(f"{tool} is needed and CI/PAPERZOO_REQUIRE_DATA says every test must run: {why} "
                    f"({HINTS[tool]})", pytrace=False)
    pytest.skip(f"{SKIP_TAG} {tool}: {why} ({HINTS[tool]})")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        text = str(rep.longrepr[2] if isinstance(rep.longrepr, tuple) else rep.longrepr)
        m = re.search(rf"{SKIP_TAG} (\w+)", text)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    if counts:
        what = ", ".join(f"{n} without {t} ({HINTS[t]})" for t, n in sorted(counts.items()))
        terminalreporter.write_line(f"hub: {sum(counts.values())} test(s) skipped: {what}; with CI or "
                                    f"PAPERZOO_REQUIRE_DATA=1 they fail instead", yellow=True)


@pytest.fixture(autouse=True)
def _fast_argon2(monkeypatch):
    """argon2id with small costs in tests (the app's defaults take ~0.3 s a hash here); still argon2id, still
    verified, so every password test means the same."""
    from argon2 import PasswordHasher

    from paperzoo.hub import auth

    monkeypatch.setattr(auth, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))


# ---- PostgreSQL ----

def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / name).exists():
            return str(d / name)
    return None


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """Base URL of a PostgreSQL server the tests may create databases on."""
    env = os.environ.get("PAPERZOO_HUB_TEST_PG")
    if env:
        yield env.rstrip("/") + "/"
        return
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        yield None
        return
    # its own folder under the temp root: pytest's folders are private to root, which the cluster cannot enter
    folder = Path(tempfile.mkdtemp(prefix="paperzoo-pg-"))
    data = folder / "data"
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as the postgres account
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                    "--no-sync"], check=True, capture_output=True)
    opts = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c max_connections=200")
    subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", opts, "-l", str(folder / "log"), "-w", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _pg_admin(base: str):
    from sqlalchemy import create_engine

    return create_engine(base + "postgres", isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_template(pg_server):
    """A migrated template database; each test gets a copy (CREATE DATABASE ... TEMPLATE)."""
    if pg_server is None:
        return None
    from sqlalchemy import text

    from paperzoo.hub.db import migrate

    name = f"hub_template_{os.getpid()}"
    admin = _pg_admin(pg_server)
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        c.execute(text(f"CREATE DATABASE {name}"))
    migrate(pg_server + name)
    admin.dispose()
    return name


_counter = itertools.count()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    from paperzoo.hub.db import migrate

    path = tmp_path_factory.mktemp("sqlite-template") / "hub.db"
    migrate(f"sqlite:///{path}")
    return path


def fresh_db_url(backend: str, tmp_path: Path, sqlite_template: Path, pg_server, pg_template) -> str:
    if backend == "sqlite":
        path = tmp_path / "hub.db"
        shutil.copy(sqlite_template, path)
        return f"sqlite:///{path}"
    if pg_server is None:
        missing("postgresql", "no initdb/pg_ctl on PATH or under /usr/lib/postgresql and no $PAPERZOO_HUB_TEST_PG")
    from sqlalchemy import text

    name = f"hub_t{os.getpid()}_{next(_counter)}"
    admin = _pg_admin(pg_server)
    with admin.connect() as c:
        # FILE_COPY copies the template's files; PostgreSQL 15's default (WAL_LOG) writes the whole copy to the WAL
        fast = " STRATEGY = FILE_COPY" if c.dialect.server_version_info >= (15,) else ""
        c.execute(text(f"CREATE DATABASE {name} TEMPLATE {pg_template}{fast}"))
    admin.dispose()
    return pg_server + name


def drop_db(url: str) -> None:
    """Drop a test's PostgreSQL database (its connections are closed by then); SQLite files go with tmp_path."""
    if not url.startswith("postgresql"):
        return
    from sqlalchemy import text

    base, _, name = url.rpartition("/")
    admin = _pg_admin(base + "/")
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture
def new_database(request, sqlite_template):
    """A function ``(backend, folder) -> URL`` of a fresh migrated database (for tests that need several)."""

    made = []

    def make(backend: str, folder: Path) -> str:
        pg = request.getfixturevalue("pg_server") if backend == "postgresql" else None
        tpl = request.getfixturevalue("pg_template") if backend == "postgresql" else None
        made.append(fresh_db_url(backend, folder, sqlite_template, pg, tpl))
        return made[-1]

    yield make
    for url in made:
        drop_db(url)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def db_url(request, tmp_path, sqlite_template):
    """A fresh migrated database: SQLite, or the ``backend`` param's engine where a test asks for it."""
    be = request.getfixturevalue("backend") if "backend" in request.fixturenames else "sqlite"
    pg = request.getfixturevalue("pg_server") if be == "postgresql" else None
    tpl = request.getfixturevalue("pg_template") if be == "postgresql" else None
    url = fresh_db_url(be, tmp_path, sqlite_template, pg, tpl)
    yield url
    drop_db(url)


@pytest.fixture
def settings(tmp_path, db_url):
    return make_settings(tmp_path, db_url)


@pytest.fixture
def factory(settings):
    from paperzoo.hub.db import make_engine, session_factory

    engine = make_engine(settings.db_url)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def app(settings):
    from paperzoo.hub.app import create_app

    a = create_app(settings)
    yield a
    a.state.engine.dispose()


@pytest.fixture
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


@pytest.fixture
def new_client(app):
    """Another browser: a second TestClient on the same app with its own cookies."""
    from fastapi.testclient import TestClient

    made = []

    def make():
        c = TestClient(app)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


# ---- live server and browser ----

@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments, pointed at Debian's chromium (playwright cannot download browsers)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        return {**browser_type_launch_args, "executable_path": None}
    return {**browser_type_launch_args, "executable_path": exe}


@pytest.fixture
def chromium_browser(request, browser_type_launch_args):
    """pytest-playwright's browser in Chromium, or a skip (a failure under CI) naming what to install."""
    if not browser_type_launch_args.get("executable_path"):
        missing("chromium", "no chromium on PATH")
    pytest.importorskip("playwright", reason="the browser tests need playwright: pip install -e '.[dev]'")
    return request.getfixturevalue("browser")


@pytest.fixture
def chromium_page(request, chromium_browser):
    """A Playwright page (pytest-playwright's ``page``: a fresh context per test) in Chromium."""
    return request.getfixturevalue("page")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where browser tests put screenshots: $PAPERZOO_HUB_ARTIFACTS or test-artifacts/hub in the checkout."""
    out = Path(os.environ.get("PAPERZOO_HUB_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts" / "hub"))
    out.mkdir(parents=True, exist_ok=True)
    return out
