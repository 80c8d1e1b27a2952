"""Checksum-verified download: ``fetch(name)`` and the one-file primitive ``download_file``.

A file is streamed into a temporary ``.<name>.*.part`` file in its target folder while its sha256 (and,
for gzip files, the sha256 of the decompressed stream) is computed; it is fsynced, made readable (the mode a
plain ``open`` would give, not mkstemp's 0600) and renamed into place with ``os.replace`` only when the digest
matches the catalog. A corrupt, truncated or interrupted download (or Ctrl-C) removes the temporary file and
raises :class:`DownloadError`; an existing good file is never replaced by a bad one.

Sources, in order: ``urls`` for single files; else a mirror of the reference layout (``base_url`` or
``$PAPERZOO_MIRROR``: an http(s) or file URL, or a plain folder path); else the file's public URL; else, for the
repacked sets, the public original they are rebuilt from (:mod:`paperzoo.data.upstream`).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from paperzoo.data.catalog import get_info
from paperzoo.data.store import CHUNK, _root, check_file, make_readable, read_build_record


class DownloadError(OSError):
    """A download failed, was incomplete, or did not match its checksum (nothing was kept)."""


class _GunzipHasher:
    """sha256 of the decompressed bytes of a (possibly multi-member) gzip stream, fed in chunks."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()
        self._d = zlib.decompressobj(wbits=31)
        self._bad = False

    def update(self, data: bytes) -> None:
        if self._bad:
            return
        try:
            while data:
                self._h.update(self._d.decompress(data))
                if self._d.eof and self._d.unused_data:
                    data = self._d.unused_data
                    self._d = zlib.decompressobj(wbits=31)
                else:
                    data = b""
        except zlib.error:
            self._bad = True

    def hexdigest(self) -> str | None:
        """The digest, or None if the stream was not complete, valid gzip."""
        return None if self._bad or not self._d.eof else self._h.hexdigest()


@contextmanager
def _progress(enabled: bool, label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    if not enabled:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn()) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def download_file(url: str, dest: str | os.PathLike, sha256: str, gunzip_sha256: str | None = None,
                  progress: bool = True, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest``, keeping it only if its sha256 (or decompressed sha256) matches."""
    if not isinstance(sha256, str) or len(sha256) != 64:
        raise ValueError(f"sha256 must be a 64-character hex string, got {sha256!r}")
    download_checked(url, dest, sha256, gunzip_sha256, progress=progress, timeout=timeout)
    return Path(dest)


def download_checked(url: str, dest: str | os.PathLike, sha256: str | None, gunzip_sha256: str | None = None,
                     size: int | None = None, progress: bool = True, timeout: float = 60.0) -> str:
    """Download ``url`` to ``dest`` and return its sha256; kept only if it matches ``sha256`` (or ``gunzip_sha256``)
    and ``size`` where given. ``sha256=None`` (an archive without a published digest) checks completeness only."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            h = hashlib.sha256()
            gz = _GunzipHasher() if gunzip_sha256 else None
            req = urllib.request.Request(url, headers={"User-Agent": "paperzoo"})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                length = resp.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                got = 0
                with _progress(progress, dest.name, total or size) as advance:
                    while chunk := resp.read(CHUNK):
                        out.write(chunk)
                        h.update(chunk)
                        if gz is not None:
                            gz.update(chunk)
                        got += len(chunk)
                        advance(len(chunk))
            if total is not None and got != total:
                raise DownloadError(f"incomplete download of {url}: got {got} of {total} bytes; nothing was kept")
            if size is not None and got != size:
                raise DownloadError(f"download of {url} has {got} bytes, expected {size}; nothing was kept")
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if sha256 is not None and digest != sha256 and not (gz is not None and gz.hexdigest() == gunzip_sha256):
            raise DownloadError(f"checksum mismatch for {url}: sha256 {digest}, expected {sha256}"
                                + (" (decompressed content did not match either)" if gz is not None else "")
                                + "; nothing was kept")
        make_readable(tmp)
        os.replace(tmp, dest)
    except BaseException as e:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, DownloadError):
            raise
        if isinstance(e, urllib.error.URLError | http.client.HTTPException | OSError):
            raise DownloadError(f"download of {url} failed: {e!r}; nothing was kept") from e
        raise
    return digest


def mirror_url(base: str) -> str:
    """``base`` as a URL: http(s)/file URLs unchanged, a plain folder path (absolute, relative or ``~``) as file://."""
    if urllib.parse.urlsplit(base).scheme in ("http", "https", "file", "ftp"):
        return base
    return Path(base).expanduser().resolve().as_uri()


def _url(name: str, rel: str, default: str | None, base_url: str | None, urls: Mapping[str, str] | None) -> str | None:
    if urls is not None and rel in urls:
        return urls[rel]
    if base_url is not None:
        return f"{mirror_url(base_url).rstrip('/')}/{urllib.parse.quote(name)}/{urllib.parse.quote(rel)}"
    return default


def fetch(name: str, root: str | os.PathLike | None = None, progress: bool = True, base_url: str | None = None,
          urls: Mapping[str, str] | None = None, timeout: float = 60.0) -> Path:
    """Get the missing or bad files of ``name`` into ``<root>/<name>`` and return that folder.

    ``base_url`` (default ``$PAPERZOO_MIRROR``) points at a mirror of the reference layout
    (``<base_url>/<name>/<relpath>``; a URL or a plain folder path); the checksums apply to mirrors as well.
    ``urls`` overrides single files (``{relpath: url}``). Without a mirror, files come from their public URL, and
    the files of a repacked set (CIFAR-10 JPEG, FSDD, the NeRF scenes, IMDB) are rebuilt from the public original
    (:func:`paperzoo.data.upstream.build_set`). Files already present with a good checksum are kept. Raises
    :class:`DownloadError` (nothing kept) when a source fails or does not match, before downloading anything when a
    required file has no source.
    """
    info = get_info(name)
    if urls is not None:
        unknown = sorted(set(urls) - set(info.files))
        if unknown:
            raise ValueError(f"urls has files not in {name!r}: {unknown}; valid: {sorted(info.files)}")
    if base_url is None:
        base_url = os.environ.get("PAPERZOO_MIRROR") or None
    d = _root(root) / name
    record = read_build_record(d)
    todo = []
    for rel, f in info.files.items():
        if (d / rel).is_file() and check_file(d / rel, f, record.get(rel))[0]:
            continue
        todo.append((rel, f, _url(name, rel, f.url, base_url, urls)))
    built = set(info.build.files) if info.build is not None and base_url is None else set()
    rebuild = [rel for rel, f, _ in todo if rel in built and (urls is None or rel not in urls)]
    no_source = [rel for rel, f, url in todo if url is None and f.required and rel not in rebuild]
    if no_source:
        notes = sorted({f.note for rel, f, url in todo if rel in no_source and f.note})
        raise DownloadError(
            f"data set {name!r} has no public byte-identical download for {len(no_source)} file(s) "
            f"({', '.join(no_source[:3])}{', ...' if len(no_source) > 3 else ''}): {'; '.join(notes)}. "
            f"Fetch it from a mirror of the reference layout (set PAPERZOO_MIRROR=<url or folder> or "
            f"fetch(name, base_url=...)) or set PAPERZOO_DATA to a folder that holds {name}/.")
    if rebuild:
        from paperzoo.data.upstream import build_set

        try:
            build_set(name, d, progress=progress, timeout=timeout)
        except ValueError as e:
            raise DownloadError(str(e)) from e
    for rel, f, url in todo:
        if url is None or rel in rebuild:
            continue
        try:
            download_file(url, d / rel, f.sha256, f.gunzip_sha256, progress=progress, timeout=timeout)
        except DownloadError as e:
            if f.required:
                raise
            warnings.warn(f"optional file {name}/{rel} not downloaded: {e}", stacklevel=2)
    return d
