"""Turn configs and results (dataclasses, Paths, tuples, numpy/torch scalars) into strict JSON."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import tempfile
from pathlib import Path, PurePath
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """A JSON-safe copy of ``obj``: dataclasses become dicts, Paths strings, tuples/sets lists, NaN/inf ``None``."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return to_jsonable(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        return [to_jsonable(v) for v in items]
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays/scalars, torch tensors
        return to_jsonable(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item):
        return to_jsonable(obj.item())
    return str(obj)


def dumps(obj: Any) -> str:
    """Strict (no NaN) indented JSON of :func:`to_jsonable` ``(obj)``."""
    return json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"


def write_text_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file and a rename, so readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
