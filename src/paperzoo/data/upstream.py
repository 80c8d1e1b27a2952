"""Rebuilding the repacked sets from their public originals: ``build_set(name)``, used by ``fetch``.

Five reference sets are not files anyone publishes: CIFAR-10 as a JPEG tar, FSDD as a wav tar, the lego views at
200 px, the tiny-NeRF npz and the IMDB csv. For each, the catalog names the public original (an
:class:`~paperzoo.data.catalog.Archive`) and what is built from it (a :class:`~paperzoo.data.catalog.BuildInfo`).
``build_set``:

1. gets the archive into ``user_cache_dir()/downloads/`` (kept, so another set built from it and a later
   re-fetch reuse it; delete it to reclaim the space). A pinned archive must match its sha256 and size; an
   unpinned one is held to the digest recorded when it first rebuilt a set (``<filename>.sha256`` beside it), and
   a first download that does not rebuild (an error page, say) is deleted, never recorded. A file put there by
   hand (e.g. downloaded in a browser) is used the same way.
2. runs the set's builder (``paperzoo.data.<module>.build_*``) into a staging folder inside the set's folder;
3. checks every built file: those the catalog marks ``exact`` must match the reference digest (FSDD's tar and the
   IMDB csv by their decompressed bytes, lego's ``transforms_train.json`` byte for byte), else nothing is kept;
4. writes the digests of all built files to ``<set>/.paperzoo-build.json`` (with the archive's digest and the
   library versions), then moves the files into place, each readable and by atomic rename.

Builders are deterministic: the same archive and library versions give the same bytes (fixed tar metadata and
member order, gzip without name or time, Pillow's encoders with fixed settings).
"""

from __future__ import annotations

import gzip
import importlib
import io
import json
import os
import pickle
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from paperzoo.data.catalog import ARCHIVES, Archive, get_info
from paperzoo.data.store import BUILD_RECORD, atomic_writer, check_file, make_readable, sha256_file, user_cache_dir

# set -> "module:function" building its files from the archive into a folder; returns the relative paths written
BUILDERS = {
    "cifar10-jpeg": "paperzoo.data.cifar:build_cifar10_jpeg",
    "fsdd": "paperzoo.data.fsdd:build_fsdd_tar",
    "imdb": "paperzoo.data.text:build_imdb_csv",
    "nerf-synthetic-lego-200": "paperzoo.data.nerf:build_lego",
    "tiny-nerf": "paperzoo.data.nerf:build_tiny_nerf",
}


def pack_tar_gz(members: list[tuple[str, bytes | None, bool]], mtime: int, level: int) -> bytes:
    """A deterministic tar.gz of ``(name, bytes or None for a folder, executable)`` in the given order: GNU format,
    every member with ``mtime``, owner and group 0 without names, mode 0775 for folders and executable files, 0664
    for the others; the gzip header carries no name and no time. This is how the reference tars were packed."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data, executable in members:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o775
                tar.addfile(info)
            else:
                info.mode, info.size = 0o775 if executable else 0o664, len(data)
                tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buf.getvalue(), compresslevel=level, mtime=0)


def downloads_dir() -> Path:
    """Where public archives are kept: ``user_cache_dir()/downloads``."""
    return user_cache_dir() / "downloads"


def _recorded(record: Path) -> tuple[str, int] | None:
    try:
        digest, size = record.read_text().split()[:2]
        return digest, int(size)
    except (OSError, ValueError):
        return None


def obtain_archive(archive: Archive, progress: bool = True, timeout: float = 60.0,
                   say: Callable[[str], None] = print) -> tuple[Path, str, bool]:
    """``(path, sha256, vouched)`` of ``archive`` in :func:`downloads_dir`, downloaded if absent or not the expected
    bytes. ``vouched`` is False for an unpinned archive seen for the first time: only a successful rebuild vouches
    for it (:func:`record_digest`), so a download that is no archive at all (an error page) is never recorded."""
    from paperzoo.data.download import DownloadError, download_checked

    folder = downloads_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path, record = folder / archive.filename, folder / f"{archive.filename}.sha256"
    pinned = (archive.sha256, archive.size) if archive.sha256 is not None else None
    expected = pinned or _recorded(record)
    if path.is_file():
        digest = sha256_file(path)
        if expected is None or (digest, path.stat().st_size) == expected:
            return path, digest, expected is not None
        say(f"{path} is not the expected {archive.filename} (sha256 {digest}, expected {expected[0]}): "
            f"downloading it again")
    try:
        digest = download_checked(archive.url, path, expected[0] if expected else None,
                                  size=expected[1] if expected else None, progress=progress, timeout=timeout)
    except DownloadError as e:
        if pinned is None and expected is not None:
            raise DownloadError(f"{e} (the expected digest of {archive.filename} was recorded when it first rebuilt "
                                f"a set, in {record}; delete that file to accept a different archive)") from e
        raise
    return path, digest, expected is not None


def record_digest(archive: Archive, path: Path, digest: str, say: Callable[[str], None] = print) -> None:
    """Remember the digest of an unpinned archive that a rebuild has vouched for; later downloads must match it."""
    record = downloads_dir() / f"{archive.filename}.sha256"
    with atomic_writer(record) as f:
        f.write(f"{digest} {path.stat().st_size} {archive.url}\n".encode())
    say(f"{archive.filename} has no published sha256: this copy's is {digest} ({path.stat().st_size} bytes), "
        f"recorded in {record}; later downloads must match it")


def _versions() -> dict[str, str]:
    import numpy
    import PIL

    from paperzoo import __version__

    return {"paperzoo": __version__, "numpy": numpy.__version__, "pillow": PIL.__version__}


def build_set(name: str, folder: str | os.PathLike, progress: bool = True, timeout: float = 60.0,
              archive_path: str | os.PathLike | None = None, say: Callable[[str], None] = print) -> list[str]:
    """Rebuild the files of ``name`` that its :class:`~paperzoo.data.catalog.BuildInfo` lists into ``folder`` (the
    set's folder) from the public archive (or ``archive_path``); returns the relative paths written.

    Raises :class:`~paperzoo.data.download.DownloadError` if the archive cannot be had or is not the expected file,
    and ``ValueError`` if the archive is not what the builder expects or an ``exact`` file differs from the
    reference; nothing is moved into ``folder`` then.
    """
    info = get_info(name)
    build = info.build
    if build is None:
        raise ValueError(f"data set {name!r} is not rebuilt from an archive; sets that are: {sorted(BUILDERS)}")
    archive = ARCHIVES[build.archive]
    if archive_path is not None:
        src, digest, vouched = Path(archive_path), sha256_file(archive_path), True
    else:
        src, digest, vouched = obtain_archive(archive, progress=progress, timeout=timeout, say=say)
    module, fn = BUILDERS[name].split(":")
    builder = getattr(importlib.import_module(module), fn)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=".build-"))
    try:
        if progress:
            say(f"{name}: building {', '.join(build.files[:2])}{', ...' if len(build.files) > 2 else ''} "
                f"from {src.name}")
        try:
            written = builder(src, staging)
        except (OSError, EOFError, KeyError, ValueError, SyntaxError, tarfile.TarError, zipfile.BadZipFile,
                pickle.UnpicklingError) as e:  # a damaged or different archive
            if not vouched and archive_path is None:  # unverified bytes, e.g. an error page: not kept
                src.unlink(missing_ok=True)
                raise ValueError(f"could not rebuild {name!r} from the download of {archive.url} "
                                 f"({type(e).__name__}: {e}); it was not kept") from e
            raise ValueError(f"could not rebuild {name!r} from {src} ({type(e).__name__}: {e}); if the archive is "
                             f"damaged, delete it and run `paperzoo data fetch {name}` again") from e
        if sorted(written) != sorted(build.files):
            raise ValueError(f"rebuilding {name!r} from {src.name} gave {len(written)} file(s) where the catalog "
                             f"lists {len(build.files)}: missing {sorted(set(build.files) - set(written))[:3]}, "
                             f"extra {sorted(set(written) - set(build.files))[:3]}")
        digests = {}
        for rel in build.files:
            ok, why = check_file(staging / rel, info.files[rel])
            if rel in build.exact and not ok:
                raise ValueError(f"{rel} rebuilt from {src.name} does not reproduce the reference content ({why}); "
                                 f"the archive is not the one this catalog was made from")
            digests[rel] = sha256_file(staging / rel)
        if not vouched and archive_path is None:
            record_digest(archive, src, digest, say)
        record = {"set": name, "archive": {"filename": archive.filename, "url": archive.url, "sha256": digest,
                                           "pinned": archive.sha256 is not None},
                  "built_with": _versions(), "files": digests}
        with atomic_writer(folder / BUILD_RECORD) as f:
            f.write(json.dumps(record, indent=1, sort_keys=True).encode())
        for rel in build.files:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            make_readable(staging / rel)
            os.replace(staging / rel, folder / rel)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return list(build.files)
