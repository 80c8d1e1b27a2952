"""The JSON API (read-only, OpenAPI at /api/openapi.json, docs at /api/docs): every page's data.

Private data (your own private lists, your feed) is served to the session cookie's user only; anyone else gets
the same 404 as for something that does not exist.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from . import queries
from .deps import DB, current_user
from .models import Follow, ListItem, Note, Paper, PaperzooLink, ReadingList, Recommendation, User
from .search import search_papers
from .web import paper_by_arxiv, visible_list

router = APIRouter(prefix="/api", tags=["hub"])
NOT_FOUND = {404: {"description": "Not found (or private to someone else)"}}


class ReportOut(BaseModel):
    path: str  # under docs/reports: a recipe ("electra-ablations") or a recipe's other budget ("perceiver/fsdd-long")
    recipe: str
    preset: str
    verdict: str
    url: str


class PaperzooOut(BaseModel):
    name: str
    status: str
    verdict: str
    claim: str
    report_url: str | None
    code_url: str | None
    reports: list[ReportOut]  # every committed report of the paper's recipes


class PaperOut(BaseModel):
    arxiv_id: str
    version: int
    title: str
    authors: list[str]
    abstract: str
    categories: list[str]
    published: datetime | None
    updated: datetime | None
    abs_url: str
    pdf_url: str
    sample: bool
    paperzoo: PaperzooOut | None


class RankedPaper(BaseModel):
    paper: PaperOut
    score: float
    mentions: int


class PageOut(BaseModel):
    view: str
    window: str
    category: str
    page: int
    pages: int
    total: int
    items: list[RankedPaper]


class PaperDetail(PaperOut):
    mentions: int
    mentions_per_day: list[int]
    public_notes: list[NoteOut]


class NoteOut(BaseModel):
    id: int
    author: str
    arxiv_id: str
    body_markdown: str
    public: bool
    updated_at: datetime


class ListOut(BaseModel):
    id: int
    owner: str
    name: str
    description: str
    public: bool
    papers: list[PaperOut]


class ListSummary(BaseModel):
    id: int
    name: str
    public: bool
    size: int


class UserOut(BaseModel):
    username: str
    display_name: str
    bio: str
    followers: int
    following: int
    public_lists: list[ListSummary]
    public_notes: list[NoteOut]


class SearchOut(BaseModel):
    query: str
    page: int
    total: int
    items: list[PaperOut]


class Recommended(BaseModel):
    paper: PaperOut
    score: float


class FeedEvent(BaseModel):
    kind: str
    at: datetime
    user: str
    paper: PaperOut
    list_id: int | None = None
    note_id: int | None = None


PaperDetail.model_rebuild()


def paper_out(p: Paper) -> PaperOut:
    link = p.link
    pz = None
    if link is not None:
        pz = PaperzooOut(name=link.name, status=link.status, verdict=link.verdict, claim=link.claim,
                         report_url=f"/reports/{link.name}" if link.report_path else None,
                         code_url=f"/code/{link.name}" if link.code_path else None,
                         reports=[ReportOut(path=r.path, recipe=r.recipe, preset=r.preset, verdict=r.verdict, url=r.url)
                                  for r in link.reports])
    return PaperOut(arxiv_id=p.arxiv_id, version=p.version, title=p.display_title,
                    authors=[a.strip() for a in p.authors_text.split(",") if a.strip()], abstract=p.abstract,
                    categories=p.category_list, published=p.published, updated=p.updated, abs_url=p.abs_url,
                    pdf_url=p.pdf_url, sample=p.sample, paperzoo=pz)


def note_out(n: Note) -> NoteOut:
    return NoteOut(id=n.id, author=n.owner.username, arxiv_id=n.paper.arxiv_id, body_markdown=n.body, public=n.public,
                   updated_at=n.updated_at)


@router.get("/papers", response_model=PageOut)
def ranked(request: Request, view: str = Query("hot", pattern="^(hot|new|top|rising)$"),
           window: str = Query("week", pattern="^(day|week|month|all)$"),
           cat: str = Query("", max_length=40, pattern=r"^[A-Za-z0-9.\-]*$"), page: int = Query(1, ge=1, le=100000),
           db: Session = DB):
    """One page of the Hot, New, Top (per window) or Rising view, optionally in one category."""
    settings = request.app.state.settings
    items, total = queries.ranked_page(db, settings, request.app.state.rank_cache, view, window, cat, page)
    counts = queries.mention_counts(db, [p.id for p, _ in items], settings)
    return PageOut(view=view, window=window, category=cat, page=page, pages=max(1, -(-total // settings.page_size)),
                   total=total, items=[RankedPaper(paper=paper_out(p), score=sc, mentions=counts.get(p.id, 0))
                                       for p, sc in items])


@router.get("/papers/{arxiv_id:path}", response_model=PaperDetail, responses=NOT_FOUND)
def paper(request: Request, arxiv_id: str = Path(..., max_length=100), db: Session = DB,
          user=Depends(current_user)):
    """A paper: metadata, paperzoo status and verdict, mentions per day (30 days), public notes (and yours)."""
    p = paper_by_arxiv(db, arxiv_id)
    settings = request.app.state.settings
    notes = queries.visible_notes(db, p.id, user.id if user else None)
    for n in notes:
        n.paper = p
    return PaperDetail(**paper_out(p).model_dump(), mentions=queries.mention_counts(db, [p.id], settings).get(p.id, 0),
                       mentions_per_day=queries.sparkline(db, p.id, settings),
                       public_notes=[note_out(n) for n in notes])


@router.get("/search", response_model=SearchOut)
def search(request: Request, q: str = Query(..., max_length=300), page: int = Query(1, ge=1, le=100000),
           db: Session = DB):
    """Full-text search (title, authors, abstract); any text is accepted, query syntax is not interpreted."""
    size = request.app.state.settings.page_size
    ids, total = search_papers(db, q, size, (page - 1) * size)
    found = queries.load_papers(db, ids)
    return SearchOut(query=q, page=page, total=total, items=[paper_out(found[i]) for i in ids if i in found])


@router.get("/users/{username}", response_model=UserOut, responses=NOT_FOUND)
def user_profile(username: str = Path(..., max_length=64), db: Session = DB,
                 viewer=Depends(current_user)):
    """A user's profile: public lists, public notes, follower counts."""
    u = db.scalar(select(User).where(User.username == username.lower()))
    if u is None:
        raise HTTPException(404, "no such user")
    lists = queries.public_lists_of(db, u.id, viewer.id if viewer else None)
    sizes = dict(db.execute(select(ListItem.list_id, func.count()).where(ListItem.list_id.in_([x.id for x in lists]))
                            .group_by(ListItem.list_id)).all()) if lists else {}
    notes = db.scalars(select(Note).where(Note.owner_id == u.id, Note.public.is_(True))
                       .options(selectinload(Note.paper), selectinload(Note.owner)).limit(50)).all()
    return UserOut(username=u.username, display_name=u.display_name, bio=u.bio,
                   followers=db.scalar(select(func.count()).select_from(Follow).where(Follow.followee_id == u.id)),
                   following=db.scalar(select(func.count()).select_from(Follow).where(Follow.follower_id == u.id)),
                   public_lists=[ListSummary(id=x.id, name=x.name, public=x.public, size=sizes.get(x.id, 0))
                                 for x in lists],
                   public_notes=[note_out(n) for n in notes])


@router.get("/lists/{list_id}", response_model=ListOut, responses=NOT_FOUND)
def reading_list(list_id: int = Path(..., ge=1, le=2**62), db: Session = DB,
                 user=Depends(current_user)):
    """A reading list in its order (public lists, or your own)."""
    lst = visible_list(db, list_id, user)
    items = db.scalars(select(ListItem).where(ListItem.list_id == lst.id)
                       .options(selectinload(ListItem.paper).selectinload(Paper.link)
                                .selectinload(PaperzooLink.reports))
                       .order_by(ListItem.position)).all()
    return ListOut(id=lst.id, owner=lst.owner.username, name=lst.name, description=lst.description, public=lst.public,
                   papers=[paper_out(i.paper) for i in items])


@router.get("/lists/{list_id}/recommendations", response_model=list[Recommended], responses=NOT_FOUND)
def recommendations(list_id: int = Path(..., ge=1, le=2**62), db: Session = DB,
                    user=Depends(current_user)):
    """The list's precomputed recommendations (tf-idf + linear SVM), best first."""
    lst = visible_list(db, list_id, user)
    recs = db.scalars(select(Recommendation).where(Recommendation.list_id == lst.id)
                      .options(selectinload(Recommendation.paper).selectinload(Paper.link)
                               .selectinload(PaperzooLink.reports))
                      .order_by(Recommendation.rank)).all()
    return [Recommended(paper=paper_out(r.paper), score=r.score) for r in recs]


@router.get("/me/lists", response_model=list[ListSummary])
def my_lists(db: Session = DB, user=Depends(current_user)):
    """Your reading lists, public and private (empty when signed out)."""
    if user is None:
        return []
    lists = db.scalars(select(ReadingList).where(ReadingList.owner_id == user.id)).all()
    sizes = dict(db.execute(select(ListItem.list_id, func.count()).where(ListItem.list_id.in_([x.id for x in lists]))
                            .group_by(ListItem.list_id)).all()) if lists else {}
    return [ListSummary(id=x.id, name=x.name, public=x.public, size=sizes.get(x.id, 0)) for x in lists]


@router.get("/feed", response_model=list[FeedEvent])
def feed(page: int = Query(1, ge=1, le=100000), db: Session = DB, user=Depends(current_user)):
    """What the people you follow added to public lists or noted publicly (empty when signed out)."""
    if user is None:
        return []
    followees = list(db.scalars(select(Follow.followee_id).where(Follow.follower_id == user.id)).all())
    out = []
    for kind, at, obj in queries.feed_events(db, followees, 30, (page - 1) * 30):
        if kind == "added":
            item, lst = obj
            out.append(FeedEvent(kind=kind, at=at, user=lst.owner.username, paper=paper_out(item.paper),
                                 list_id=lst.id))
        else:
            out.append(FeedEvent(kind=kind, at=at, user=obj.owner.username, paper=paper_out(obj.paper),
                                 note_id=obj.id))
    return out
