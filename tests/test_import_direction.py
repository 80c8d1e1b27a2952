"""Arrows point down: the shared floors never import papers or benchmarks; papers never import benchmarks or
another paper's recipe (a paper may reuse another paper's model or objective)."""

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "paperzoo"
FLOORS = ("nn", "data", "train", "report")
LOWER_MODULES = ("measure.py", "registry.py", "recipes.py")


def _imports(path: Path, text: str | None = None) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved against its package)."""
    pkg = ".".join(("paperzoo", *path.relative_to(SRC).parent.parts))
    out = set()
    for node in ast.walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def _files(*parts: str):
    for part in parts:
        p = SRC / part
        yield from ([p] if p.is_file() else sorted(p.rglob("*.py")))


def test_floors_import_no_paper_and_no_bench():
    bad = [(str(f.relative_to(SRC)), m) for f in _files(*FLOORS, *LOWER_MODULES) for m in _imports(f)
           if m.startswith(("paperzoo.papers.", "paperzoo.bench", "paperzoo.hub"))
           # the registry discovers paper packages by walking paperzoo.papers, never by naming one
           and m != "paperzoo.papers"]
    assert not bad, bad


def test_papers_import_no_bench_and_no_other_papers_recipe():
    bad = []
    for f in _files("papers"):
        paper = f.relative_to(SRC / "papers").parts[0]
        for m in _imports(f):
            if m.startswith("paperzoo.bench") or m.startswith("paperzoo.hub"):
                bad.append((str(f.relative_to(SRC)), m))
            parts = m.split(".")
            if len(parts) >= 4 and parts[:2] == ["paperzoo", "papers"] and parts[2] != paper and parts[3] == "recipe":
                bad.append((str(f.relative_to(SRC)), m))
    assert not bad, bad


def test_the_checker_sees_relative_and_absolute_imports():
    """The test can fail: a made-up paper module importing a bench and another paper's recipe is caught."""
    found = _imports(SRC / "papers" / "zz_probe" / "x.py",
                     "from paperzoo.bench import timing\nfrom ..electra.recipe import run\n")
    assert "paperzoo.bench" in found and "paperzoo.papers.electra.recipe" in found
