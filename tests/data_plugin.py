"""pytest plugin: tests that read a real data set say which, ``@pytest.mark.data("cifar10-jpeg", ...)``.

* The data root is ``$PAPERZOO_DATA``, else the shared folder beside the checkout (``../shared/data``), else the
  library's default (``~/.cache/paperzoo``); it is exported as an absolute ``PAPERZOO_DATA`` for the session, so
  the tests, the library and subprocesses agree.
* A marked test whose sets are not all present there is skipped, and the run ends with one line naming the
  missing sets and how to get them -- unless ``CI`` is set (to anything but 0/false/no) or
  ``PAPERZOO_REQUIRE_DATA=1``: then it fails, because CI must run everything.
* Safety net: outside CI, a test that is not marked but raises :class:`~paperzoo.data.DataNotFoundError` for the
  data root is skipped the same way (and counted in that line).
* Marks are kept honest where the data is present: a test that reads a set from the data root through
  ``paperzoo.data.require`` (every reader does) without marking it fails, naming the mark to add.

Loaded by ``tests/conftest.py``; importable on its own (``-p data_plugin``) for the plugin's own tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_ACTIVE: list[dict] = []  # one state per configured session (the plugin's tests nest sessions)
_HOOKED = False
_STATE = pytest.StashKey[dict]()


def require_data() -> bool:
    """True under CI (``CI`` set, not 0/false/no) or with ``PAPERZOO_REQUIRE_DATA`` set (not 0): absence fails."""
    ci = os.environ.get("CI", "").strip().lower()
    req = os.environ.get("PAPERZOO_REQUIRE_DATA", "").strip().lower()
    return ci not in ("", "0", "false", "no") or req not in ("", "0", "false", "no")


def data_root() -> Path:
    """The folder the tests read data sets from (see the module docstring)."""
    env = os.environ.get("PAPERZOO_DATA")
    if env:
        return Path(env).expanduser().absolute()
    sibling = REPO.parent / "shared" / "data"
    if sibling.is_dir():
        return sibling.resolve()
    return Path.home() / ".cache" / "paperzoo"


def _on_audit(event: str, args: tuple) -> None:
    if event == "paperzoo.data.require" and _ACTIVE:
        _ACTIVE[-1]["required"].append(args)


def marked_sets(item: pytest.Item) -> list[str]:
    """The data sets the ``data`` marks of ``item`` name."""
    return [n for m in item.iter_markers("data") for n in m.args]


def pytest_configure(config: pytest.Config) -> None:
    global _HOOKED
    config.addinivalue_line("markers", "data(*names): reads these real data sets (paperzoo data list); skipped when "
                                       "one is absent, failed instead under CI or PAPERZOO_REQUIRE_DATA=1")
    root = data_root()
    before = os.environ.get("PAPERZOO_DATA")
    os.environ["PAPERZOO_DATA"] = str(root)

    def restore() -> None:
        if before is None:
            os.environ.pop("PAPERZOO_DATA", None)
        else:
            os.environ["PAPERZOO_DATA"] = before
        if _ACTIVE and _ACTIVE[-1] is state:
            _ACTIVE.pop()

    state = {"root": root, "missing": set(), "skipped": 0, "unmarked": 0, "required": []}
    _ACTIVE.append(state)
    config.stash[_STATE] = state
    config.add_cleanup(restore)
    if not _HOOKED:
        sys.addaudithook(_on_audit)
        _HOOKED = True



@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    state = item.config.stash[_STATE]
    state["required"].clear()
    names = marked_sets(item)
    if not names:
        return
    from paperzoo.data import DATASETS, is_present

    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        pytest.fail(f"@pytest.mark.data names unknown data set(s) {unknown}; valid: {', '.join(sorted(DATASETS))}",
                    pytrace=False)
    missing = [n for n in dict.fromkeys(names) if not is_present(n, state["root"])]
    if not missing:
        return
    if require_data():
        pytest.fail(f"data set(s) {', '.join(missing)} not under {state['root']}, and CI/PAPERZOO_REQUIRE_DATA says "
                    f"every test must run: set PAPERZOO_DATA or `paperzoo data fetch NAME`", pytrace=False)
    state["missing"].update(missing)
    state["skipped"] += 1
    pytest.skip(f"data set(s) not under {state['root']}: {', '.join(missing)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield
    state = item.config.stash[_STATE]
    root = str(state["root"].resolve())
    used = {name for name, folder in state["required"] if str(Path(folder).resolve().parent) == root}
    unmarked = sorted(used - set(marked_sets(item)))
    if unmarked:
        pytest.fail(f"this test reads data set(s) {', '.join(unmarked)} from {root} without saying so: add "
                    f"@pytest.mark.data({', '.join(repr(n) for n in unmarked)})", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    rep = yield
    if not (rep.failed and call.excinfo is not None) or require_data():
        return rep
    from paperzoo.data import DataNotFoundError

    exc = call.excinfo.value
    if isinstance(exc, DataNotFoundError) and exc.name and exc.folder:
        state = item.config.stash[_STATE]
        if Path(exc.folder).resolve().parent == state["root"].resolve():  # the data root, not a test's own folder
            state["missing"].add(exc.name)
            state["skipped"] += 1
            state["unmarked"] += 1
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0,
                            f"Skipped: data set {exc.name} not under {state['root']} (unmarked test: add "
                            f"@pytest.mark.data({exc.name!r}))")
    return rep


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if not state or not state["missing"]:
        return
    unmarked = f" ({state['unmarked']} unmarked: add @pytest.mark.data)" if state["unmarked"] else ""
    terminalreporter.write_line(
        f"data: {state['skipped']} test(s) skipped{unmarked}, data set(s) not under {state['root']}: "
        f"{', '.join(sorted(state['missing']))}; get each with `paperzoo data fetch NAME` (or set PAPERZOO_DATA to a "
        f"folder that holds them); with CI or PAPERZOO_REQUIRE_DATA=1 they fail instead", yellow=True)
