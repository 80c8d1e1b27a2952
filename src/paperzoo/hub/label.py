"""The ``/label`` page set: an expert runs an Interactive Weak Supervision session in the browser.

Start a session on a data set, judge one candidate LF at a time (its n-gram, polarity, coverage, example documents
with the n-gram highlighted) on the five-level scale or skip it, undo, watch the progress (queries so far and the
label model's quality on the data set's labelled test split), stop and resume later, export the accepted LFs and
the final labels. Keys: 1-5 answer, s skip, u undo (``static/label.js``).

Where things live:

* a session is ``<hub home>/label/<user id>/<session id>.iws.json`` plus the IWS core's sidecars (``.lfs.npz``: the
  candidate LFs and fingerprints, ``.model.safetensors``: the model of the expert), saved after every answer, skip
  and undo by :class:`~paperzoo.papers.iws.IWSSession`. Only its owner's folder is ever looked in, so another
  user's session id answers 404 like any missing one.
* the candidate LFs, fingerprints and held-out LF outputs of a data set are built once per process, in a
  background thread while the start page waits (:func:`ready`, :func:`prepared`), and shared by every session
  started on it; open sessions stay in memory (:data:`_open`, the most recent :data:`OPEN_MAX`), so answering
  costs one refit of the ensemble and one acquisition, not a reload.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from .auth import verify_csrf
from .deps import not_found, page, require_user
from .models import User

router = APIRouter(include_in_schema=False)
CSRF = [Depends(verify_csrf)]

# the data sets the IWS core reads (paperzoo.papers.iws.recipe.load_split), the first is the default
DATASETS: dict[str, str] = {"youtube": "YouTube spam", "sms": "SMS spam", "imdb": "IMDB movie reviews",
                            "agnews": "AG News"}
ACQUISITIONS = {"lse": "level set estimation (LSE)", "as": "active search", "random": "random"}
KEYS = ("1", "2", "3", "4", "5")  # answer keys, in the order of paperzoo.papers.iws.LEVELS
HELDOUT_MAX = 2000  # held-out documents the quality estimate uses (the test split's first ones)
MAX_BUDGET = 1000
OPEN_MAX = 32
SID = re.compile(r"^[0-9a-f]{16}$")
EXPORTS = {"lfs": "export_lfs", "labels": "export_labels"}


# ----------------------------------------------------------------------------------------------- data sets
@dataclass(eq=False)
class Prepared:
    """A data set ready for sessions: training texts, candidate LFs and fingerprints, held-out LF outputs."""

    name: str
    texts: list[str]
    lfs: Any  # CandidateLFs
    fps: Any  # (LFs, 150) float32
    heldout: tuple[Any, Any]  # (held-out LF outputs, labels)
    seeds: tuple[tuple[str, str], ...]  # the reproduction's seed LFs, offered as the default


_texts: dict[str, list[str]] = {}
_prepared: dict[str, Prepared] = {}
_data_lock = threading.Lock()
_name_locks: dict[str, threading.Lock] = {}


def _split(name: str):
    from paperzoo.data.store import DataNotFoundError
    from paperzoo.papers.iws.recipe import load_split

    try:
        return load_split(name)
    except DataNotFoundError as e:
        raise HTTPException(503, f"data set {DATASETS[name]} is not on this machine: {e}") from e


def _lock_for(name: str) -> threading.Lock:
    with _data_lock:
        return _name_locks.setdefault(name, threading.Lock())


def training_texts(name: str) -> list[str]:
    """The training documents of data set ``name`` (what a saved session is resumed on), read once a process."""
    with _lock_for(name):
        if name not in _texts:
            _texts[name] = list(_split(name)[0].texts)
        return _texts[name]


def prepared(name: str) -> Prepared:
    """Data set ``name`` with its candidate LFs and fingerprints, built on first use and kept for the process."""
    if name not in DATASETS:
        raise HTTPException(400, f"unknown data set {name!r}; valid: {', '.join(DATASETS)}")
    texts = training_texts(name)
    with _lock_for(name):
        if name not in _prepared:
            import numpy as np

            from paperzoo.papers.iws import fingerprints, generate_lfs
            from paperzoo.papers.iws.recipe import DATASETS as SPECS

            train, test = _split(name)
            lfs = generate_lfs(texts, train.classes)
            fps = fingerprints(lfs, 150)
            held = (lfs.outputs(lfs.fire(test.texts[:HELDOUT_MAX])), np.asarray(test.labels[:HELDOUT_MAX]))
            _prepared[name] = Prepared(name, texts, lfs, fps, held, SPECS[name].seeds if name in SPECS else ())
    warm_up()
    return _prepared[name]


_builds: dict[str, threading.Thread] = {}
_build_errors: dict[str, str] = {}


def ready(name: str) -> bool:
    """Whether data set ``name`` is prepared; if not, build it in a background thread (one per data set) so that the
    start request answers at once (IMDB's LFs and fingerprints take a while) and the page asks again."""
    if name in _prepared:
        return True
    training_texts(name)  # a missing data set fails here, at once
    with _data_lock:
        if name in _build_errors:
            raise HTTPException(500, f"building the candidate LFs of {DATASETS[name]} failed: "
                                     f"{_build_errors.pop(name)}")
        t = _builds.get(name)
        if t is None or not t.is_alive():
            t = _builds[name] = threading.Thread(target=_build, args=(name,), name=f"label-prepare-{name}",
                                                 daemon=True)
            t.start()
    return False


def _build(name: str) -> None:
    try:
        prepared(name)
    except Exception as e:  # reported to the next start request (ready) instead of dying in the thread
        _build_errors[name] = str(getattr(e, "detail", None) or e)


_warm = threading.Event()


def warm_up() -> None:
    """One throwaway fit of the model of the expert, once a process: PyTorch's first fit costs ~1.5 s more than the
    next ones (here), which would otherwise land on the expert's first answer after the start-up queries."""
    if _warm.is_set():
        return
    import numpy as np

    from paperzoo.papers.iws import EnsembleConfig, ExpertModel

    x = np.random.default_rng(0).normal(size=(8, 150)).astype(np.float32)
    y = np.arange(8, dtype=np.float32) % 2
    ExpertModel(150, 1, EnsembleConfig(), 0).fit(x, y, np.ones(8, np.float32), np.zeros(8, np.int64), seed=0)
    _warm.set()


# ----------------------------------------------------------------------------------------------- sessions
@dataclass(eq=False)
class Open:
    """An open session: ``lock`` guards the session, ``quality_lock`` its held-out estimate (cached per state)."""

    session: Any  # IWSSession
    lock: threading.Lock = field(default_factory=threading.Lock)
    quality_lock: threading.Lock = field(default_factory=threading.Lock)
    quality: tuple[tuple, dict | None] | None = None  # (the state's events, the estimate)


_open: OrderedDict[str, Open] = OrderedDict()
_open_lock = threading.Lock()
_load_lock = threading.Lock()


def folder(request: Request, user: User) -> Path:
    return Path(request.app.state.settings.home) / "label" / str(int(user.id))


def session_path(request: Request, user: User, sid: str) -> Path:
    """The file of ``user``'s session ``sid``; 404 for a malformed id or one that is not this user's."""
    if not SID.match(sid):
        raise not_found("labelling session")
    path = folder(request, user) / f"{sid}.iws.json"
    if not path.is_file():
        raise not_found("labelling session")
    return path


def _remember(path: Path, session) -> Open:
    with _open_lock:
        o = _open[str(path)] = Open(session)
        _open.move_to_end(str(path))
        while len(_open) > OPEN_MAX:
            _open.popitem(last=False)
        return o


def _lookup(path: Path) -> Open | None:
    with _open_lock:
        o = _open.get(str(path))
        if o is not None:
            _open.move_to_end(str(path))
        return o


def open_session(request: Request, user: User, sid: str) -> Open:
    """``user``'s session ``sid``: from memory, else resumed from its files."""
    import json

    from paperzoo.papers.iws import IWSSession

    path = session_path(request, user, sid)
    if (o := _lookup(path)) is not None:
        return o
    with _load_lock:  # two requests on a session that is not open yet must not load two copies of it
        if (o := _lookup(path)) is not None:
            return o
        name = json.loads(path.read_text())["dataset"]
        if name not in DATASETS:
            raise HTTPException(400, f"session {sid} is on data set {name!r}, which the labelling pages do not serve")
        session = IWSSession.load(path, training_texts(name))
        warm_up()
        return _remember(path, session)


def summaries(request: Request, user: User) -> list[dict[str, Any]]:
    """The user's sessions, newest first: id, data set, answers, budget, finished, last change."""
    import json

    out = []
    d = folder(request, user)
    for path in d.glob("*.iws.json") if d.is_dir() else ():
        state = json.loads(path.read_text())
        n = sum(e["type"] == "answer" for e in state["events"])
        out.append({"sid": path.name.removesuffix(".iws.json"), "dataset": DATASETS.get(state["dataset"], "?"),
                    "answers": n, "budget": state["config"]["budget"], "done": state["pending"] is None,
                    "changed": datetime.fromtimestamp(path.stat().st_mtime, UTC)})
    return sorted(out, key=lambda r: r["changed"], reverse=True)


def heldout_quality(o: Open) -> dict[str, Any] | None:
    """The label model's quality on the held-out set for the session's answers now: what
    ``IWSSession.progress(quality=True)["heldout"]`` computes, split so that only choosing the final set holds the
    session's lock and the label-model fit (seconds on AG News) never delays the next answer; cached per state."""
    import numpy as np
    import scipy.sparse as sp

    from paperzoo.papers.iws.end_model import scores
    from paperzoo.papers.iws.label_model import fit_label_model

    with o.quality_lock:
        with o.lock:
            s = o.session
            state = tuple((e["type"], e["lf"], e.get("level")) for e in s.events)
            if s.heldout is None or (o.quality is not None and o.quality[0] == state):
                return o.quality[1] if s.heldout is not None else None
            chosen = s.final_lfs()
            votes = s.lfs.outputs(columns=chosen)
            (hv, hy), n, k, c, answers = s.heldout, s.lfs.n_docs, s.lfs.n_classes, s.config, s.n_answers
        both = sp.vstack([votes, sp.csr_matrix(hv)[:, chosen]]).tocsr()  # unsupervised: train + held-out votes
        soft = fit_label_model(both, k, c.label_model, c.seed)
        held = {"lfs": len(chosen), "coverage": float(np.mean(soft.covered[n:])), "model": soft.model,
                **scores(soft.probs[n:], hy), "answers": answers}
        o.quality = (state, held)
        return held


def segments(snippet: str, spans: list[tuple[int, int]]) -> list[tuple[str, bool]]:
    """``snippet`` cut at the highlight ``spans``: ``[(text, highlighted), ...]`` (the template escapes each)."""
    out, at = [], 0
    for a, b in sorted(spans):
        if a < at:  # overlapping spans: keep the first
            continue
        if a > at:
            out.append((snippet[at:a], False))
        out.append((snippet[a:b], True))
        at = b
    if at < len(snippet):
        out.append((snippet[at:], False))
    return out


def _view(o: Open) -> dict[str, Any]:
    from paperzoo.papers.iws import LEVELS

    s = o.session
    q = s.next_query()
    examples = []
    if q is not None:
        for e in q.examples:
            text = s.texts[e.doc]
            examples.append({"doc": e.doc, "segments": segments(e.snippet, e.spans), "before": e.offset > 0,
                             "after": e.offset + len(e.snippet) < len(text)})
    return {"query": q, "examples": examples, "progress": s.progress(), "levels": list(zip(KEYS, LEVELS, strict=True)),
            "n_docs": s.lfs.n_docs, "n_classes": s.lfs.n_classes, "can_undo": bool(s.events),
            "has_heldout": s.heldout is not None}


def _refuse(e: ValueError) -> HTTPException:
    return HTTPException(409, str(e))


# ----------------------------------------------------------------------------------------------- pages
@router.get("/label", response_class=HTMLResponse)
def index(request: Request, user: User = Depends(require_user)):
    return page(request, "label/index.html", sessions=summaries(request, user), datasets=DATASETS,
                acquisitions=ACQUISITIONS)


@router.post("/label/start", dependencies=CSRF)
def start(request: Request, user: User = Depends(require_user), dataset: str = Form(...),
          budget: int = Form(100), acquisition: str = Form("lse"), seeds: str = Form("")):
    from paperzoo.papers.iws import IWSSession, SessionConfig

    if dataset not in DATASETS:
        raise HTTPException(400, f"unknown data set {dataset!r}; valid: {', '.join(DATASETS)}")
    if not 1 <= budget <= MAX_BUDGET:
        raise HTTPException(400, f"budget must be an integer in [1, {MAX_BUDGET}] answers, got {budget}")
    if acquisition not in ACQUISITIONS:
        raise HTTPException(400, f"unknown acquisition {acquisition!r}; valid: {', '.join(ACQUISITIONS)}")
    if not ready(dataset):
        form = {"dataset": dataset, "budget": budget, "acquisition": acquisition, "seeds": seeds}
        return page(request, "label/preparing.html", status_code=202, form=form, dataset_name=DATASETS[dataset])
    data = prepared(dataset)
    try:
        pairs = data.seeds if not seeds.strip() else parse_seeds(seeds, data.lfs.classes)
        seed_lfs = [data.lfs.find(term, label) for term, label in pairs]
    except ValueError as e:
        raise HTTPException(400, f"seed LFs: {e}") from e
    sid = secrets.token_hex(8)
    path = folder(request, user) / f"{sid}.iws.json"
    s = IWSSession.start(data.texts, data.lfs, data.fps, SessionConfig(budget=budget, acquisition=acquisition),
                         seed_lfs, dataset, path, data.heldout)
    _remember(path, s)
    return RedirectResponse(f"/label/{sid}", status_code=303)


@router.get("/label/{sid}", response_class=HTMLResponse)
def show(request: Request, sid: str, user: User = Depends(require_user)):
    o = open_session(request, user, sid)
    with o.lock:
        view = _view(o)
    return page(request, "label/session.html", sid=sid, dataset=DATASETS[o.session.dataset], **view)


@router.get("/label/{sid}/quality", response_class=HTMLResponse)
def quality(request: Request, sid: str, user: User = Depends(require_user)):
    """The label model's quality on the held-out set now (a fragment the session page fetches after it shows)."""
    return page(request, "label/_quality.html", held=heldout_quality(open_session(request, user, sid)))


@router.post("/label/{sid}/answer", dependencies=CSRF)
def answer(request: Request, sid: str, user: User = Depends(require_user), level: int = Form(...),
           lf: int = Form(...)):
    from paperzoo.papers.iws import LEVELS

    o = open_session(request, user, sid)
    if not 1 <= level <= len(LEVELS):
        raise HTTPException(400, f"answer must be an integer in [1, {len(LEVELS)}] ({', '.join(LEVELS)}), "
                                 f"got {level}")
    with o.lock:
        try:
            o.session.answer(list(LEVELS)[level - 1], lf=lf)
        except ValueError as e:
            raise _refuse(e) from e
    return RedirectResponse(f"/label/{sid}", status_code=303)


@router.post("/label/{sid}/skip", dependencies=CSRF)
def skip(request: Request, sid: str, user: User = Depends(require_user), lf: int = Form(...)):
    o = open_session(request, user, sid)
    with o.lock:
        try:
            o.session.skip(lf=lf)
        except ValueError as e:
            raise _refuse(e) from e
    return RedirectResponse(f"/label/{sid}", status_code=303)


@router.post("/label/{sid}/undo", dependencies=CSRF)
def undo(request: Request, sid: str, user: User = Depends(require_user)):
    o = open_session(request, user, sid)
    with o.lock:
        if o.session.undo() is None:
            raise HTTPException(409, "nothing to undo: no answer or skip yet")
    return RedirectResponse(f"/label/{sid}", status_code=303)


@router.post("/label/{sid}/delete", dependencies=CSRF)
def delete(request: Request, sid: str, user: User = Depends(require_user)):
    path = session_path(request, user, sid)
    with _open_lock:
        _open.pop(str(path), None)
    for p in [*path.parent.glob(f"{sid}.iws.json*"), *path.parent.glob(f"exports/{sid}-*")]:
        p.unlink()  # the state, its sidecars, its exports
    return RedirectResponse("/label", status_code=303)


@router.get("/label/{sid}/export/{what}.{fmt}")
def export(request: Request, sid: str, what: str, fmt: str, user: User = Depends(require_user)):
    """The accepted LFs (``lfs``) or the final soft labels of the training documents (``labels``), CSV or JSON."""
    if what not in EXPORTS or fmt not in ("csv", "json"):
        raise not_found("export")
    o = open_session(request, user, sid)
    out = session_path(request, user, sid).parent / "exports" / f"{sid}-{what}.{fmt}"
    with o.lock:
        getattr(o.session, EXPORTS[what])(out)
    media = "text/csv" if fmt == "csv" else "application/json"
    return FileResponse(out, media_type=media, filename=f"iws-{o.session.dataset}-{sid}-{what}.{fmt}")


# ----------------------------------------------------------------------------------------------- helpers
def parse_seeds(text: str, classes) -> list[tuple[str, str]]:
    """``term, class`` pairs, one a line (blank lines ignored; ``-`` alone: no seed LFs); ``ValueError`` naming
    the line otherwise."""
    out = []
    for i, line in enumerate((text or "").splitlines(), 1):
        if not line.strip() or line.strip() == "-":
            continue
        term, sep, label = line.rpartition(",")
        term, label = term.strip().lower(), label.strip()
        if not sep or not term or label not in classes:
            raise ValueError(f"line {i} must be 'term, class' with class one of {', '.join(classes)}, got "
                             f"{line.strip()!r}")
        out.append((term, label))
    return out
