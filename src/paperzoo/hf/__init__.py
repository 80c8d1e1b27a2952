"""One entry point for Hugging Face interop: ``from_hf(hf_model)`` and ``to_hf(model)``.

Converters register themselves with :func:`register_converter`, keyed by the Hugging Face class name
(``"BertModel"``) and by the paperzoo class. Core converters live in this package; each paper puts its
own in ``paperzoo/papers/<paper>/hf.py``, which is imported on first use. Converter modules import
``transformers`` inside their functions, so importing paperzoo never requires it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import torch.nn as nn

_FROM: dict[str, Callable[[Any], nn.Module]] = {}
_TO: dict[type, Callable[[nn.Module], Any]] = {}
_LOADED = False
_CORE_MODULES: tuple[str, ...] = ()  # e.g. "paperzoo.hf.bert", added as core converters land


def register_converter(hf_class_name: str, paperzoo_class: type | None,
                       from_fn: Callable[[Any], nn.Module],
                       to_fn: Callable[[nn.Module], Any] | None = None) -> None:
    """Register ``from_fn`` for HF class ``hf_class_name`` and ``to_fn`` for ``paperzoo_class``.

    Several HF classes may map to one paperzoo class; ``to_fn`` then decides which HF class to build
    (typically from a ``hf_class`` attribute the converted model remembers).
    """
    _FROM[hf_class_name] = from_fn
    if paperzoo_class is not None and to_fn is not None:
        _TO[paperzoo_class] = to_fn


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for name in _CORE_MODULES:
        importlib.import_module(name)
    for mod in pkgutil.iter_modules(importlib.import_module("paperzoo.hf").__path__):
        importlib.import_module(f"paperzoo.hf.{mod.name}")
    import paperzoo.papers as papers

    for mod in pkgutil.iter_modules(papers.__path__):
        if importlib.util.find_spec(f"paperzoo.papers.{mod.name}.hf") is not None:
            importlib.import_module(f"paperzoo.papers.{mod.name}.hf")


def from_hf(hf_model: Any) -> nn.Module:
    """The paperzoo model equivalent to ``hf_model``, carrying the same weights (in its mode)."""
    _load()
    for cls in type(hf_model).__mro__:
        if cls.__name__ in _FROM:
            return _FROM[cls.__name__](hf_model)
    raise TypeError(f"no paperzoo converter for Hugging Face class {type(hf_model).__name__}; "
                    f"supported: {', '.join(sorted(_FROM)) or '(none)'}")


def to_hf(model: nn.Module) -> Any:
    """The Hugging Face model equivalent to the paperzoo ``model``, carrying the same weights."""
    _load()
    for cls in type(model).__mro__:
        if cls in _TO:
            return _TO[cls](model)
    raise TypeError(f"no Hugging Face converter for {type(model).__name__}; "
                    f"supported: {', '.join(sorted(c.__name__ for c in _TO)) or '(none)'}")
