"""What every page set of the hub uses: the database session, the signed-in user, template rendering, 404s.

A new page set (e.g. ``/label``) is an ``APIRouter`` whose handlers take ``db: Session = DB`` and
``user: User = Depends(require_user)`` (or ``current_user`` for optional sign-in), render templates that extend
``base.html`` through :func:`page`, and put ``dependencies=[Depends(verify_csrf)]`` on every POST (forms include
``{{ csrf_field() }}``). Pass it to ``create_app(settings, routers=[router], template_dirs=[folder])``.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from . import auth
from .models import User


def get_db(request: Request) -> Iterator[Session]:
    """One session per request, committed when the handler returns normally, rolled back when it raises. Always
    used as ``Depends(get_db, scope="function")``: the commit then happens before the response is sent, so a client
    never sees a write acknowledged (or a new session cookie) before it is in the database."""
    s = request.app.state.sessions()
    try:
        yield s
        s.commit()
    except BaseException:
        s.expunge_all()  # objects stay readable (the signed-in user on the error page) after the rollback
        s.rollback()
        raise
    finally:
        s.close()


# the session dependency every handler takes: ``db: Session = DB``
DB = Depends(get_db, scope="function")


def current_user(request: Request, db: Session = DB) -> User | None:
    user = auth.user_for_token(db, request.cookies.get(auth.SESSION_COOKIE))
    request.state.user = user
    return user


class LoginRequired(Exception):
    pass


def require_user(user: User | None = Depends(current_user)) -> User:
    if user is None:
        raise LoginRequired()
    return user


def not_found(what: str = "page") -> HTTPException:
    """The one answer for anything missing or private to someone else (never reveals that it exists)."""
    return HTTPException(404, f"no such {what}")


def page(request: Request, template: str, status_code: int = 200, **context) -> HTMLResponse:
    """Render ``template`` (which extends base.html) with the signed-in user, the CSRF field and the settings."""
    templates = request.app.state.templates
    ctx = {"request": request, "user": getattr(request.state, "user", None),
           "settings": request.app.state.settings, **context}
    return templates.TemplateResponse(request, template, ctx, status_code=status_code)
