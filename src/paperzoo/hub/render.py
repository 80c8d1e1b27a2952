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


def markdown(text: str, base: str = "") -> Markup:
    """HTML of ``text`` with every HTML tag of the input escaped and only http(s)/relative links; ``base`` prefixes
    relative image sources (a committed report's ``![plot](accuracy.png)`` served from its files route)."""
    tokens = _md.parse(text or "")
    if base:
        for t in tokens:
            for child in t.children or ():
                src = child.attrGet("src") if child.type == "image" else None
                if isinstance(src, str) and ":" not in src and not src.startswith(("/", "#")):
                    child.attrSet("src", base + src)
    return Markup(_md.renderer.render(tokens, _md.options, {}))
