"""Run folders: ``runs/<paper>/<UTC stamp>/``, their ``config.json``, the lock a run holds on its folder, and the
list of run folders written outside the runs root (``--out`` elsewhere) that the index shows too."""

from __future__ import annotations

import atexit
import dataclasses
import errno
import json
import os
import re
import sys
import warnings
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paperzoo.report.machine import machine_info
from paperzoo.report.serial import dumps, to_jsonable, write_text_atomic

try:
    import fcntl
except ImportError:  # Windows: an O_EXCL pid file instead
    fcntl = None

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
STAMP_FORMAT = "%Y%m%d-%H%M%S"
LOCK_FILE = ".lock"
EXTERNAL_RUNS = "external-runs.jsonl"
LOCKS_ENV = "PAPERZOO_RUN_LOCKS"  # JSON [[pid, folder], ...]: the run locks held by this process and its ancestors


def runs_root() -> Path:
    """Where run folders go: ``$PAPERZOO_RUNS``, default ``./runs``."""
    return Path(os.environ.get("PAPERZOO_RUNS") or "runs")


def utc_stamp(now: datetime | None = None) -> str:
    """A UTC time stamp ``YYYYmmdd-HHMMSS``."""
    return (now or datetime.now(UTC)).strftime(STAMP_FORMAT)


def new_run_dir(paper: str, out: Path | None = None) -> Path:
    """Create and return ``out`` if given, else ``<runs root>/<paper>/<UTC stamp>/`` (made unique with a suffix).

    The path is absolute, so ``run_dir / "plot.png"`` names the same file whatever helper receives it. An ``out``
    that is not ``<runs root>/<paper>/<name>`` is recorded in ``<runs root>/external-runs.jsonl``, so the runs
    index lists it too. An ``out`` that is a file (or lies under one) raises a ValueError.
    """
    if not isinstance(paper, str) or not _NAME.match(paper):
        raise ValueError(f"paper must be a registered paper name such as 'electra' (letters, digits, '.', '_', '-'), "
                         f"got {paper!r}")
    if out is not None:
        out = Path(out).absolute()
        if out.exists() and not out.is_dir():
            raise ValueError(f"the run folder {out} is an existing file, not a folder; give a folder path")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a parent is a file, no permission, read-only disk
            raise ValueError(f"cannot create the run folder {out}: {e.strerror or e}") from e
        if out.parent.resolve() != (runs_root() / paper).resolve():
            _record_external(paper, out)
        return out
    base = runs_root().absolute() / paper
    base.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    for i in range(1000):
        path = base / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a fresh run folder under {base}")


def _as_dict(config: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    if isinstance(config, Mapping):
        return dict(config)
    raise ValueError(f"config must be a dict or a dataclass instance, got {type(config).__name__}")


def write_config(run_dir: Path, config: Any, seeds: Iterable[int] | None = None) -> Path:
    """Write ``run_dir/config.json``: the config, the seeds, the command, torch version and the machine.

    ``seeds`` defaults to the config's ``seeds`` (or ``seed``) entry. The file looks like
    ``{"config": {...}, "seeds": [0, 1, 2], "command": "...", "created": "...", "machine": {...}}``.

    A folder that already holds a ``config.json`` with a different config or seeds (a ``--resume`` after a preset
    changed, or ``--out`` reused for another preset) raises a ValueError naming the differing entries, so finished
    runs of one config are never reported under another.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"run_dir must be an existing folder (from new_run_dir), got {run_dir}")
    cfg = _as_dict(config)
    if seeds is None:
        seeds = cfg.get("seeds", cfg.get("seed"))
    if isinstance(seeds, int):
        seeds = [seeds]
    doc = {
        "config": to_jsonable(cfg),
        "seeds": to_jsonable(list(seeds)) if seeds is not None else None,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else None,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
    }
    _refuse_other_config(run_dir / "config.json", doc, _field_defaults(cfg, "config."))
    return write_text_atomic(run_dir / "config.json", dumps(doc))


def _field_defaults(obj: Any, prefix: str) -> dict[str, Any]:
    """Flattened JSON keys -> the declared default of every dataclass field inside ``obj`` (a config tree)."""
    out: dict[str, Any] = {}
    items = ([(f.name, getattr(obj, f.name), f) for f in dataclasses.fields(obj)]
             if dataclasses.is_dataclass(obj) and not isinstance(obj, type)
             else [(k, v, None) for k, v in obj.items()] if isinstance(obj, Mapping) else [])
    for name, value, f in items:
        if f is not None and f.default is not dataclasses.MISSING:
            default = f.default
        elif f is not None and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        if default is not dataclasses.MISSING:
            out.update(_flatten(json.loads(dumps(default)), f"{prefix}{name}."))
        out.update(_field_defaults(value, f"{prefix}{name}."))
    return out


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def _refuse_other_config(path: Path, doc: dict[str, Any], defaults: dict[str, Any] | None = None) -> None:
    """Refuse a folder whose config differs from ``doc``'s. A key the folder's config lacks is accepted when its
    new value is the field's declared default (``defaults``): a field added to a config class after the folder
    was made, at the value that reproduces the old behaviour."""
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # unreadable (a crash mid-write predates atomic writes): nothing to protect
    new = json.loads(dumps(doc))
    before = _flatten({"config": old.get("config"), "seeds": old.get("seeds")})
    after = _flatten({"config": new["config"], "seeds": new["seeds"]})
    defaults = defaults or {}
    diff = [f"{k}: {before.get(k, '<absent>')!r} -> {after.get(k, '<absent>')!r}"
            for k in sorted(before.keys() | after.keys()) if before.get(k, "<absent>") != after.get(k, "<absent>")
            and not (k not in before and k in defaults and after[k] == defaults[k])]
    if diff:
        raise ValueError(f"{path.parent} holds runs made with a different config ({'; '.join(diff[:8])}"
                         f"{'; ...' if len(diff) > 8 else ''}); give a new --out folder, or delete this one to "
                         f"start over")


# ----------------------------------------------------------------------------------------------------- externals
def _record_external(paper: str, run_dir: Path) -> None:
    """Append ``run_dir`` to ``<runs root>/external-runs.jsonl`` (once), the index's list of runs kept elsewhere."""
    root = runs_root().absolute()
    if any(p == run_dir.resolve() for _, p in external_runs(root)):
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"paper": paper, "dir": str(run_dir.resolve())}) + "\n"
        fd = os.open(root / EXTERNAL_RUNS, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())  # one append: concurrent runs never interleave their lines
        finally:
            os.close(fd)
    except OSError as e:  # the run itself does not need the record
        warnings.warn(f"could not record {run_dir} in {root / EXTERNAL_RUNS}: {e}", stacklevel=3)


def external_runs(root: Path | None = None) -> list[tuple[str, Path]]:
    """``[(paper, folder), ...]`` recorded in ``<root>/external-runs.jsonl`` (default: the runs root), oldest first;
    folders that no longer exist and damaged lines are left out."""
    path = Path(root if root is not None else runs_root()) / EXTERNAL_RUNS
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out: dict[Path, str] = {}
    for line in lines:
        try:
            rec = json.loads(line)
            paper, d = str(rec["paper"]), Path(rec["dir"])
        except (ValueError, KeyError, TypeError):
            continue
        if d.is_dir():
            out.setdefault(d, paper)
    return [(p, d) for d, p in out.items()]


# ----------------------------------------------------------------------------------------------------- locks
class RunFolderBusyError(RuntimeError):
    """Another process holds the lock of a run folder: two runs must never write into one folder."""


_HELD: dict[Path, int] = {}  # resolved run folder -> the open lock file (fcntl) or -1 (pid file)


def lock_run_dir(run_dir: Path) -> None:
    """Hold ``run_dir/.lock`` until :func:`release_run_dir` or the end of this process; a folder whose lock another
    process holds raises :class:`RunFolderBusyError` naming it (pid, command, since when).

    The lock is ``fcntl.flock`` on the file, so the OS releases it when the holder dies, however it dies; where
    there is no ``fcntl`` it is an ``O_EXCL`` pid file, taken over when the pid in it is no longer alive. Taking it
    again in the holding process is a no-op, and so is taking it in a worker process of the same run (a child of
    the holder: the pool of ``--workers``) or on a rank other than 0 under ``torchrun`` (rank 0 holds it).
    """
    run_dir = Path(run_dir).absolute()
    key = run_dir.resolve()
    if key in _HELD or _held_by_parent(key) or os.environ.get("RANK", "0") != "0":
        return  # held here, by the run this worker serves, or by rank 0 of this torchrun job
    path = run_dir / LOCK_FILE
    me = json.dumps({"pid": os.getpid(), "command": _command(), "since": datetime.now(UTC).isoformat(
        timespec="seconds"), "host": os.uname().nodename if hasattr(os, "uname") else ""})
    if fcntl is not None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise RunFolderBusyError(_busy(run_dir, _holder(path))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, me.encode(), 0)
    else:
        for _ in range(2):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = _holder(path)
                if holder.get("pid") != os.getpid() and not _stale(path, holder):
                    raise RunFolderBusyError(_busy(run_dir, holder)) from None
                path.unlink(missing_ok=True)  # its process is gone (a pid of ours: a crashed earlier life)
                continue
            os.write(fd, me.encode())
            os.close(fd)
            fd = -1
            break
        else:
            raise RunFolderBusyError(_busy(run_dir, _holder(path)))
    _HELD[key] = fd
    os.environ[LOCKS_ENV] = json.dumps([*_env_locks(), [os.getpid(), str(key)]])


def release_run_dir(run_dir: Path) -> None:
    """Release the lock :func:`lock_run_dir` took on ``run_dir`` in this process (nothing if it holds none)."""
    key = Path(run_dir).absolute().resolve()
    fd = _HELD.pop(key, None)
    if fd is None:
        return
    os.environ[LOCKS_ENV] = json.dumps([e for e in _env_locks() if e != [os.getpid(), str(key)]])
    if fd >= 0:
        try:
            os.ftruncate(fd, 0)  # the file stays (unlinking a flock'ed file races with the next taker)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    else:
        (key / LOCK_FILE).unlink(missing_ok=True)


@atexit.register
def _release_all() -> None:
    for key in list(_HELD):
        release_run_dir(key)


def holds_lock(run_dir: Path) -> bool:
    """Whether this process holds ``run_dir``'s lock."""
    return Path(run_dir).absolute().resolve() in _HELD


def _held_by_parent(key: Path) -> bool:
    """Whether the process that started this one holds ``key``'s lock (then this is a worker of that run)."""
    parent = os.getppid()
    return [parent, str(key)] in _env_locks() and _holder(key / LOCK_FILE).get("pid") == parent


def _env_locks() -> list[list]:
    try:
        entries = json.loads(os.environ.get(LOCKS_ENV) or "[]")
    except ValueError:
        return []
    return [e for e in entries if isinstance(e, list) and len(e) == 2] if isinstance(entries, list) else []


def _command() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv and sys.argv[0] else ""


def _holder(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _stale(path: Path, holder: dict[str, Any]) -> bool:
    """A pid file whose process is gone (or, unreadable, older than a few seconds: its writer died mid-write)."""
    pid = holder.get("pid")
    if not isinstance(pid, int):
        try:
            return datetime.now().timestamp() - path.stat().st_mtime > 10
        except OSError:
            return True
    return not _pid_alive(pid)


def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would send CTRL_C_EVENT there
        import ctypes

        handle = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return False
        code = ctypes.c_ulong()
        ctypes.windll.kernel32.GetExitCodeProcess(handle, ctypes.byref(code))
        ctypes.windll.kernel32.CloseHandle(handle)
        return code.value == 259  # STILL_ACTIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _busy(run_dir: Path, holder: dict[str, Any]) -> str:
    from paperzoo.context import hint

    who = f"pid {holder['pid']}" if isinstance(holder.get("pid"), int) else "another process"
    if holder.get("host"):
        who += f" on {holder['host']}"
    if holder.get("command"):
        who += f" ({holder['command']})"
    if holder.get("since"):
        who += f", running since {holder['since']}"
    return (f"{run_dir} is in use by another run: {who}; wait for it to finish, or "
            f"{hint('give another --out', 'write this run to another folder')}")
