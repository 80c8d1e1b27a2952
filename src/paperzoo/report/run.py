"""Run folders: ``runs/<paper>/<UTC stamp>/`` and their ``config.json``."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paperzoo.report.machine import machine_info
from paperzoo.report.serial import dumps, to_jsonable, write_text_atomic

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
STAMP_FORMAT = "%Y%m%d-%H%M%S"


def runs_root() -> Path:
    """Where run folders go: ``$PAPERZOO_RUNS``, default ``./runs``."""
    return Path(os.environ.get("PAPERZOO_RUNS") or "runs")


def utc_stamp(now: datetime | None = None) -> str:
    """A UTC time stamp ``YYYYmmdd-HHMMSS``."""
    return (now or datetime.now(UTC)).strftime(STAMP_FORMAT)


def new_run_dir(paper: str, out: Path | None = None) -> Path:
    """Create and return ``out`` if given, else ``<runs root>/<paper>/<UTC stamp>/`` (made unique with a suffix).

    The path is absolute, so ``run_dir / "plot.png"`` names the same file whatever helper receives it.
    """
    if not isinstance(paper, str) or not _NAME.match(paper):
        raise ValueError(f"paper must be a registered paper name such as 'electra' (letters, digits, '.', '_', '-'), "
                         f"got {paper!r}")
    if out is not None:
        out = Path(out).absolute()
        out.mkdir(parents=True, exist_ok=True)
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
    _refuse_other_config(run_dir / "config.json", doc)
    return write_text_atomic(run_dir / "config.json", dumps(doc))


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def _refuse_other_config(path: Path, doc: dict[str, Any]) -> None:
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # unreadable (a crash mid-write predates atomic writes): nothing to protect
    new = json.loads(dumps(doc))
    before = _flatten({"config": old.get("config"), "seeds": old.get("seeds")})
    after = _flatten({"config": new["config"], "seeds": new["seeds"]})
    diff = [f"{k}: {before.get(k, '<absent>')!r} -> {after.get(k, '<absent>')!r}"
            for k in sorted(before.keys() | after.keys()) if before.get(k, "<absent>") != after.get(k, "<absent>")]
    if diff:
        raise ValueError(f"{path.parent} holds runs made with a different config ({'; '.join(diff[:8])}"
                         f"{'; ...' if len(diff) > 8 else ''}); give a new --out folder, or delete this one to "
                         f"start over")
