"""The declared grid: a TOML file of variants, each the baseline config with some fields changed, validated before
any training, and the paper's Table 1 numbers the variants are compared with.

A variant's keys are :class:`~.model.ModsConfig` fields, plus ``paper`` (its Table 1 row), ``match = "params"``
(``ffn_dim`` solved so the parameter count equals the baseline's), ``layers_factor`` (``num_layers`` = the
baseline's times this, so depth variants mean the same at every size) and ``group``. A typo in a variant name, a key or
a value raises ``ValueError`` naming the valid ones, when the grid is read and when its configs are built.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .model import ModsConfig, ModsLM

__all__ = ["Grid", "Variant", "load_grid", "build_configs", "count_parameters", "match_parameters", "PAPER_TABLE",
           "PAPER_SIGNS", "DEFAULT_GRID"]

DEFAULT_GRID = Path(__file__).with_name("grid.toml")
META_KEYS = ("paper", "match", "group", "layers_factor")
MATCH_TOLERANCE = 0.02  # matched variants hold the baseline's parameter count within 2%
# set by the preset or the tokenizer, the same for every variant of a run
FIXED_FIELDS = ("vocab_size", "max_len", "objective", "mask_token_id", "special_ids")
VARIANT_FIELDS = tuple(f.name for f in dataclasses.fields(ModsConfig) if f.name not in FIXED_FIELDS)

# Narang et al. 2021, Table 1 (T5-base, C4 span corruption; SuperGLUE dev), the rows our sources state:
# (early loss at 65,536 steps, final loss at 524,288 steps, SuperGLUE). None: not in our sources.
PAPER_TABLE: dict[str, dict[str, float | None]] = {
    "Vanilla Transformer": {"early loss": 2.182, "final loss": 1.838, "downstream": 71.66},
    "RMS Norm": {"early loss": 2.167, "final loss": 1.821, "downstream": 75.45},
    "SwiGLU": {"early loss": 2.127, "final loss": 1.789, "downstream": 76.00},
    "GeGLU": {"early loss": 2.130, "final loss": 1.792, "downstream": 75.96},
    "ReGLU": {"early loss": 2.145, "final loss": 1.803, "downstream": 76.17},
    "LiGLU": {"early loss": None, "final loss": 1.798, "downstream": 75.34},
    "GLU": {"early loss": None, "final loss": 1.814, "downstream": 74.20},
    "GeLU": {"early loss": None, "final loss": 1.838, "downstream": 75.79},
    "ReZero": {"early loss": None, "final loss": 1.939, "downstream": 61.69},
    "Fixup": {"early loss": None, "final loss": 2.067, "downstream": 58.56},
    "ELU": {"early loss": None, "final loss": 1.932, "downstream": None},
    "SeLU": {"early loss": None, "final loss": 1.948, "downstream": None},
}
PAPER_BASELINE = "Vanilla Transformer"
PAPER_EARLY_LOSS_STD = 0.005  # the only run-to-run spread the paper reports (vanilla, early loss)
# Rows whose direction the paper states in words only (sec. 4): -1 lower than vanilla, +1 higher.
PAPER_SIGNS: dict[str, dict[str, int]] = {
    "Switch Transformer": {"final loss": -1},  # "lower loss ... with more parameters"
    "Funnel Transformer": {"final loss": +1, "downstream": -1},  # worse
    "Block sharing": {"final loss": +1, "downstream": -1},  # worse
}
KNOWN_ROWS = tuple(PAPER_TABLE) + tuple(PAPER_SIGNS) + (
    "Swish", "Sigmoid", "Softplus", "ReZero + LayerNorm", "ReZero + RMS Norm", "Untied embeddings",
    "Factorized Embedding")


@dataclass(frozen=True)
class Variant:
    """One grid entry: its ``changes`` to the baseline config and its metadata."""

    name: str
    changes: dict = field(default_factory=dict)
    paper: str | None = None
    match: str | None = None
    group: str = ""
    layers_factor: float | None = None


@dataclass(frozen=True)
class Grid:
    """The variants of a grid file, in file order, and the baseline's name."""

    baseline: str
    variants: dict[str, Variant]
    path: Path | None = None

    def select(self, names: tuple[str, ...] | None) -> list[str]:
        """The names to run: ``names`` (validated; the baseline is put first, added if missing), or all."""
        if names is None:
            names = tuple(self.variants)
        unknown = [n for n in names if n not in self.variants]
        if unknown:
            raise ValueError(f"unknown variant(s) {unknown} in {self.path or 'the grid'}; valid: "
                             f"{', '.join(self.variants)}")
        return [self.baseline] + [n for n in names if n != self.baseline]


def load_grid(path: str | Path = DEFAULT_GRID) -> Grid:
    """Read and validate a grid file (see the module docstring); raises ``ValueError`` on any unknown name.

    ``path``: a TOML file, or the name of one shipped beside this module (``"grid.toml"``, the default grid), so a
    run's recorded config names the grid without a machine's absolute path."""
    path = Path(path)
    if not path.is_file() and not path.is_absolute() and (DEFAULT_GRID.parent / path).is_file():
        path = DEFAULT_GRID.parent / path
    if not path.is_file():
        raise ValueError(f"grid file {path} not found (expected a TOML file like {DEFAULT_GRID})")
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"grid file {path} is not valid TOML: {e}") from e
    return parse_grid(doc, path)


def parse_grid(doc: dict, path: Path | None = None) -> Grid:
    where = path or "the grid"
    extra = set(doc) - {"baseline", "variants"}
    if extra:
        raise ValueError(f"unknown top-level key(s) {sorted(extra)} in {where}; valid: baseline, variants")
    raw = doc.get("variants")
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f"{where} must declare [variants.<name>] tables")
    variants = {}
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise ValueError(f"variant {name!r} in {where} must be a table of keys, got {spec!r}")
        bad = [k for k in spec if k not in VARIANT_FIELDS and k not in META_KEYS]
        if bad:
            fixed = [k for k in bad if k in FIXED_FIELDS]
            why = f" ({', '.join(fixed)} is set by the preset for every variant)" if fixed else ""
            raise ValueError(f"unknown key(s) {bad} in variant {name!r} of {where}{why}; valid: "
                             f"{', '.join(VARIANT_FIELDS + META_KEYS)}")
        if spec.get("match") not in (None, "params"):
            raise ValueError(f"variant {name!r}: match must be 'params' (or absent), got {spec['match']!r}")
        lf = spec.get("layers_factor")
        if lf is not None and (not isinstance(lf, int | float) or isinstance(lf, bool) or not lf > 0):
            raise ValueError(f"variant {name!r}: layers_factor must be a number > 0, got {lf!r}")
        if spec.get("paper") is not None and spec["paper"] not in KNOWN_ROWS:
            raise ValueError(f"variant {name!r}: paper row {spec['paper']!r} unknown; valid: {', '.join(KNOWN_ROWS)}")
        changes = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.items() if k not in META_KEYS}
        variants[name] = Variant(name, changes, spec.get("paper"), spec.get("match"), spec.get("group", ""), lf)
    baseline = doc.get("baseline", next(iter(variants)))
    if baseline not in variants:
        raise ValueError(f"baseline {baseline!r} is not a variant of {where}; valid: {', '.join(variants)}")
    if variants[baseline].changes:
        raise ValueError(f"the baseline {baseline!r} must change nothing, got {variants[baseline].changes}")
    return Grid(baseline, variants, path)


def count_parameters(cfg: ModsConfig) -> int:
    """Parameters of ``ModsLM(cfg)``, counted on the meta device (no memory, no time)."""
    with torch.device("meta"):
        return ModsLM(cfg).num_parameters()


def match_parameters(cfg: ModsConfig, target: int) -> ModsConfig:
    """``cfg`` with the ``ffn_dim`` whose parameter count is nearest ``target`` (the count is linear in it)."""
    a, b = 64, 128
    na = count_parameters(dataclasses.replace(cfg, ffn_dim=a))
    nb = count_parameters(dataclasses.replace(cfg, ffn_dim=b))
    per = (nb - na) / (b - a)  # parameters per unit of ffn_dim
    f = round(a + (target - na) / per)
    if f < 1 or abs(count_parameters(dataclasses.replace(cfg, ffn_dim=f)) / target - 1) > MATCH_TOLERANCE:
        raise ValueError(f"cannot match {target:,} parameters by ffn_dim alone (would need ffn_dim={f}): the other "
                         f"parts of this variant already hold {na - per * a:,.0f}")
    return dataclasses.replace(cfg, ffn_dim=f)


def build_configs(grid: Grid, base: ModsConfig, names: list[str]) -> dict[str, ModsConfig]:
    """The config of each named variant: ``base`` with its changes (validated by ModsConfig), then matched."""
    target = count_parameters(base)
    out = {}
    for n in names:
        v = grid.variants[n]
        changes = dict(v.changes)
        if v.layers_factor is not None:
            changes["num_layers"] = max(1, round(base.num_layers * v.layers_factor))
        try:
            cfg = dataclasses.replace(base, **changes)
        except (TypeError, ValueError) as e:
            raise ValueError(f"variant {n!r} of {grid.path or 'the grid'}: {e}") from e
        try:
            out[n] = match_parameters(cfg, target) if v.match == "params" else cfg
        except ValueError as e:
            raise ValueError(f"variant {n!r} of {grid.path or 'the grid'}: {e}") from e
    return out
