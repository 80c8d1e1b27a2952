"""Atom feeds: one per ranked view (``/feeds/hot.xml``, ``new``, ``top?window=``, ``rising``) and one per visible
reading list (``/lists/ID/feed.xml``). Built with ElementTree, so every text is escaped XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from . import queries
from .deps import DB, current_user, not_found
from .models import ListItem, Paper
from .web import visible_list

router = APIRouter(include_in_schema=False)
ATOM_NS = "http://www.w3.org/2005/Atom"


def atom(title: str, self_url: str, entries: list[tuple[Paper, datetime | None, str]]) -> bytes:
    ET.register_namespace("", ATOM_NS)
    feed = ET.Element(f"{{{ATOM_NS}}}feed")

    def sub(parent, tag, text=None, **attrs):
        el = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attrs)
        if text is not None:
            el.text = text
        return el

    sub(feed, "title", title)
    sub(feed, "id", self_url)
    sub(feed, "link", rel="self", href=self_url)
    stamps = [t for _, t, _ in entries if t is not None]
    sub(feed, "updated", (max(stamps) if stamps else datetime.now(UTC)).isoformat())
    sub(sub(feed, "author"), "name", "paperzoo hub")
    for p, when, summary in entries:
        e = sub(feed, "entry")
        sub(e, "title", p.display_title)
        sub(e, "id", p.abs_url)
        sub(e, "link", href=p.abs_url)
        sub(e, "updated", (when or p.updated or p.published or datetime.now(UTC)).isoformat())
        for a in p.authors_text.split(","):
            if a.strip():
                sub(sub(e, "author"), "name", a.strip())
        sub(e, "summary", summary or p.abstract)
    return ET.tostring(feed, encoding="utf-8", xml_declaration=True)


def _xml(body: bytes) -> Response:
    return Response(body, media_type="application/atom+xml; charset=utf-8")


@router.get("/feeds/{view}.xml")
def view_feed(request: Request, view: str, window: str = Query("week", pattern="^(day|week|month|all)$"),
              cat: str = Query("", max_length=40, pattern=r"^[A-Za-z0-9.\-]*$"), db: Session = DB):
    if view not in queries.VIEWS:
        raise not_found("feed")
    settings = request.app.state.settings
    items, _ = queries.ranked_page(db, settings, request.app.state.rank_cache, view, window, cat, 1)
    title = f"paperzoo hub: {view}" + (f" ({window})" if view == "top" else "") + (f" in {cat}" if cat else "")
    return _xml(atom(title, str(request.url), [(p, p.updated, "") for p, _ in items]))


@router.get("/lists/{list_id}/feed.xml")
def list_feed(request: Request, list_id: int, db: Session = DB, user=Depends(current_user)):
    lst = visible_list(db, list_id, user)
    items = db.scalars(select(ListItem).where(ListItem.list_id == lst.id).options(selectinload(ListItem.paper))
                       .order_by(ListItem.added_at.desc()).limit(100)).all()
    return _xml(atom(f"paperzoo hub list: {lst.name}", str(request.url), [(i.paper, i.added_at, "") for i in items]))
