"""arXiv identifiers: every spelling of a paper normalises to one id without its version.

New style ``YYMM.NNNN`` (2007-2014) or ``YYMM.NNNNN`` (2015-), old style ``archive[.SUBJ]/YYMMNNN``
(``solv-int/9701001``, ``math.GT/0309136``; the archive itself may contain a ``v``). Accepted around them:
``arXiv:`` prefixes, ``abs/`` and ``pdf/`` links (``.pdf`` suffix), and a ``vN`` version suffix.
"""

from __future__ import annotations

import re

_NEW = r"(?P<new>\d{4}\.\d{4,5})"
_OLD = r"(?P<old>[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})"
_ID = re.compile(rf"^(?:{_NEW}|{_OLD})(?:v(?P<v>\d+))?$")
# inside text or URLs (abs/, pdf/, html/ links and arXiv: prefixes); the id must end at a non-id character
_IN_TEXT = re.compile(rf"(?:arxiv\.org/(?:abs|pdf|html)/|arxiv:\s*)(?:{_NEW}|{_OLD})(?:v(?P<v>\d+))?(?:\.pdf)?"
                      r"(?![\w.])", re.IGNORECASE)


def parse_arxiv_id(text: str) -> tuple[str, int | None]:
    """``(id, version or None)`` of one id, URL or ``arXiv:`` reference; anything else raises ``ValueError``."""
    if not isinstance(text, str):
        raise ValueError(f"an arXiv id must be a string, got {type(text).__name__}")
    s = text.strip()
    s = re.sub(r"^(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/", "", s, flags=re.IGNORECASE)
    s = re.sub(r"^arxiv:\s*", "", s, flags=re.IGNORECASE)
    s = re.sub(r"\.pdf$", "", s).rstrip("/")
    m = _ID.match(s)
    if not m:
        raise ValueError(f"not an arXiv id: {text!r} (expected YYMM.NNNNN or archive/YYMMNNN, optionally with vN, "
                         f"an arXiv: prefix or an arxiv.org/abs|pdf link)")
    ident = m.group("new") or m.group("old")
    month = int(ident.split("/")[-1][2:4])
    if not 1 <= month <= 12:
        raise ValueError(f"not an arXiv id: {text!r} (month {month:02d} of YYMM out of 01..12)")
    if m.group("new"):
        yymm, number = ident.split(".")
        if (len(number) == 5) != (yymm >= "1501"):  # 4 digits from 0704 to 1412, 5 from 1501 on
            raise ValueError(f"not an arXiv id: {text!r} (YYMM.NNNN up to 1412, YYMM.NNNNN from 1501)")
    return ident, int(m.group("v")) if m.group("v") else None


def normalize_arxiv_id(text: str) -> str:
    """The version-free id of ``text`` (``abs/2101.03961v3`` -> ``2101.03961``)."""
    return parse_arxiv_id(text)[0]


def find_arxiv_ids(text: str) -> list[str]:
    """Every arXiv paper linked or cited (``arXiv:...``) in free text, normalised, in order, without repeats."""
    out: dict[str, None] = {}
    for m in _IN_TEXT.finditer(text or ""):
        ident = m.group("new") or m.group("old")
        try:
            out[normalize_arxiv_id(ident)] = None
        except ValueError:
            continue
    return list(out)
