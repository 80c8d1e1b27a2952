"""Who drives this process, the ``paperzoo`` command line or Python code, so that messages name what the user types.

The CLI entry point sets ``$PAPERZOO_CLI`` for the duration of a command (worker processes inherit it); a message
that tells the user how to continue picks its wording with :func:`hint`::

    say(f"stopped; continue with {hint('--resume and the same --out', 'fit(resume=True)')}")
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "PAPERZOO_CLI"


def from_cli() -> bool:
    """Whether this process (or the process that spawned it) runs a ``paperzoo`` command."""
    return os.environ.get(ENV) == "1"


def hint(cli: str, api: str) -> str:
    """``cli`` when run from the command line, else ``api``: the same advice in the words the user types."""
    return cli if from_cli() else api


@contextmanager
def cli_context() -> Iterator[None]:
    """Mark this process (and the processes it starts) as driven by the CLI; the old value is restored after."""
    old = os.environ.get(ENV)
    os.environ[ENV] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old
