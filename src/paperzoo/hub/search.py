"""Full-text search over title, authors and abstract, one interface over two engines.

SQLite: FTS5 with bm25 (title weighted 10, authors 5, abstract 1). PostgreSQL: the ``search`` tsvector (title A,
authors B, abstract C) ranked by ts_rank_cd. The user's text is never passed as query syntax: it is cut into words,
each quoted as a literal term (a trailing ``*`` keeps prefix search on SQLite), so ``"``, ``NEAR(``, ``-`` or
``OR`` are searched as text or dropped and no input can make the query fail.
"""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.orm import Session

_WORD = re.compile(r"[^\W_]+(?:\*)?", re.UNICODE)
MAX_TERMS = 12


def terms(q: str) -> list[str]:
    """The words of a query (letters and digits), lower case, a trailing * kept as a prefix marker."""
    return [w.lower() for w in _WORD.findall(q or "")][:MAX_TERMS]


def fts5_query(q: str) -> str:
    """A safe FTS5 MATCH expression: every word a quoted string, all of them required."""
    parts = []
    for w in terms(q):
        prefix = w.endswith("*")
        w = w.rstrip("*")
        if w:
            parts.append(f'"{w}"' + ("*" if prefix else ""))
    return " ".join(parts)


def search_papers(s: Session, q: str, limit: int, offset: int = 0) -> tuple[list[int], int]:
    """(paper ids best first, total matches) for the user's query ``q``."""
    dialect = s.get_bind().dialect.name
    if dialect == "sqlite":
        expr = fts5_query(q)
        if not expr:
            return [], 0
        total = s.execute(text("SELECT count(*) FROM papers_fts WHERE papers_fts MATCH :q"), {"q": expr}).scalar()
        rows = s.execute(text("SELECT rowid FROM papers_fts WHERE papers_fts MATCH :q "
                              "ORDER BY bm25(papers_fts, 10.0, 5.0, 1.0), rowid LIMIT :n OFFSET :o"),
                         {"q": expr, "n": limit, "o": offset}).scalars().all()
        return list(rows), int(total or 0)
    if dialect == "postgresql":
        words = [w.rstrip("*") for w in terms(q) if w.rstrip("*")]
        if not words:
            return [], 0
        query = " ".join(words)  # plainto_tsquery: plain words ANDed, no operators
        total = s.execute(text("SELECT count(*) FROM papers WHERE search @@ plainto_tsquery('english', :q)"),
                          {"q": query}).scalar()
        rows = s.execute(text("SELECT id FROM papers WHERE search @@ plainto_tsquery('english', :q) "
                              "ORDER BY ts_rank_cd(search, plainto_tsquery('english', :q)) DESC, id "
                              "LIMIT :n OFFSET :o"), {"q": query, "n": limit, "o": offset}).scalars().all()
        return list(rows), int(total or 0)
    raise ValueError(f"search supports sqlite and postgresql, not {dialect}")
