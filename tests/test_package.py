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
