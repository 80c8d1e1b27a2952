"""Ingestion: arXiv metadata, social mentions, the paperzoo registry and its reports.

Every ingester is idempotent (the same input twice changes nothing; a newer arXiv version updates the row),
reports malformed records (count and the first examples) and skips them, and writes one transaction per batch, so
an error mid-batch leaves nothing of that batch behind.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

MAX_EXAMPLES = 5


@dataclass
class IngestReport:
    kind: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    malformed: int = 0
    examples: list[str] = field(default_factory=list)  # the first malformed records, with the reason

    def bad(self, where: str, reason: str) -> None:
        self.malformed += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{where}: {reason}")

    def summary(self) -> str:
        line = (f"{self.kind}: {self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
                f"{self.malformed} malformed (skipped)")
        return "\n".join([line, *(f"  {e}" for e in self.examples)])


def read_source(source: str | Path, timeout: float = 30.0) -> str:
    """The text of a local file or an http(s) URL."""
    s = str(source)
    if s.startswith(("http://", "https://")):
        req = urllib.request.Request(s, headers={"User-Agent": "paperzoo-hub (+https://arxiv.org/help/api)"})
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 (http/https only, checked above)
            return r.read().decode("utf-8")
    path = Path(s)
    if not path.is_file():
        raise ValueError(f"no such file: {path} (expected a file path or an http(s) URL)")
    return path.read_text(encoding="utf-8")


def batched(items: list, size: int):
    for i in range(0, len(items), size):
        yield items[i: i + size]
