"""The recipe skeleton every reproduction is built on: presets, named jobs, cached job results, verdict rules.

A recipe reads like this (the whole of ``run()`` is what is specific to its claim)::

    PRESETS = {"tiny": Preset(model=..., train=TrainConfig(...), seeds=2),     # tests: seconds
               "small": Preset(model=..., train=TrainConfig(...), seeds=3)}    # the committed laptop run

    def train_job(job: Job, out: Path, resume: bool, progress: bool, data) -> dict:
        ...  # train job.variant with job.seed in ``out``; return a JSON-ready summary

    def run(preset=None, seeds=None, out=None, resume=False, progress=True, workers=1, precision=None) -> Path:
        name, p, run_dir = start("mypaper", PRESETS, preset, seeds, out, precision=precision)
        jobs = [Job(v, s, cfg) for s in range(p.seeds) for v, cfg in variants(p).items()]
        res = run_jobs(train_job, jobs, run_dir, resume=resume, workers=workers, progress=progress, args=(data,))
        v = Beats(higher_is_better=True).judge(res.values("ours", "acc"), res.values("baseline", "acc"),
                                               "ours", "baseline")
        write_result(run_dir, "mypaper", CLAIM, {...}, v, details={...})

Conventions shared by every recipe:

* Presets: ``tiny`` for tests (seconds on CPU; its report says it is a smoke test), ``small`` for the committed
  laptop reproduction, and the paper's own sizes by the paper's names.
* A job's folder is ``<run_dir>/<variant>/seed-<seed>/`` and its finished result is ``job.json`` there; with
  ``resume`` a finished job is read back instead of recomputed, so ``--resume`` and ``--workers`` behave the same
  in every recipe. The training engine's checkpoints in the same folder resume an unfinished job exactly.
* :func:`start` locks the run folder (a second run into it fails at once, naming the first); SIGINT/SIGTERM
  checkpoints the running jobs and starts no other (``paperzoo.train.parallel``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paperzoo.report.serial import dumps, write_text_atomic
from paperzoo.report.verdict import AtLeast, AtMost, Beats, NonInferior, Paired, Verdict, all_of, smoke
from paperzoo.train.config import TrainConfig
from paperzoo.train.distributed import resolve_device
from paperzoo.train.precision import PRECISIONS, resolve_precision

JOB_FILE = "job.json"
__all__ = ["AtLeast", "AtMost", "Beats", "Job", "NonInferior", "Paired", "Preset", "Results", "Verdict", "all_of",
           "cached", "compiling", "discard_unstarted", "pick", "run_jobs", "smoke", "start", "started_runs"]


# ----------------------------------------------------------------------------------------------------- presets
@dataclass(frozen=True, kw_only=True)
class Preset:
    """One scale of a recipe: the model config(s), the training config and the number of seeds.

    Recipes subclass it (``@dataclass(frozen=True, kw_only=True)``) to add what their data or protocol needs, e.g.
    ``subset`` or ``tasks``. ``model`` is a model config dataclass, or a mapping ``variant -> config``.
    """

    model: Any
    train: TrainConfig
    seeds: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.train, TrainConfig):
            raise ValueError(f"Preset.train: expected a TrainConfig, got {type(self.train).__name__}")
        _check_seeds(self.seeds, "Preset.seeds")


_COMPILE: ContextVar[bool | None] = ContextVar("paperzoo_recipe_compile", default=None)


@contextlib.contextmanager
def compiling(on: bool = True) -> Iterator[None]:
    """Within the block, :func:`pick` (so :func:`start`) sets ``compile=on`` in every training config of the presets
    it picks, unless given ``compile`` itself: how ``paperzoo reproduce --compile`` reaches every recipe through the
    skeleton, whatever its ``run()`` forwards. The training engine then runs ``loss_fn`` on ``torch.compile(model)``
    (inductor); checkpoints and resume are unchanged (:class:`paperzoo.train.TrainConfig`)."""
    if not isinstance(on, bool):
        raise ValueError(f"compiling: expected a bool, got {on!r}")
    token = _COMPILE.set(on)
    try:
        yield
    finally:
        _COMPILE.reset(token)


def pick(presets: Mapping[str, Preset], name: str | None, recipe: str, seeds: int | None = None,
         default: str = "small", precision: str | None = None, compile: bool | None = None) -> tuple[str, Preset]:
    """``(name, preset)``: ``presets[name or default]`` with ``seeds``, ``precision`` and ``compile`` replaced when
    given (``precision`` and ``compile`` in every training config of the preset that has the field: its ``train``
    and any other, such as a fine-tuning config). ``compile`` defaults to the one set by :func:`compiling`.

    An unknown name raises a ValueError listing the valid ones.
    """
    name = name or default
    if name not in presets:
        raise ValueError(f"unknown preset {name!r} for {recipe}; valid: {', '.join(presets)}")
    p = presets[name]
    if seeds is not None:
        _check_seeds(seeds, "seeds")
        p = dataclasses.replace(p, seeds=seeds)
    if precision is not None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        p = _in_train_configs(p, "precision", precision)
    compile = compile if compile is not None else _COMPILE.get()
    if compile is not None:
        if not isinstance(compile, bool):
            raise ValueError(f"compile: expected a bool, got {compile!r}")
        p = _in_train_configs(p, "compile", compile)
    return name, p


def _in_train_configs(p: Preset, field: str, value: Any) -> Preset:
    """``p`` with ``field = value`` in each of its fields that is a dataclass with that field."""
    return dataclasses.replace(p, **{f.name: dataclasses.replace(v, **{field: value})
                                     for f in dataclasses.fields(p) if _has_field(v := getattr(p, f.name), field)})


def _has_field(v: Any, field: str) -> bool:
    return dataclasses.is_dataclass(v) and not isinstance(v, type) and field in {f.name for f in dataclasses.fields(v)}


def start(paper: str, presets: Mapping[str, Preset], preset: str | None, seeds: int | None, out: Path | None,
          recipe: str | None = None, default: str = "small", precision: str | None = None,
          compile: bool | None = None) -> tuple[str, Preset, Path]:
    """Pick the preset, make the run folder, lock it and write its ``config.json``: ``(name, preset, run_dir)``.

    The lock (``run_dir/.lock``, see :func:`paperzoo.report.run.lock_run_dir`) is held until the run's result is
    written or this process ends: a second run into the same folder fails at once, naming the first.

    ``config.json`` holds ``{"preset": name, **preset, "precision": {"used", "requested", "reason"}}`` (the
    training precision resolved on this machine); reusing a folder made with another config, or another resolved
    precision, is refused (see :func:`paperzoo.report.write_config`).
    """
    from paperzoo.report import new_run_dir, write_config
    from paperzoo.report.run import lock_run_dir, release_run_dir

    name, p = pick(presets, preset, recipe or paper, seeds, default, precision, compile)
    used = resolve_precision(p.train.precision, resolve_device(p.train.device))
    existed = out is not None and Path(out).exists()
    run_dir = new_run_dir(paper, out)
    lock_run_dir(run_dir)  # before anything is written: a second run into this folder stops here
    _STARTED.append((run_dir, not existed))
    try:
        write_config(run_dir, {"preset": name, **{f.name: getattr(p, f.name) for f in dataclasses.fields(p)},
                               "precision": used.to_dict()}, seeds=range(p.seeds))
    except BaseException:
        if not discard_unstarted(run_dir):
            release_run_dir(run_dir)
        raise
    return name, p, run_dir


_STARTED: list[tuple[Path, bool]] = []  # (run folder, made by this process) for every start() in this process
_UNSTARTED_FILES = {"config.json", ".lock"}


def started_runs() -> list[Path]:
    """The run folders :func:`start` opened in this process, oldest first."""
    return [d for d, _ in _STARTED]


def discard_unstarted(run_dir: Path | None = None) -> bool:
    """Remove ``run_dir`` (default: the newest run :func:`start` opened in this process) if this process made it and
    it holds nothing but ``config.json``, the lock and empty job folders: a start that failed before any job did
    anything (missing data, a bad option) leaves no run behind to hide the last real result. Returns whether it
    was removed; the folder's lock is released either way when it was.
    """
    from paperzoo.report.run import holds_lock, release_run_dir

    made = dict(_STARTED)
    if run_dir is None:
        if not _STARTED:
            return False
        run_dir = _STARTED[-1][0]
    run_dir = Path(run_dir)
    if not made.get(run_dir) or not holds_lock(run_dir) or not run_dir.is_dir():
        return False
    files = [f for f in run_dir.rglob("*") if not f.is_dir()]
    if any(f.parent != run_dir or f.name not in _UNSTARTED_FILES for f in files):
        return False
    release_run_dir(run_dir)
    for f in files:
        f.unlink(missing_ok=True)
    for d in sorted((d for d in run_dir.rglob("*") if d.is_dir()), key=lambda d: len(d.parts), reverse=True):
        d.rmdir()
    try:
        run_dir.rmdir()
    except OSError:  # something appeared meanwhile: keep it
        return False
    _STARTED[:] = [(d, m) for d, m in _STARTED if d != run_dir]
    return True


# ----------------------------------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class Job:
    """One training run of a recipe: a ``variant`` name, a ``seed`` and the ``config`` that makes it."""

    variant: str
    seed: int
    config: Any = None

    def folder(self, run_dir: Path) -> Path:
        """``<run_dir>/<variant>/seed-<seed>``."""
        return Path(run_dir) / self.variant / f"seed-{self.seed}"

    def __str__(self) -> str:
        return f"{self.variant} seed {self.seed}"


def cached(folder: Path, resume: bool, compute: Callable[[], Any]) -> Any:
    """``compute()``, stored in ``folder/job.json``; with ``resume``, a stored result is returned instead.

    The file is written atomically, so a crash never leaves a half-written result that a resume would trust.
    """
    folder = Path(folder)
    path = folder / JOB_FILE
    if resume and path.is_file():
        try:
            return json.loads(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path} is damaged ({e}); delete it to recompute this job") from e
    result = compute()
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, dumps(result))
    return json.loads(path.read_text())  # what a resume would read back: the same types either way


def _run_one(fn: Callable[..., Any], job: Job, run_dir: Path, resume: bool, progress: bool, args: tuple) -> Any:
    out = job.folder(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    return cached(out, resume, lambda: fn(job, out, resume, progress, *args))


class Results:
    """The results of a recipe's jobs, by variant and seed."""

    def __init__(self, jobs: Sequence[Job], results: Sequence[Any]) -> None:
        self.jobs = list(jobs)
        self._by: dict[str, dict[int, Any]] = {}
        for job, r in zip(self.jobs, results, strict=True):
            self._by.setdefault(job.variant, {})[job.seed] = r

    def __getitem__(self, key: tuple[str, int]) -> Any:
        variant, seed = key
        return self._by[variant][seed]

    def __contains__(self, variant: str) -> bool:
        return variant in self._by

    @property
    def variants(self) -> list[str]:
        return list(self._by)

    def seeds(self, variant: str) -> list[int]:
        return sorted(self._by[variant])

    def of(self, variant: str) -> list[Any]:
        """Every seed's result of ``variant``, by seed."""
        return [self._by[variant][s] for s in self.seeds(variant)]

    def values(self, variant: str, key: str) -> list[float]:
        """``result[key]`` of every seed of ``variant``, by seed."""
        return [r[key] for r in self.of(variant)]


def run_jobs(fn: Callable[..., Any], jobs: Iterable[Job], run_dir: Path, *, resume: bool = False, workers: int = 1,
             progress: bool = True, args: tuple = ()) -> Results:
    """Run ``fn(job, folder, resume, progress, *args)`` for every job, each cached in its folder's ``job.json``.

    ``workers > 1`` runs that many jobs at once in worker processes (``paperzoo.train.parallel``; ``fn`` and
    ``args`` must then be picklable, and per-job progress bars are off).
    """
    from paperzoo.train.parallel import run_jobs as parallel

    jobs = list(jobs)
    seen = {(j.variant, j.seed) for j in jobs}
    if len(seen) != len(jobs):
        raise ValueError("jobs must have distinct (variant, seed) pairs: two would write into one folder")
    show = progress and workers == 1
    work = [(fn, j, Path(run_dir), resume, show, tuple(args)) for j in jobs]
    return Results(jobs, parallel(_run_one, work, workers, label=lambda w: str(w[1])))


# ----------------------------------------------------------------------------------------------------- checks
def _check_seeds(seeds: Any, what: str) -> None:
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"{what}: expected an int >= 1, got {seeds!r}")
