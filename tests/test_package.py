"""The installed package tells type checkers it is typed (PEP 561), and its paper packages export their models."""

import importlib
import tomllib
from pathlib import Path

import paperzoo
from paperzoo import registry


def test_py_typed_marker_ships_with_the_package():
    assert (Path(paperzoo.__file__).parent / "py.typed").is_file()
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["paperzoo"]


def test_paper_packages_export_their_models_by_name():
    for p in registry.papers():
        if p.models:
            pkg = importlib.import_module(f"paperzoo.papers.{p.name.replace('-', '_')}")
            assert all(m in getattr(pkg, "__all__", ()) for m in p.models), (p.name, p.models)


def test_the_core_exports_every_public_name_of_its_modules():
    import importlib

    import paperzoo.nn as core

    for module in ("attention", "embedding", "ffn", "norm", "posenc", "transformer"):
        names = importlib.import_module(f"paperzoo.nn.{module}").__all__
        missing = [n for n in names if getattr(core, n, None) is None]
        assert not missing, (module, missing)
    assert set(core.__all__) <= set(dir(core))


def test_the_core_readme_examples_run():
    """The usage section of src/paperzoo/nn/README.md (RoPE, ALiBi, T5 bias) is executed as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "src" / "paperzoo" / "nn" / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    scope: dict = {}
    exec(compile("\n".join(blocks), "nn/README.md", "exec"), scope)
    assert scope["y"].shape == scope["x"].shape
