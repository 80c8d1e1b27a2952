"""``metrics.jsonl`` (one JSON object per log/eval event) and the progress display.

Each line has ``event`` ("train" or "eval"), ``step`` and ``time`` (wall seconds since the run began,
summed over resumed sessions). Train lines add ``loss`` (mean over the steps since the previous line),
``lr`` (first group), ``samples_per_s``, ``epoch`` and the ``loss_fn`` metrics; eval lines add the
``eval_fn`` metrics.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # JSON has no NaN/inf
    return v


def say(msg: str) -> None:
    """Print a message for the user on stderr."""
    print(msg, file=sys.stderr, flush=True)


class MetricsLog:
    """Appends JSON lines to ``path`` (or does nothing when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike | None):
        self.path = Path(path) if path is not None else None

    def truncate_after(self, step: int) -> None:
        """Drop lines with ``step > step`` (left by a session that ran past its last checkpoint)."""
        if self.path is None or not self.path.exists():
            return
        keep = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in keep))
        os.replace(tmp, self.path)

    def write(self, record: dict) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")


class ProgressDisplay:
    """A rich progress bar with loss and throughput on a TTY; plain lines per log event otherwise."""

    def __init__(self, enabled: bool, total: int, start: int):
        self.enabled = enabled
        self.bar = None
        if enabled and sys.stdout.isatty():
            self.bar = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]:.4f}"),
                TextColumn("{task.fields[sps]:,.0f} samples/s"),
                TimeRemainingColumn(),
            )
            self.task = self.bar.add_task("train", total=total, completed=start, loss=float("nan"), sps=0.0)
            self.bar.start()

    def step(self, step: int, loss: float, sps: float) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=step, loss=loss, sps=sps)

    def log(self, record: dict) -> None:
        if self.enabled and self.bar is None:
            parts = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record.items()]
            print(" ".join(parts), flush=True)
        elif self.bar is not None and record.get("event") == "eval":
            self.bar.console.print("eval " + " ".join(f"{k}={v:.4g}" for k, v in record.items()
                                                      if isinstance(v, float) and k != "time"))

    def say(self, msg: str) -> None:
        """A message for the user: above the bar, or on stderr."""
        if self.bar is not None:
            self.bar.console.print(msg)
        else:
            say(msg)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
