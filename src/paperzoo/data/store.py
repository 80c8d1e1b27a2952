"""Where data sets live, whether they are there and whether they are intact: ``data_root``, ``require``, ``verify``.

A set ``NAME`` lives in ``<root>/NAME/`` with the relative paths of its catalog entry, where ``root``
is ``$PAPERZOO_DATA`` or ``~/.cache/paperzoo``. Derived caches (decoded CIFAR arrays) go under
``$PAPERZOO_CACHE`` or ``~/.cache/paperzoo/derived``, never into the (possibly read-only) data root.

Readers call :func:`require`, which checks every file they read against the catalog (sha256, see
:mod:`paperzoo.data.catalog`) and raises :class:`DataIntegrityError` naming the file, both digests and the
remedy. Hashing happens once per file: a good verdict is remembered under ``user_cache_dir()/verified``
(``$XDG_CACHE_HOME/paperzoo`` or ``~/.cache/paperzoo``), one small file per verdict, keyed on the file's
resolved path, size, mtime, ctime and inode and on the digests it was checked against; entries appear by
atomic rename, so concurrent processes never see a half-written one, and any change to the file (or to its
expected digest) makes the entry miss. A file changed less than ``RACY_S`` before it was hashed is not
remembered: a second change within the same timestamp tick would leave its stat unchanged (git's "racy clean"
problem). An unwritable cache only costs the re-hash.

A set rebuilt from its public original (``paperzoo data fetch``, :mod:`paperzoo.data.upstream`) may hold
files that cannot equal the reference bytes (a re-encoded JPEG tar, resampled PNGs); their digests are
written at build time into ``<root>/NAME/.paperzoo-build.json`` and accepted from there, so later damage is
caught the same way.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from paperzoo.data.catalog import FileInfo, get_info

CHUNK = 1 << 20
BUILD_RECORD = ".paperzoo-build.json"
RACY_S = 0.1  # more than a kernel timestamp tick (1-10 ms)


class DataNotFoundError(FileNotFoundError):
    """A data set is missing (and was not, or could not be, downloaded); ``name`` is the set, ``folder`` where it was
    looked for."""

    def __init__(self, message: str, name: str | None = None, folder: str | None = None) -> None:
        super().__init__(message)
        self.name, self.folder = name, folder


class DataIntegrityError(ValueError):
    """A data file is there but is not the file the catalog describes (damaged, truncated or replaced)."""

    def __init__(self, message: str, name: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.name, self.path = name, path


def data_root() -> Path:
    """``$PAPERZOO_DATA`` if set, else the folder saved for this Python environment by ``paperzoo data use PATH``
    (:func:`saved_root_file`), else ``~/.cache/paperzoo``."""
    env = os.environ.get("PAPERZOO_DATA")
    if env:
        return Path(env).expanduser()
    saved = _saved_root()
    return saved if saved is not None else Path.home() / ".cache" / "paperzoo"


def data_root_source() -> str:
    """Where :func:`data_root` came from, in words for messages."""
    if os.environ.get("PAPERZOO_DATA"):
        return "PAPERZOO_DATA"
    if _saved_root() is not None:
        return f"saved by `paperzoo data use` in {saved_root_file()}"
    return "the default; PAPERZOO_DATA is unset"


def saved_root_file() -> Path:
    """The file of ``paperzoo data use``: one per Python environment (a virtualenv has its own), so the
    ``.venv/bin/paperzoo`` that ``make`` set up finds the data ``make`` found without an exported variable."""
    return Path(sys.prefix) / "etc" / "paperzoo" / "data-root"


def save_root(path: str | os.PathLike | None) -> Path | None:
    """Make ``path`` this environment's data folder (None forgets it); returns the absolute path saved."""
    f = saved_root_file()
    if path is None:
        f.unlink(missing_ok=True)
        return None
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"data folder {root} does not exist; make it or fetch a set into it first "
                                f"(PAPERZOO_DATA={root} paperzoo data fetch NAME)")
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(str(root) + "\n")
    tmp.replace(f)
    return root


def _saved_root() -> Path | None:
    try:
        text = saved_root_file().read_text().strip()
    except OSError:
        return None
    return Path(text) if text else None


def cache_root() -> Path:
    """Writable folder for derived arrays: ``$PAPERZOO_CACHE`` or ``~/.cache/paperzoo/derived``."""
    env = os.environ.get("PAPERZOO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "paperzoo" / "derived"


def user_cache_dir() -> Path:
    """The user's cache folder for paperzoo: ``$XDG_CACHE_HOME/paperzoo`` (an absolute path) or ``~/.cache/paperzoo``.

    Holds the verification verdicts (``verified/``) and the public archives sets are rebuilt from (``downloads/``).
    """
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).expanduser().is_absolute() else Path.home() / ".cache"
    return base / "paperzoo"


def _root(root: str | os.PathLike | None) -> Path:
    return Path(root).expanduser() if root is not None else data_root()


def dataset_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """``<root>/<name>`` (ValueError for an unknown name)."""
    get_info(name)
    return _root(root) / name


# ------------------------------------------------------------------------------------------ files, atomically
def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # not thread-safe, hence only the fallback
    os.umask(mask)
    return mask


def make_readable(path: str | os.PathLike) -> None:
    """Give ``path`` the mode a plain ``open(path, "w")`` would have (0666 less the umask): mkstemp makes 0600."""
    os.chmod(path, 0o666 & ~_umask())


@contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[IO[bytes]]:
    """Write ``path`` through a temporary file in its folder: fsynced, made readable, renamed into place on success,
    removed on any error (Ctrl-C included). Readers see the old file or the whole new one, never a part."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        make_readable(tmp)
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


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


# ------------------------------------------------------------------------------------------ build records
def read_build_record(folder: str | os.PathLike) -> dict[str, str]:
    """``{relpath: sha256}`` of the files a rebuild wrote into ``folder`` (empty if none or unreadable)."""
    try:
        rec = json.loads((Path(folder) / BUILD_RECORD).read_text())
        files = rec["files"]
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


# ------------------------------------------------------------------------------------------ verdict cache
def _verdict_path(path: Path, st: os.stat_result, criteria: str) -> Path:
    key = "\0".join((os.path.realpath(path), str(st.st_size), str(st.st_mtime_ns), str(st.st_ctime_ns),
                     str(st.st_ino), criteria))
    return user_cache_dir() / "verified" / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.json"


def _criteria(info: FileInfo, recorded: str | None) -> str:
    return f"{info.sha256}:{info.gunzip_sha256 or '-'}:{recorded or '-'}"


def _remember(path: Path, st: os.stat_result, criteria: str, digest: str, why: str) -> None:
    entry = _verdict_path(path, st, criteria)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(entry) as f:
            f.write(json.dumps({"path": os.path.realpath(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                                "sha256": digest, "verdict": why}).encode())
    except OSError:  # a read-only or full cache only costs the re-hash next time
        pass


def _check(path: Path, info: FileInfo, recorded: str | None, cached: bool) -> tuple[bool, str, str | None]:
    """(ok, reason, sha256 of the bytes or None when not hashed)."""
    if not path.is_file():
        return (not info.required, "missing (optional)" if not info.required else "missing", None)
    st = path.stat()
    criteria = _criteria(info, recorded)
    if cached and _verdict_path(path, st, criteria).is_file():
        return True, "ok (verified before)", None
    digest = sha256_file(path)
    ok, why = False, ""
    if digest == info.sha256:
        ok, why = True, "sha256 ok"
    elif info.gunzip_sha256 is not None and sha256_gunzip(path) == info.gunzip_sha256:
        ok, why = True, "decompressed content sha256 ok (gzip wrapper differs)"
    elif recorded is not None and digest == recorded:
        ok, why = True, f"sha256 ok (recorded when it was rebuilt, {BUILD_RECORD})"
    if not ok:
        return False, f"sha256 mismatch: got {digest[:16]}..., expected {info.sha256[:16]}...", digest
    after = path.stat()
    settled = time.time_ns() - st.st_ctime_ns > RACY_S * 1e9
    if settled and (after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino) == (
            st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino):
        _remember(path, st, criteria, digest, why)
    return True, why, digest


def check_file(path: Path, info: FileInfo, recorded: str | None = None, cached: bool = False) -> tuple[bool, str]:
    """(ok, reason) for one local file against its catalog entry (and the digest its rebuild recorded, if any).

    Hashes the file unless ``cached`` and a good verdict for exactly this file is remembered; a good result is
    remembered either way.
    """
    ok, why, _ = _check(Path(path), info, recorded, cached)
    return ok, why


def missing_files(name: str, root: str | os.PathLike | None = None) -> list[str]:
    """Required files of ``name`` that do not exist under ``<root>/<name>``."""
    info = get_info(name)
    d = _root(root) / name
    return [rel for rel, f in info.files.items() if f.required and not (d / rel).is_file()]


def is_present(name: str, root: str | os.PathLike | None = None) -> bool:
    """True when every required file of ``name`` exists (no hashing; see :func:`verify`)."""
    return not missing_files(name, root)


def verify(name: str, root: str | os.PathLike | None = None) -> list[tuple[str, bool, str]]:
    """Hash every file of ``name`` (no remembered verdicts are trusted): a list of ``(relpath, ok, reason)``."""
    info = get_info(name)
    d = _root(root) / name
    record = read_build_record(d)
    return [(rel, *check_file(d / rel, f, record.get(rel))) for rel, f in info.files.items()]


def integrity_message(name: str, path: Path, info: FileInfo, digest: str, recorded: str | None = None) -> str:
    """One message for a file that fails its check: which file, both digests, how to replace it."""
    size = path.stat().st_size if path.is_file() else 0
    expected = info.sha256
    if info.gunzip_sha256:
        expected += f" (or decompressed content {info.gunzip_sha256})"
    if recorded:
        expected += f" (or {recorded}, recorded when it was rebuilt)"
    return (f"data file {path} of set {name!r} is damaged or not the expected file ({size} bytes): sha256 {digest}, "
            f"expected {expected}. Replace it with `paperzoo data fetch {name}` (it re-downloads only the files that "
            f"fail the check), or set PAPERZOO_DATA to a folder that holds a good copy of {name}/.")


def check_integrity(name: str, root: str | os.PathLike | None = None, files: Iterable[str] | None = None) -> None:
    """Raise :class:`DataIntegrityError` if a file of ``name`` (``files``, default every required one) that exists
    does not match the catalog; good verdicts are remembered, so this hashes each file once."""
    info = get_info(name)
    d = _root(root) / name
    rels = [rel for rel, f in info.files.items() if f.required] if files is None else list(files)
    unknown = sorted(set(rels) - set(info.files))
    if unknown:
        raise ValueError(f"files not in data set {name!r}: {unknown}")
    record = read_build_record(d)
    for rel in rels:
        path = d / rel
        if not path.is_file():
            continue  # absence is the caller's business (require raises DataNotFoundError first)
        ok, _, digest = _check(path, info.files[rel], record.get(rel), cached=True)
        if not ok:
            raise DataIntegrityError(integrity_message(name, path, info.files[rel], digest or "?", record.get(rel)),
                                     name=name, path=str(path))


def not_found_message(name: str, root: str | os.PathLike | None = None, reason: str = "") -> str:
    """One message: which set, where it looked, what is missing, how to get it."""
    info = get_info(name)
    d = _root(root) / name
    missing = missing_files(name, root)
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    where = data_root_source()
    msg = f"data set {name!r} not found in {d} ({where}); missing: {shown or 'nothing'}."
    if reason:
        msg += f" {reason}"
    if info.build is not None:
        msg += (f" Get it with `paperzoo data fetch {name}` (downloads the public original {info.build.archive} "
                f"and rebuilds this layout), or set PAPERZOO_DATA to a folder that holds {name}/.")
    elif info.fetchable:
        msg += (f" Get it with `paperzoo data fetch {name}` (downloads from {info.homepage}), "
                f"or set PAPERZOO_DATA to a folder that holds {name}/.")
    else:
        msg += (f" It has no public download (built from {info.homepage}); "
                f"set PAPERZOO_DATA to a folder that holds a copy of {name}/ (e.g. the project's shared data), "
                f"or set PAPERZOO_MIRROR to a mirror of that layout and run `paperzoo data fetch {name}`.")
    return msg


def require(name: str, download: bool = False, root: str | os.PathLike | None = None,
            files: Iterable[str] | None = None) -> Path:
    """The folder of ``name`` once it is present and intact; readers call this before they read.

    A missing set is fetched when ``download`` (else :class:`DataNotFoundError`); then ``files`` (default: every
    required file) are checked against the catalog, once per file (:func:`check_integrity`), and a damaged one
    raises :class:`DataIntegrityError` -- or, when ``download``, is fetched again.
    """
    d = dataset_dir(name, root)
    files = None if files is None else tuple(files)
    if not is_present(name, root):
        if not download:
            raise DataNotFoundError(not_found_message(name, root), name=name, folder=str(d))
        _fetch_for_require(name, root)
    try:
        check_integrity(name, root, files)
    except DataIntegrityError:
        if not download:
            raise
        _fetch_for_require(name, root)
        check_integrity(name, root, files)
    sys.audit("paperzoo.data.require", name, str(d))  # lets the test suite check its data marks
    return d


def _fetch_for_require(name: str, root: str | os.PathLike | None) -> None:
    from paperzoo.data import download as dl

    try:
        dl.fetch(name, root=root)
    except dl.DownloadError as e:
        raise DataNotFoundError(not_found_message(name, root, reason=f"Download failed: {e}"), name=name,
                                folder=str(_root(root) / name)) from e
