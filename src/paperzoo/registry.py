"""The paper registry: every paper (and recipe) registers itself here.

A paper folder's ``__init__.py`` calls :func:`register` with a :class:`Paper`. The CLI, the reports
and the hub list what is registered; nothing else hard-codes paper names. Papers on the reading
list that have no folder yet are listed in :data:`READING_LIST` with status ``planned``.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# What the code is, never whether the claim holds (that is the verdict, read from the committed report):
# planned: on the reading list, no code yet; implemented: code and tests, no committed reproduction report yet;
# checked: its correctness checks (parity with the reference, or the mechanism's property tests) pass and its
# reproduction has run with a committed report (docs/reports/<recipe>/), whatever that report's verdict.
STATUSES = ("planned", "implemented", "checked")
# The committed reports of a source checkout; absent from an installed wheel (verdicts then read "no report here").
REPORTS = Path(__file__).resolve().parents[2] / "docs" / "reports"


@dataclass(frozen=True)
class Paper:
    """One registered paper.

    ``recipes`` maps a preset-free recipe name to ``"module:function"``; the function has the
    signature ``run(preset, seeds, out, resume, progress, workers) -> Path`` (see paperzoo.recipes) and returns
    its run folder. ``render`` (optional) names the function behind ``paperzoo render NAME``.
    ``benches`` maps a bench name to ``"module:function"``: a function of no arguments returning
    ``(rows, meta)`` (see :func:`paperzoo.bench.run_bench`).
    """

    name: str
    title: str
    arxiv: str
    year: int
    status: str = "planned"
    models: tuple[str, ...] = ()
    recipes: dict[str, str] = field(default_factory=dict)
    benches: dict[str, str] = field(default_factory=dict)
    claims: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()  # the model configs' named presets (a recipe's own presets: recipe_presets)
    render: str = ""  # "module:function(checkpoint, out, frames, side) -> Path" for `paperzoo render NAME`

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status of {self.name!r} must be one of {STATUSES}, got {self.status!r}")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["recipes"] = sorted(self.recipes)
        d["benches"] = sorted(self.benches)
        d["verdicts"] = {r: v.as_dict() for r, v in verdicts(self).items()}
        return d


@dataclass(frozen=True)
class CommittedVerdict:
    """The verdict of a recipe's committed report: ``docs/reports/<recipe>/result.json`` and its preset."""

    recipe: str
    verdict: str  # reproduced | not reproduced | inconclusive
    preset: str
    report: Path

    def label(self) -> str:
        return f"{self.verdict} ({self.preset})"

    def as_dict(self) -> dict[str, str]:
        return {"verdict": self.verdict, "preset": self.preset, "report": str(self.report)}


def verdicts(paper: Paper, reports: Path | None = None) -> dict[str, CommittedVerdict]:
    """The committed verdicts of ``paper``'s recipes under ``reports`` (default :data:`REPORTS`): the recipe's main
    report ``<recipe>/`` keyed by the recipe's name, and each report of another budget ``<recipe>/<preset>/`` (e.g.
    ``perceiver/fsdd-long``) keyed by that path."""
    root = REPORTS if reports is None else reports
    out = {}
    for recipe in sorted(paper.recipes):
        folder = root / recipe
        for result in [folder / "result.json", *sorted(folder.glob("*/result.json"))]:
            if not result.is_file():
                continue
            key, config = result.parent.relative_to(root).as_posix(), result.parent / "config.json"
            try:
                verdict = json.loads(result.read_text())["verdict"]
                preset = json.loads(config.read_text())["config"]["preset"] if config.is_file() else "?"
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"committed report {result.parent} is damaged ({type(e).__name__}: {e}); re-render "
                                 f"it from its run with `paperzoo reproduce {recipe} --out RUN --resume`") from e
            if key != recipe and preset != result.parent.name:
                raise ValueError(f"committed report {result.parent} is of preset {preset!r}; a recipe's report of "
                                 f"another budget lives in {folder}/<preset>/: move it to {folder / preset}")
            out[key] = CommittedVerdict(recipe, verdict, preset, result.parent)
    return out


def verdict_labels(paper: Paper, reports: Path | None = None) -> dict[str, str]:
    """Report key (as :func:`verdicts`) -> its short label: ``not reproduced (small)``, prefixed with the recipe's
    name (``electra-ablations: ...``) when the paper has more than one recipe."""
    several = len(paper.recipes) > 1
    return {k: f"{v.recipe}: {v.label()}" if several else v.label() for k, v in verdicts(paper, reports).items()}


def verdict_label(paper: Paper, reports: Path | None = None) -> str:
    """One short line of every committed verdict (``not reproduced (small); reproduced (fsdd-long)``; with several
    recipes ``electra: ...; electra-ablations: ...``); ``-`` for a paper without a committed report."""
    return "; ".join(verdict_labels(paper, reports).values()) or "-"


_PAPERS: dict[str, Paper] = {}
_LOADED = False

# The reading list: papers without a folder yet (replaced by the folder's own registration).
READING_LIST: tuple[Paper, ...] = (
    Paper("mobilenetv2", "MobileNetV2: Inverted Residuals and Linear Bottlenecks", "1801.04381", 2018),
    Paper("electra", "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than Generators",
          "2003.10555", 2020),
    Paper("perceiver", "Perceiver: General Perception with Iterative Attention", "2103.03206", 2021),
    Paper("funnel", "Funnel-Transformer: Filtering out Sequential Redundancy for Efficient Language "
          "Processing", "2006.03236", 2020),
    Paper("nerf", "NeRF: Representing Scenes as Neural Radiance Fields for View Synthesis", "2003.08934", 2020),
    Paper("nerfies", "Nerfies: Deformable Neural Radiance Fields", "2011.12948", 2020, models=("Nerfies",)),
    Paper("switch", "Switch Transformers: Scaling to Trillion Parameter Models with Simple and Efficient "
          "Sparsity", "2101.03961", 2021),
    Paper("latent-shift", "Gifsplanation via Latent Shift: A Simple Autoencoder Approach to Counterfactual "
          "Generation for Chest X-rays", "2102.09475", 2021),
    Paper("vatt", "VATT: Transformers for Multimodal Self-Supervised Learning from Raw Video, Audio and Text",
          "2104.11178", 2021),
    Paper("posenc", "Attention Is All You Need (positional encodings: sinusoidal vs learned)", "1706.03762", 2017),
    Paper("transformer-mods", "Do Transformer Modifications Transfer Across Implementations and "
          "Applications?", "2102.11972", 2021),
    Paper("swin", "Swin Transformer: Hierarchical Vision Transformer using Shifted Windows", "2103.14030", 2021),
    Paper("iws", "Interactive Weak Supervision: Learning Useful Heuristics for Data Labeling", "2012.06046", 2020),
)


def register(paper: Paper) -> Paper:
    """Register ``paper`` (replacing a reading-list entry of the same name)."""
    _PAPERS[paper.name] = paper
    return paper


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for p in READING_LIST:
        _PAPERS.setdefault(p.name, p)
    import paperzoo.papers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"paperzoo.papers.{mod.name}")


def papers() -> list[Paper]:
    """Every registered paper, sorted by name."""
    _load()
    return sorted(_PAPERS.values(), key=lambda p: p.name)


def get(name: str) -> Paper:
    """The paper called ``name``; an unknown name raises ``KeyError`` listing the valid ones."""
    _load()
    if name not in _PAPERS:
        raise KeyError(f"unknown paper {name!r}; valid names: {', '.join(sorted(_PAPERS))}")
    return _PAPERS[name]


def resolve(target: str) -> Callable[..., Any]:
    """Import ``"package.module:function"`` and return the function."""
    module, _, fn = target.partition(":")
    return getattr(importlib.import_module(module), fn)


def recipe_presets(recipe: str) -> tuple[str, ...]:
    """The preset names of ``recipe`` (a recipe name of any registered paper). A recipe function ``run`` keeps
    its presets in its module's ``PRESETS``, a recipe function ``run_<x>`` in ``<X>_PRESETS``."""
    _load()
    targets = {r: t for p in _PAPERS.values() for r, t in p.recipes.items()}
    if recipe not in targets:
        raise KeyError(f"unknown recipe {recipe!r}; valid names: {', '.join(sorted(targets))}")
    module, _, fn = targets[recipe].partition(":")
    table = "PRESETS" if fn == "run" else fn.removeprefix("run_").upper() + "_PRESETS"
    return tuple(getattr(importlib.import_module(module), table))


def markdown_table() -> str:
    """The README's table of papers, generated from the registry."""
    rows = ["| paper | title | arXiv | year | status | verdict (preset) | recipes |",
            "|---|---|---|---|---|---|---|"]
    for p in papers():
        recipes = ", ".join(f"`paperzoo reproduce {r}`" for r in sorted(p.recipes)) or "-"
        verdict = "; ".join(f"[{label}](docs/reports/{r}/report.md)" for r, label in verdict_labels(p).items()) or "-"
        rows.append(f"| {p.name} | {p.title} | [{p.arxiv}](https://arxiv.org/abs/{p.arxiv}) | {p.year} "
                    f"| {p.status} | {verdict} | {recipes} |")
    return "\n".join(rows)


def write_readme_table(readme: str = "README.md") -> None:
    """Replace the block between ``<!-- papers:start -->`` and ``<!-- papers:end -->`` with the table."""
    from pathlib import Path

    path = Path(readme)
    text = path.read_text()
    start, end = "<!-- papers:start -->\n", "<!-- papers:end -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(head + start + markdown_table() + "\n" + end + tail)


if __name__ == "__main__":  # python -m paperzoo.registry: refresh the README's paper table
    # Papers register into the imported module, not into this __main__ copy of it.
    from paperzoo import registry as _registry

    _registry.write_readme_table()
