"""Where the hub keeps its state, and its settings.

The hub's home folder (``$PAPERZOO_HUB_HOME``, default ``~/.local/share/paperzoo/hub``) holds the secret key
(written by ``paperzoo hub init``, mode 600; there is no default key), the SQLite database unless
``$PAPERZOO_HUB_DB`` names another (``postgresql+psycopg://user@host/db``), an optional ``bots.txt`` (accounts whose
mentions never count, one a line) and the recommender's tf-idf matrix.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]  # the checkout: docs/reports and src/paperzoo/papers live here
PACKAGE_DIR = Path(__file__).resolve().parent


class HubNotInitialised(RuntimeError):
    pass


def default_home() -> Path:
    env = os.environ.get("PAPERZOO_HUB_HOME")
    return Path(env).expanduser() if env else Path.home() / ".local" / "share" / "paperzoo" / "hub"


@dataclass(frozen=True)
class Settings:
    home: Path
    db_url: str
    secret_key: str
    repo_root: Path = REPO_ROOT
    bots: frozenset[str] = frozenset()  # accounts whose mentions never count (lower case)
    page_size: int = 30
    login_max_failures: int = 5  # per username and per client address ...
    login_window_s: int = 900  # ... within this many seconds, then 429
    session_days: int = 30
    secure_cookies: bool | None = None  # None: Secure exactly when the request came over https
    recommend_on_change: bool = True  # recompute a list's recommendations in the background after an edit
    ranking_cache_s: float = 20.0  # ranked lists are recomputed at most this often (and after every ingest)
    extra: dict = field(default_factory=dict)

    @property
    def is_sqlite(self) -> bool:
        return self.db_url.startswith("sqlite")


def db_url_for(home: Path) -> str:
    return os.environ.get("PAPERZOO_HUB_DB") or f"sqlite:///{home / 'hub.db'}"


def write_secret(home: Path) -> Path:
    """Generate the secret key on first init (kept afterwards: rotating it would log everyone out)."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "secret_key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48))
    return path


def load_settings(home: Path | None = None, db_url: str | None = None, **overrides) -> Settings:
    """Settings of an initialised hub; a hub without a secret key raises :class:`HubNotInitialised`."""
    home = Path(home) if home is not None else default_home()
    secret = os.environ.get("PAPERZOO_HUB_SECRET", "")
    path = home / "secret_key"
    if not secret:
        if not path.exists():
            raise HubNotInitialised(f"no secret key at {path}: run `paperzoo hub init` first "
                                    f"(or set PAPERZOO_HUB_HOME to an initialised hub)")
        secret = path.read_text().strip()
    if len(secret) < 32:
        raise ValueError(f"the hub's secret key must be at least 32 characters, got {len(secret)}")
    bots_file = home / "bots.txt"
    bots = frozenset(line.strip().lower() for line in bots_file.read_text().splitlines()
                     if line.strip() and not line.startswith("#")) if bots_file.exists() else frozenset()
    return Settings(home=home, db_url=db_url or db_url_for(home), secret_key=secret, bots=bots, **overrides)
