"""Safe rendering of user Markdown (notes, bios) and of committed reports: raw HTML is escaped, never passed through;
``$...$`` / ``$$...$$`` math is kept as escaped text in ``.math`` elements, which static/math.js typesets with
the vendored KaTeX (``trust: false``: no links or HTML from math)."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup
from mdit_py_plugins.dollarmath import dollarmath_plugin

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").use(dollarmath_plugin)


def _allowed_url(url: str) -> bool:
    return url.strip().lower().startswith(("http://", "https://", "/", "#", "mailto:")) or ":" not in url


_md.validateLink = _allowed_url


def markdown(text: str) -> Markup:
    """HTML of ``text`` with every HTML tag of the input escaped and only http(s)/relative links."""
    return Markup(_md.render(text or ""))
