"""``paperzoo hub ...``: init, ingest, recommend, serve, user create. Heavy imports happen inside the commands, so
``paperzoo --help`` stays fast."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

app = typer.Typer(help="The paper hub: trending papers, reading lists, notes, follows (needs paperzoo[hub]).",
                  no_args_is_help=True, add_completion=False, rich_markup_mode=None)
ingest_app = typer.Typer(help="Ingest arXiv metadata, social mentions, the paperzoo registry, the bundled sample.",
                         no_args_is_help=True, rich_markup_mode=None)
user_app = typer.Typer(help="Manage accounts.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(ingest_app, name="ingest")
app.add_typer(user_app, name="user")
HOME = typer.Option(None, "--home", help="Hub folder (default $PAPERZOO_HUB_HOME or ~/.local/share/paperzoo/hub).")


@app.callback()
def _check_extra() -> None:
    """Every hub command needs the [hub] extra: say so in one line instead of a traceback."""
    from importlib.util import find_spec

    missing = [m for m in ("fastapi", "uvicorn", "sqlalchemy", "alembic", "jinja2", "argon2", "markdown_it")
               if find_spec(m) is None]
    if missing:
        _fail(f"the hub needs its extra (missing {', '.join(missing)}): pip install 'paperzoo[hub]'")


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(code=2)


def _open(home: Path | None):
    from .config import HubNotInitialised, load_settings
    from .db import make_engine, session_factory

    try:
        settings = load_settings(home)
    except (HubNotInitialised, ValueError) as e:
        _fail(str(e))
    return settings, session_factory(make_engine(settings.db_url))


@app.command()
def init(home: Path = HOME) -> None:
    """Create the hub folder and its secret key (once), and create or migrate the database."""
    from .config import db_url_for, default_home, write_secret
    from .db import migrate

    home = home or default_home()
    key = write_secret(home)
    url = db_url_for(home)
    migrate(url)
    typer.echo(f"hub ready: {home} (secret key {key}, database {url.split('@')[-1]})")


@ingest_app.command("arxiv")
def ingest_arxiv(source: str = typer.Argument(..., help="File or URL: arXiv API Atom, or snapshot JSON lines."),
                 home: Path = HOME) -> None:
    """arXiv metadata; a newer version of a known paper updates it, the same input twice changes nothing."""
    from .ingest import read_source
    from .ingest.arxiv import parse, upsert

    _, factory = _open(home)
    try:
        records, report = parse(read_source(source))
    except (ValueError, OSError) as e:
        _fail(str(e))
    typer.echo(upsert(factory, records, report).summary())


@ingest_app.command("mentions")
def ingest_mentions(source: str = typer.Argument(None, help="Export file or URL (JSON lines or CSV)."),
                    adapter: str = typer.Option(None, "--source", help="Fetch from a public API: bluesky | mastodon."),
                    query: str = typer.Option("arxiv.org", "--query", help="Bluesky search query."),
                    instance: str = typer.Option("https://mastodon.social", "--instance", help="Mastodon instance."),
                    tag: str = typer.Option("arxiv", "--tag", help="Mastodon hashtag."),
                    pages: int = typer.Option(5, "--pages", min=1, max=100, help="API pages to read."),
                    home: Path = HOME) -> None:
    """Social mentions from an export file, or from Bluesky / Mastodon with --source."""
    from .ingest import read_source
    from .ingest.mentions import ADAPTERS, Bluesky, Mastodon, fetch_from, parse_export, upsert

    settings, factory = _open(home)
    if (source is None) == (adapter is None):
        _fail("give either an export FILE/URL or --source bluesky|mastodon")
    try:
        if adapter:
            if adapter not in ADAPTERS:
                _fail(f"--source must be one of {', '.join(ADAPTERS)}, got {adapter!r}")
            ad = Bluesky(query) if adapter == "bluesky" else Mastodon(instance, tag)
            records, report = fetch_from(ad, max_pages=pages)
        else:
            records, report = parse_export(read_source(source))
    except (ValueError, OSError) as e:
        _fail(str(e))
    typer.echo(upsert(factory, settings, records, report).summary())


@ingest_app.command("registry")
def ingest_registry(repo: Path = typer.Option(None, "--repo", help="Checkout with docs/reports (default: this one)."),
                    home: Path = HOME) -> None:
    """Every registered paperzoo paper: its code link, status and the verdict of its latest committed report."""
    from .ingest.registry import ingest_registry as run

    settings, factory = _open(home)
    typer.echo(run(factory, repo or settings.repo_root).summary())


@ingest_app.command("sample")
def ingest_sample(home: Path = HOME) -> None:
    """The bundled SAMPLE (30 arXiv records, 650 made-up mentions shifted to end now): for trying the hub out."""
    from .config import PACKAGE_DIR
    from .ingest.arxiv import parse_snapshot, upsert
    from .ingest.mentions import ingest_sample as run
    from .ingest.mentions import parse_export

    settings, factory = _open(home)
    records, report = parse_snapshot((PACKAGE_DIR / "sample" / "arxiv.jsonl").read_text())
    typer.echo(upsert(factory, records, report, sample=True).summary())
    mentions, _ = parse_export((PACKAGE_DIR / "sample" / "mentions.jsonl").read_text())
    typer.echo(run(factory, settings, mentions).summary())


@app.command()
def recommend(home: Path = HOME) -> None:
    """Recompute every reading list's recommendations (tf-idf + linear SVM)."""
    from .recommend import recommend_all

    settings, factory = _open(home)
    typer.echo(recommend_all(factory, settings))


@app.command()
def serve(host: str = typer.Option("127.0.0.1", "--host"), port: int = typer.Option(8000, "--port", min=1, max=65535),
          https_proxy: bool = typer.Option(False, "--behind-https-proxy",
                                           help="Served through an https reverse proxy on this host: trust its "
                                                "X-Forwarded-* headers and always set Secure cookies."),
          home: Path = HOME) -> None:
    """Serve the hub with uvicorn."""
    from dataclasses import replace

    import uvicorn

    from .app import create_app

    settings, _ = _open(home)
    if https_proxy:
        settings = replace(settings, secure_cookies=True)
    typer.echo(f"paperzoo hub on http://{host}:{port} (database {settings.db_url.split('@')[-1]})")
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info", proxy_headers=https_proxy,
                forwarded_allow_ips="127.0.0.1")


@user_app.command("create")
def user_create(username: str = typer.Argument(...),
                password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from stdin."),
                display_name: str = typer.Option("", "--display-name"), home: Path = HOME) -> None:
    """Create an account (the password is prompted for, or read from stdin)."""
    from .auth import create_user
    from .db import transaction

    _, factory = _open(home)
    password = sys.stdin.readline().rstrip("\n") if password_stdin else typer.prompt("password", hide_input=True,
                                                                                     confirmation_prompt=True)
    try:
        with transaction(factory) as s:
            u = create_user(s, username, password, display_name)
            name = u.username
    except ValueError as e:
        _fail(str(e))
    typer.echo(f"created user {name}")
