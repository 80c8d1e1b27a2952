"""The HTML pages: ranked views, paper, search, users and follows, feed, reading lists, notes, accounts, About,
and the committed reports and code of the papers paperzoo implements."""

from __future__ import annotations

import mimetypes
from datetime import UTC, datetime
from pathlib import Path

from fastapi import APIRouter, BackgroundTasks, Depends, Form, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse, RedirectResponse
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, selectinload

from . import auth, queries, ranking
from .deps import DB, current_user, not_found, page, require_user
from .models import Follow, ListItem, Note, Paper, PaperzooLink, ReadingList, Recommendation, User
from .search import search_papers

router = APIRouter(include_in_schema=False)
CSRF = [Depends(auth.verify_csrf)]
CATEGORY = Query("", max_length=40, pattern=r"^[A-Za-z0-9.\-]*$")
PAGE = Query(1, ge=1, le=100000)


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def _safe_next(url: str | None) -> str:
    """Only same-site paths after login (no //host or scheme: an open redirect otherwise)."""
    return url if url and url.startswith("/") and not url.startswith("//") and "\\" not in url else "/"


def paper_by_arxiv(db: Session, arxiv_id: str) -> Paper:
    from .ids import normalize_arxiv_id

    try:
        ident = normalize_arxiv_id(arxiv_id)
    except ValueError:
        raise not_found("paper") from None
    p = db.scalar(select(Paper).where(Paper.arxiv_id == ident)
                  .options(selectinload(Paper.link).selectinload(PaperzooLink.reports)))
    if p is None:
        raise not_found("paper")
    return p


def own_list(db: Session, list_id: int, user: User | None) -> ReadingList:
    """A list its owner may change; anyone else gets the same 404 as for a list that does not exist."""
    lst = db.get(ReadingList, list_id)
    if lst is None or user is None or lst.owner_id != user.id:
        raise not_found("list")
    return lst


def visible_list(db: Session, list_id: int, user: User | None) -> ReadingList:
    lst = db.get(ReadingList, list_id)
    if lst is None or not (lst.public or (user is not None and lst.owner_id == user.id)):
        raise not_found("list")
    return lst


# ---- ranked views ----

def _view(request: Request, db: Session, view: str, window: str, cat: str, page_no: int):
    settings = request.app.state.settings
    items, total = queries.ranked_page(db, settings, request.app.state.rank_cache, view, window, cat, page_no)
    counts = queries.mention_counts(db, [p.id for p, _ in items], settings)
    implemented = queries.implemented_papers(db) if view == "hot" and page_no == 1 and not cat else []
    return page(request, "papers.html", view=view, window=window, cat=cat, items=items, total=total,
                page_no=page_no, pages=max(1, -(-total // settings.page_size)), counts=counts,
                implemented=implemented, windows=list(ranking.WINDOWS))


@router.get("/", response_class=HTMLResponse)
@router.get("/hot", response_class=HTMLResponse)
def hot_page(request: Request, cat: str = CATEGORY, page_no: int = PAGE, db: Session = DB,
             user=Depends(current_user)):
    return _view(request, db, "hot", "week", cat, page_no)


@router.get("/new", response_class=HTMLResponse)
def new_page(request: Request, cat: str = CATEGORY, page_no: int = PAGE, db: Session = DB,
             user=Depends(current_user)):
    return _view(request, db, "new", "week", cat, page_no)


@router.get("/top", response_class=HTMLResponse)
def top_page(request: Request, window: str = Query("week", pattern="^(day|week|month|all)$"), cat: str = CATEGORY,
             page_no: int = PAGE, db: Session = DB, user=Depends(current_user)):
    return _view(request, db, "top", window, cat, page_no)


@router.get("/rising", response_class=HTMLResponse)
def rising_page(request: Request, cat: str = CATEGORY, page_no: int = PAGE, db: Session = DB,
                user=Depends(current_user)):
    return _view(request, db, "rising", "week", cat, page_no)


@router.get("/about", response_class=HTMLResponse)
def about(request: Request, user=Depends(current_user)):
    return page(request, "about.html", r=ranking)


# ---- paper ----

@router.get("/papers/{arxiv_id:path}/note", response_class=HTMLResponse)
def note_editor(request: Request, arxiv_id: str, db: Session = DB, user=Depends(require_user)):
    p = paper_by_arxiv(db, arxiv_id)
    n = db.scalar(select(Note).where(Note.owner_id == user.id, Note.paper_id == p.id))
    return page(request, "note_edit.html", p=p, n=n)


@router.get("/papers/{arxiv_id:path}", response_class=HTMLResponse)
def paper_page(request: Request, arxiv_id: str, db: Session = DB, user=Depends(current_user)):
    p = paper_by_arxiv(db, arxiv_id)
    settings = request.app.state.settings
    spark = queries.sparkline(db, p.id, settings)
    my_lists = list(db.scalars(select(ReadingList).where(ReadingList.owner_id == user.id)
                               .order_by(ReadingList.name)).all()) if user else []
    notes = queries.visible_notes(db, p.id, user.id if user else None)
    return page(request, "paper.html", p=p, spark=spark, spark_points=queries.sparkline_svg_points(spark),
                mentions=queries.mention_counts(db, [p.id], settings).get(p.id, 0), my_lists=my_lists, notes=notes,
                my_note=next((n for n in notes if user and n.owner_id == user.id), None))


# ---- search ----

@router.get("/search", response_class=HTMLResponse)
def search_page(request: Request, q: str = Query("", max_length=300), page_no: int = PAGE,
                db: Session = DB, user=Depends(current_user)):
    settings = request.app.state.settings
    ids, total = search_papers(db, q, settings.page_size, (page_no - 1) * settings.page_size) if q.strip() else ([],
                                                                                                               0)
    found = queries.load_papers(db, ids)
    return page(request, "search.html", q=q, items=[found[i] for i in ids if i in found], total=total,
                page_no=page_no, pages=max(1, -(-total // settings.page_size)))


# ---- users and follows ----

def _user(db: Session, username: str) -> User:
    u = db.scalar(select(User).where(User.username == username.lower()))
    if u is None:
        raise not_found("user")
    return u


@router.get("/u/{username}", response_class=HTMLResponse)
def profile(request: Request, username: str, page_no: int = PAGE, db: Session = DB, user=Depends(current_user)):
    u = _user(db, username)
    size = request.app.state.settings.page_size
    lists = queries.public_lists_of(db, u.id, user.id if user else None, limit=size, offset=(page_no - 1) * size)
    notes = list(db.scalars(select(Note).where(Note.owner_id == u.id, Note.public.is_(True))
                            .options(selectinload(Note.paper)).order_by(Note.updated_at.desc(), Note.id.desc())
                            .limit(size).offset((page_no - 1) * size)).all())
    followers = db.scalar(select(func.count()).select_from(Follow).where(Follow.followee_id == u.id))
    following = db.scalar(select(func.count()).select_from(Follow).where(Follow.follower_id == u.id))
    i_follow = user is not None and db.get(Follow, (user.id, u.id)) is not None
    return page(request, "profile.html", u=u, lists=lists, notes=notes, followers=followers, following=following,
                i_follow=i_follow, page_no=page_no, has_next=len(lists) == size or len(notes) == size)


@router.get("/u/{username}/{which}", response_class=HTMLResponse)
def follow_list(request: Request, username: str, which: str, page_no: int = PAGE, db: Session = DB,
                user=Depends(current_user)):
    if which not in ("followers", "following"):
        raise not_found()
    u = _user(db, username)
    size = request.app.state.settings.page_size
    if which == "followers":
        q = select(User).join(Follow, Follow.follower_id == User.id).where(Follow.followee_id == u.id)
    else:
        q = select(User).join(Follow, Follow.followee_id == User.id).where(Follow.follower_id == u.id)
    total = db.scalar(select(func.count()).select_from(q.subquery()))
    people = db.scalars(q.order_by(User.username).limit(size).offset((page_no - 1) * size)).all()
    return page(request, "people.html", u=u, which=which, people=people, page_no=page_no,
                pages=max(1, -(-total // size)))


@router.post("/u/{username}/follow", dependencies=CSRF)
def follow(username: str, db: Session = DB, user=Depends(require_user)):
    u = _user(db, username)
    if u.id != user.id and db.get(Follow, (user.id, u.id)) is None:
        db.add(Follow(follower_id=user.id, followee_id=u.id))
    return _see_other(f"/u/{u.username}")


@router.post("/u/{username}/unfollow", dependencies=CSRF)
def unfollow(username: str, db: Session = DB, user=Depends(require_user)):
    u = _user(db, username)
    db.execute(delete(Follow).where(Follow.follower_id == user.id, Follow.followee_id == u.id))
    return _see_other(f"/u/{u.username}")


@router.get("/feed", response_class=HTMLResponse)
def feed(request: Request, page_no: int = PAGE, db: Session = DB, user=Depends(require_user)):
    size = request.app.state.settings.page_size
    followees = list(db.scalars(select(Follow.followee_id).where(Follow.follower_id == user.id)).all())
    events = queries.feed_events(db, followees, size + 1, (page_no - 1) * size)
    return page(request, "feed.html", events=events[:size], page_no=page_no, has_next=len(events) > size,
                following=len(followees))


# ---- reading lists ----

def _schedule_recommend(request: Request, db: Session, background: BackgroundTasks, list_id: int) -> None:
    """Recompute the list's recommendations after the response (committing first: the task reads the list)."""
    settings = request.app.state.settings
    if settings.recommend_on_change:
        db.commit()
        from .recommend import recommend_list

        background.add_task(recommend_list, request.app.state.sessions, settings, list_id)


@router.get("/lists", response_class=HTMLResponse)
def my_lists(request: Request, page_no: int = PAGE, db: Session = DB, user=Depends(require_user)):
    size = request.app.state.settings.page_size
    lists = list(db.scalars(select(ReadingList).where(ReadingList.owner_id == user.id)
                            .order_by(ReadingList.updated_at.desc(), ReadingList.id.desc())
                            .limit(size + 1).offset((page_no - 1) * size)).all())
    return page(request, "lists.html", lists=lists[:size], page_no=page_no, has_next=len(lists) > size)


@router.post("/lists", dependencies=CSRF)
def create_list(name: str = Form(..., min_length=1, max_length=120), description: str = Form("", max_length=2000),
                public: bool = Form(False), db: Session = DB, user=Depends(require_user)):
    lst = ReadingList(owner_id=user.id, name=name.strip() or "untitled", description=description, public=public)
    db.add(lst)
    db.flush()
    return _see_other(f"/lists/{lst.id}")


@router.get("/lists/{list_id}", response_class=HTMLResponse)
def list_page(request: Request, list_id: int, page_no: int = PAGE, db: Session = DB,
              user=Depends(current_user)):
    lst = visible_list(db, list_id, user)
    size = request.app.state.settings.page_size
    items = db.scalars(select(ListItem).where(ListItem.list_id == lst.id).options(selectinload(ListItem.paper))
                       .order_by(ListItem.position).limit(size).offset((page_no - 1) * size)).all()
    total = db.scalar(select(func.count()).select_from(ListItem).where(ListItem.list_id == lst.id))
    recs = db.scalars(select(Recommendation).where(Recommendation.list_id == lst.id)
                      .options(selectinload(Recommendation.paper)).order_by(Recommendation.rank).limit(10)).all()
    return page(request, "list.html", lst=lst, items=items, total=total, page_no=page_no,
                pages=max(1, -(-total // size)), owner=user is not None and user.id == lst.owner_id, recs=recs)


@router.post("/lists/{list_id}/edit", dependencies=CSRF)
def edit_list(list_id: int, name: str = Form(..., min_length=1, max_length=120),
              description: str = Form("", max_length=2000), public: bool = Form(False),
              db: Session = DB, user=Depends(require_user)):
    lst = own_list(db, list_id, user)
    lst.name, lst.description, lst.public, lst.updated_at = name.strip() or lst.name, description, public, \
        datetime.now(UTC)
    return _see_other(f"/lists/{lst.id}")


@router.post("/lists/{list_id}/delete", dependencies=CSRF)
def delete_list(list_id: int, db: Session = DB, user=Depends(require_user)):
    db.delete(own_list(db, list_id, user))
    return _see_other("/lists")


@router.post("/lists/{list_id}/add", dependencies=CSRF)
def add_to_list(request: Request, background: BackgroundTasks, list_id: int,
                arxiv_id: str = Form(..., max_length=100), db: Session = DB,
                user=Depends(require_user)):
    lst = own_list(db, list_id, user)
    p = paper_by_arxiv(db, arxiv_id)
    if db.scalar(select(ListItem.id).where(ListItem.list_id == lst.id, ListItem.paper_id == p.id)) is None:
        last = db.scalar(select(func.max(ListItem.position)).where(ListItem.list_id == lst.id))
        db.add(ListItem(list_id=lst.id, paper_id=p.id, position=(last or 0) + 1))
        lst.updated_at = datetime.now(UTC)
        _schedule_recommend(request, db, background, lst.id)
    return _see_other(f"/lists/{lst.id}")


@router.post("/lists/{list_id}/remove", dependencies=CSRF)
def remove_from_list(request: Request, background: BackgroundTasks, list_id: int, item_id: int = Form(...),
                     db: Session = DB, user=Depends(require_user)):
    lst = own_list(db, list_id, user)
    db.execute(delete(ListItem).where(ListItem.id == item_id, ListItem.list_id == lst.id))
    lst.updated_at = datetime.now(UTC)
    _schedule_recommend(request, db, background, lst.id)
    return _see_other(f"/lists/{lst.id}")


@router.post("/lists/{list_id}/move", dependencies=CSRF)
def move_in_list(list_id: int, item_id: int = Form(...), direction: str = Form(..., pattern="^(up|down)$"),
                 db: Session = DB, user=Depends(require_user)):
    """Swap an item with its neighbour above or below (positions stay unique)."""
    lst = own_list(db, list_id, user)
    item = db.scalar(select(ListItem).where(ListItem.id == item_id, ListItem.list_id == lst.id))
    if item is None:
        raise not_found("item")
    q = select(ListItem).where(ListItem.list_id == lst.id)
    other = db.scalar(q.where(ListItem.position < item.position).order_by(ListItem.position.desc()) if direction == "up"
                      else q.where(ListItem.position > item.position).order_by(ListItem.position))
    if other is not None:
        a, b = item.position, other.position
        db.execute(update(ListItem).where(ListItem.id == item.id).values(position=b))
        db.execute(update(ListItem).where(ListItem.id == other.id).values(position=a))
        lst.updated_at = datetime.now(UTC)
    return _see_other(f"/lists/{lst.id}")


def bibtex_entry(p: Paper) -> str:
    def esc(s: str) -> str:
        return s.replace("\\", "").replace("{", "\\{").replace("}", "\\}")

    key = "arxiv_" + p.arxiv_id.replace("/", "_").replace(".", "_")
    year = p.published.year if p.published else ""
    authors = " and ".join(esc(a.strip()) for a in p.authors_text.split(",") if a.strip())
    return (f"@misc{{{key},\n  title = {{{esc(p.display_title)}}},\n  author = {{{authors}}},\n  year = {{{year}}},\n"
            f"  eprint = {{{p.arxiv_id}}},\n  archivePrefix = {{arXiv}},\n  primaryClass = {{{p.primary_category}}},\n"
            f"  url = {{{p.abs_url}}}\n}}\n")


@router.get("/lists/{list_id}/bibtex")
def list_bibtex(list_id: int, db: Session = DB, user=Depends(current_user)):
    lst = visible_list(db, list_id, user)
    items = db.scalars(select(ListItem).where(ListItem.list_id == lst.id).options(selectinload(ListItem.paper))
                       .order_by(ListItem.position)).all()
    return PlainTextResponse("\n".join(bibtex_entry(i.paper) for i in items), media_type="application/x-bibtex",
                             headers={"Content-Disposition": f'attachment; filename="list-{lst.id}.bib"'})


@router.post("/papers/{arxiv_id:path}/add", dependencies=CSRF)
def add_paper_to_list(request: Request, background: BackgroundTasks, arxiv_id: str, list_id: int = Form(...),
                      db: Session = DB, user=Depends(require_user)):
    p = paper_by_arxiv(db, arxiv_id)
    add_to_list(request, background, list_id, p.arxiv_id, db, user)
    return _see_other(f"/papers/{p.arxiv_id}")


# ---- notes ----

@router.get("/notes/{note_id}", response_class=HTMLResponse)
def note_page(request: Request, note_id: int, db: Session = DB, user=Depends(current_user)):
    n = db.get(Note, note_id)
    if n is None or not (n.public or (user is not None and n.owner_id == user.id)):
        raise not_found("note")
    return page(request, "note.html", n=n)


@router.post("/papers/{arxiv_id:path}/note", dependencies=CSRF)
def save_note(arxiv_id: str, body: str = Form("", max_length=50000), public: bool = Form(False),
              db: Session = DB, user=Depends(require_user)):
    p = paper_by_arxiv(db, arxiv_id)
    n = db.scalar(select(Note).where(Note.owner_id == user.id, Note.paper_id == p.id))
    if n is None:
        n = Note(owner_id=user.id, paper_id=p.id)
        db.add(n)
    n.body, n.public, n.updated_at = body, public, datetime.now(UTC)
    return _see_other(f"/papers/{p.arxiv_id}")


@router.post("/notes/{note_id}/delete", dependencies=CSRF)
def delete_note(note_id: int, db: Session = DB, user=Depends(require_user)):
    n = db.get(Note, note_id)
    if n is None or n.owner_id != user.id:
        raise not_found("note")
    p = db.get(Paper, n.paper_id)
    db.delete(n)
    return _see_other(f"/papers/{p.arxiv_id}")


@router.get("/notes", response_class=HTMLResponse)
def my_notes(request: Request, page_no: int = PAGE, db: Session = DB, user=Depends(require_user)):
    size = request.app.state.settings.page_size
    notes = db.scalars(select(Note).where(Note.owner_id == user.id).options(selectinload(Note.paper))
                       .order_by(Note.updated_at.desc()).limit(size + 1).offset((page_no - 1) * size)).all()
    return page(request, "notes.html", notes=notes[:size], page_no=page_no, has_next=len(notes) > size)


# ---- accounts ----

@router.get("/register", response_class=HTMLResponse)
def register_form(request: Request, user=Depends(current_user)):
    return page(request, "register.html", error="")


@router.post("/register", dependencies=CSRF)
def register(request: Request, username: str = Form(..., max_length=64), password: str = Form(..., max_length=256),
             display_name: str = Form("", max_length=80), db: Session = DB):
    try:
        u = auth.create_user(db, username, password, display_name)
    except ValueError as e:
        return page(request, "register.html", status_code=400, error=str(e), username=username)
    token = auth.start_session(db, u, request.app.state.settings)
    r = _see_other("/")
    auth.set_session_cookie(r, request, request.app.state.settings, token)
    return r


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = Query("/", max_length=500), user=Depends(current_user)):
    return page(request, "login.html", error="", next=_safe_next(next))


@router.post("/login", dependencies=CSRF)
def login(request: Request, username: str = Form(..., max_length=64), password: str = Form(..., max_length=256),
          next: str = Form("/", max_length=500), db: Session = DB):
    settings = request.app.state.settings
    address = request.client.host if request.client else "unknown"
    try:
        u = auth.authenticate(db, settings, username, password, address)
    except OverflowError as e:
        db.commit()
        r = page(request, "login.html", status_code=429, error=str(e), next=_safe_next(next))
        r.headers["Retry-After"] = str(settings.login_window_s)
        return r
    except PermissionError as e:
        db.commit()  # the failure counts even though the answer is an error page
        return page(request, "login.html", status_code=401, error=str(e), next=_safe_next(next))
    token = auth.start_session(db, u, settings)
    r = _see_other(_safe_next(next))
    auth.set_session_cookie(r, request, settings, token)
    return r


@router.post("/logout", dependencies=CSRF)
def logout(request: Request, db: Session = DB):
    auth.end_session(db, request.cookies.get(auth.SESSION_COOKIE))
    r = _see_other("/")
    r.delete_cookie(auth.SESSION_COOKIE, path="/")
    return r


@router.get("/settings", response_class=HTMLResponse)
def settings_form(request: Request, user=Depends(require_user)):
    return page(request, "settings.html", message="", error="")


@router.post("/settings", dependencies=CSRF)
def save_settings(request: Request, display_name: str = Form("", max_length=80), bio: str = Form("", max_length=5000),
                  current_password: str = Form("", max_length=256), new_password: str = Form("", max_length=256),
                  db: Session = DB, user=Depends(require_user)):
    user.display_name, user.bio = display_name, bio
    if new_password:
        if not auth.verify_password(user.password_hash, current_password):
            return page(request, "settings.html", status_code=400, message="", error="current password is wrong")
        try:
            user.password_hash = auth.hash_password(new_password)
        except ValueError as e:
            return page(request, "settings.html", status_code=400, message="", error=str(e))
    return page(request, "settings.html", message="saved", error="")


# ---- the papers paperzoo implements: their committed report and code ----

def _link(db: Session, name: str) -> PaperzooLink:
    link = db.scalar(select(PaperzooLink).where(PaperzooLink.name == name))
    if link is None:
        raise not_found("paperzoo paper")
    return link


def _report_folder(request: Request, db: Session, name: str, path: str | None) -> tuple[PaperzooLink, Path, str]:
    """(link, report folder, its path under docs/reports) of paper ``name``'s main report (``path`` None) or of its
    report at ``path`` (``electra-ablations``, ``perceiver/fsdd-long``); 404 for a report it does not have."""
    link = _link(db, name)
    if path is None:
        rel = link.report_path.removeprefix("docs/reports/").removesuffix("/report.md") if link.report_path else ""
    else:
        rel = path if any(r.path == path for r in link.reports) else ""
    folder = request.app.state.settings.repo_root / "docs" / "reports" / rel
    if not rel or not (folder / "report.md").is_file():
        raise not_found("report")
    return link, folder, rel


def _report_page(request: Request, db: Session, name: str, path: str | None) -> HTMLResponse:
    link, folder, rel = _report_folder(request, db, name, path)
    row = next((r for r in link.reports if r.path == rel), None)
    base = f"/reports/{name}/files/" if path is None else f"/reports/{name}/{rel}/files/"
    return page(request, "report.html", link=link, p=db.get(Paper, link.paper_id), rel=rel,
                verdict=row.verdict if row else link.verdict, text=(folder / "report.md").read_text(), base=base)


def _report_file(request: Request, db: Session, name: str, path: str | None, filename: str) -> FileResponse:
    _, folder, _ = _report_folder(request, db, name, path)
    file = (folder / filename).resolve()
    if file.parent != folder.resolve() or not file.is_file() or filename.startswith("."):
        raise not_found("file")
    return FileResponse(file, media_type=mimetypes.guess_type(file.name)[0] or "application/octet-stream")


@router.get("/reports/{name}", response_class=HTMLResponse)
def report_page(request: Request, name: str, db: Session = DB, user=Depends(current_user)):
    return _report_page(request, db, name, None)


@router.get("/reports/{name}/files/{filename}")
def report_file(request: Request, name: str, filename: str, db: Session = DB):
    return _report_file(request, db, name, None, filename)


# every report of the paper by its folder: a recipe's main report, or one of another budget (recipe/preset)
@router.get("/reports/{name}/{recipe}", response_class=HTMLResponse)
def recipe_report_page(request: Request, name: str, recipe: str, db: Session = DB, user=Depends(current_user)):
    return _report_page(request, db, name, recipe)


@router.get("/reports/{name}/{recipe}/files/{filename}")
def recipe_report_file(request: Request, name: str, recipe: str, filename: str, db: Session = DB):
    return _report_file(request, db, name, recipe, filename)


@router.get("/reports/{name}/{recipe}/{preset}", response_class=HTMLResponse)
def budget_report_page(request: Request, name: str, recipe: str, preset: str, db: Session = DB,
                       user=Depends(current_user)):
    return _report_page(request, db, name, f"{recipe}/{preset}")


@router.get("/reports/{name}/{recipe}/{preset}/files/{filename}")
def budget_report_file(request: Request, name: str, recipe: str, preset: str, filename: str, db: Session = DB):
    return _report_file(request, db, name, f"{recipe}/{preset}", filename)


@router.get("/code/{name}", response_class=HTMLResponse)
def code_page(request: Request, name: str, db: Session = DB, user=Depends(current_user)):
    link = _link(db, name)
    if not link.code_path:
        raise not_found("code")
    root = request.app.state.settings.repo_root
    folder = root / link.code_path
    files = sorted(str(f.relative_to(root)) for f in folder.rglob("*.py")) if folder.is_dir() else []
    readme = folder / "README.md"
    return page(request, "code.html", link=link, p=db.get(Paper, link.paper_id), files=files,
                readme=readme.read_text() if readme.is_file() else "")
