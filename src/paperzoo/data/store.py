"""Where data sets live and whether they are there: ``data_root``, ``is_present``, ``verify``, ``require``.

A set ``NAME`` lives in ``<root>/NAME/`` with the relative paths of its catalog entry, where ``root``
is ``$PAPERZOO_DATA`` or ``~/.cache/paperzoo``. Derived caches (decoded CIFAR arrays) go under
``$PAPERZOO_CACHE`` or ``~/.cache/paperzoo/derived``, never into the (possibly read-only) data root.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

from paperzoo.data.catalog import FileInfo, get_info

CHUNK = 1 << 20


class DataNotFoundError(FileNotFoundError):
    """A data set is missing (and was not, or could not be, downloaded)."""


def data_root() -> Path:
    """``$PAPERZOO_DATA`` if set, else ``~/.cache/paperzoo``."""
    env = os.environ.get("PAPERZOO_DATA")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "paperzoo"


def cache_root() -> Path:
    """Writable folder for derived arrays: ``$PAPERZOO_CACHE`` or ``~/.cache/paperzoo/derived``."""
    env = os.environ.get("PAPERZOO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "paperzoo" / "derived"


def _root(root: str | os.PathLike | None) -> Path:
    return Path(root).expanduser() if root is not None else data_root()


def dataset_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """``<root>/<name>`` (ValueError for an unknown name)."""
    get_info(name)
    return _root(root) / name


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_gunzip(path: str | os.PathLike) -> str | None:
    """Hex sha256 of a gzip file's decompressed bytes; None if it is not valid gzip."""
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    return h.hexdigest()


def check_file(path: Path, info: FileInfo) -> tuple[bool, str]:
    """(ok, reason) for one local file against its catalog entry."""
    if not path.is_file():
        return (not info.required, "missing (optional)" if not info.required else "missing")
    digest = sha256_file(path)
    if digest == info.sha256:
        return True, "sha256 ok"
    if info.gunzip_sha256 is not None:
        content = sha256_gunzip(path)
        if content == info.gunzip_sha256:
            return True, "decompressed content sha256 ok (gzip wrapper differs)"
    return False, f"sha256 mismatch: got {digest[:16]}..., expected {info.sha256[:16]}..."


def missing_files(name: str, root: str | os.PathLike | None = None) -> list[str]:
    """Required files of ``name`` that do not exist under ``<root>/<name>``."""
    info = get_info(name)
    d = _root(root) / name
    return [rel for rel, f in info.files.items() if f.required and not (d / rel).is_file()]


def is_present(name: str, root: str | os.PathLike | None = None) -> bool:
    """True when every required file of ``name`` exists (no hashing; see :func:`verify`)."""
    return not missing_files(name, root)


def verify(name: str, root: str | os.PathLike | None = None) -> list[tuple[str, bool, str]]:
    """Check every file of ``name``: a list of ``(relpath, ok, reason)``."""
    info = get_info(name)
    d = _root(root) / name
    return [(rel, *check_file(d / rel, f)) for rel, f in info.files.items()]


def not_found_message(name: str, root: str | os.PathLike | None = None, reason: str = "") -> str:
    """One message: which set, where it looked, what is missing, how to get it."""
    info = get_info(name)
    d = _root(root) / name
    missing = missing_files(name, root)
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    where = "PAPERZOO_DATA" if os.environ.get("PAPERZOO_DATA") else "default root; PAPERZOO_DATA unset"
    msg = f"data set {name!r} not found in {d} ({where}); missing: {shown or 'nothing'}."
    if reason:
        msg += f" {reason}"
    if info.fetchable:
        msg += (f" Get it with `paperzoo data fetch {name}` (downloads from {info.homepage}), "
                f"or set PAPERZOO_DATA to a folder that holds {name}/.")
    else:
        msg += (f" It has no public byte-identical download (built from {info.homepage}); "
                f"set PAPERZOO_DATA to a folder that holds a copy of {name}/ (e.g. the project's shared data), "
                f"or set PAPERZOO_MIRROR to a mirror of that layout and run `paperzoo data fetch {name}`.")
    return msg


def require(name: str, download: bool = False, root: str | os.PathLike | None = None) -> Path:
    """The folder of ``name`` if present; else fetch it when ``download`` else raise :class:`DataNotFoundError`."""
    d = dataset_dir(name, root)
    if is_present(name, root):
        return d
    if download:
        from paperzoo.data.download import DownloadError, fetch

        try:
            return fetch(name, root=root)
        except DownloadError as e:
            raise DataNotFoundError(not_found_message(name, root, reason=f"Download failed: {e}")) from e
    raise DataNotFoundError(not_found_message(name, root))
