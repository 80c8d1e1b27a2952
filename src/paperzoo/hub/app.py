"""The app factory: ``create_app(settings)`` builds the FastAPI application (pages, JSON API, feeds, static files)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import ChoiceLoader, FileSystemLoader, pass_context
from markupsafe import Markup, escape

from . import auth
from .config import PACKAGE_DIR, Settings
from .db import make_engine, session_factory
from .deps import LoginRequired
from .queries import RankCache
from .render import markdown

CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'; form-action 'self'")


@pass_context
def _csrf_field(ctx) -> Markup:
    """The hidden CSRF input of a form (``{{ csrf_field() }}``)."""
    return Markup(f'<input type="hidden" name="csrf_token" value="{escape(ctx["request"].state.csrf)}">')


def create_app(settings: Settings, routers: Sequence = (), template_dirs: Sequence[Path] = ()) -> FastAPI:
    from . import api, feeds, label, web

    app = FastAPI(title="paperzoo hub", version="1", docs_url="/api/docs", redoc_url=None,
                  openapi_url="/api/openapi.json",
                  description="The hub's data as JSON: every page's list, paper, user and reading list.")
    app.state.settings = settings
    app.state.engine = make_engine(settings.db_url)
    app.state.sessions = session_factory(app.state.engine)
    app.state.rank_cache = RankCache(settings.ranking_cache_s)
    loader = ChoiceLoader([FileSystemLoader([str(d) for d in template_dirs] + [str(PACKAGE_DIR / "templates")])])
    templates = Jinja2Templates(directory=str(PACKAGE_DIR / "templates"))
    templates.env.loader = loader
    templates.env.globals["markdown"] = markdown
    templates.env.globals["csrf_field"] = _csrf_field
    app.state.templates = templates

    @app.middleware("http")
    async def csrf_cookie_and_headers(request: Request, call_next):
        nonce = request.cookies.get(auth.CSRF_COOKIE)
        fresh = nonce is None
        nonce = nonce or auth.new_nonce()
        token = auth.csrf_token(settings, nonce)
        request.state.csrf = token
        request.state.user = None
        response = await call_next(request)
        if fresh:
            response.set_cookie(auth.CSRF_COOKIE, nonce, httponly=True, samesite="lax", path="/",
                                secure=auth.cookie_secure(request, settings))
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, exc: LoginRequired):
        return RedirectResponse(f"/login?next={request.url.path}", status_code=303)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        html = templates.get_template("error.html").render(request=request, user=getattr(request.state, "user",
                                                                                          None),
                                                           status=exc.status_code, detail=exc.detail,
                                                           settings=settings)
        return HTMLResponse(html, status_code=exc.status_code, headers=exc.headers)

    app.mount("/static", StaticFiles(directory=str(PACKAGE_DIR / "static")), name="static")
    app.include_router(web.router)
    app.include_router(feeds.router)
    app.include_router(api.router)
    app.include_router(label.router)
    for r in routers:
        app.include_router(r)
    return app
