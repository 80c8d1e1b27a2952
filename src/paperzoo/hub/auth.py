"""Accounts, sessions, CSRF and the login rate limit.

* Passwords: argon2id (argon2-cffi's defaults).
* Sessions: a random token in an HttpOnly, SameSite=Lax cookie (Secure over https); the database keeps only its
  sha256, so logout and expiry are server-side.
* CSRF: every state change is a POST carrying ``csrf_token`` (form field or ``X-CSRF-Token`` header) equal to
  HMAC(secret, the ``pz_csrf`` cookie's nonce): a page of another site can neither read the nonce nor forge the MAC.
* Login rate limit: at most N failures per username and per client address in a sliding window, then 429.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from fastapi import HTTPException, Request
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from .config import Settings
from .models import LoginAttempt, User
from .models import Session as DbSession

SESSION_COOKIE = "pz_session"
CSRF_COOKIE = "pz_csrf"
USERNAME = re.compile(r"^[a-z0-9][a-z0-9_-]{2,31}$")
_hasher = PasswordHasher()


def hash_password(password: str) -> str:
    check_password(password)
    return _hasher.hash(password)


def verify_password(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


def check_username(name: str) -> str:
    name = (name or "").strip().lower()
    if not USERNAME.match(name):
        raise ValueError("username must be 3-32 characters: lower-case letters, digits, '_' or '-', starting with a "
                         "letter or digit")
    return name


def check_password(password: str) -> None:
    if not isinstance(password, str) or not 8 <= len(password) <= 256:
        raise ValueError("password must be 8 to 256 characters")


def create_user(s: Session, username: str, password: str, display_name: str = "") -> User:
    name = check_username(username)
    if s.scalar(select(User.id).where(User.username == name)) is not None:
        raise ValueError(f"username {name!r} is taken")
    user = User(username=name, password_hash=hash_password(password), display_name=(display_name or "")[:80])
    s.add(user)
    s.flush()
    return user


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(s: Session, user: User, settings: Settings) -> str:
    token = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    s.add(DbSession(token_hash=_token_hash(token), user_id=user.id, created_at=now,
                    expires_at=now + timedelta(days=settings.session_days)))
    return token


def end_session(s: Session, token: str | None) -> None:
    if token:
        s.execute(delete(DbSession).where(DbSession.token_hash == _token_hash(token)))


def user_for_token(s: Session, token: str | None) -> User | None:
    if not token:
        return None
    row = s.get(DbSession, _token_hash(token))
    if row is None or row.expires_at < datetime.now(UTC):
        return None
    return s.get(User, row.user_id)


def cookie_secure(request: Request, settings: Settings) -> bool:
    return settings.secure_cookies if settings.secure_cookies is not None else request.url.scheme == "https"


def set_session_cookie(response, request: Request, settings: Settings, token: str) -> None:
    response.set_cookie(SESSION_COOKIE, token, max_age=settings.session_days * 86400, httponly=True, samesite="lax",
                        secure=cookie_secure(request, settings), path="/")


# ---- CSRF ----

def csrf_token(settings: Settings, nonce: str) -> str:
    return hmac.new(settings.secret_key.encode(), nonce.encode(), hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


async def verify_csrf(request: Request) -> None:
    """FastAPI dependency of every POST route: 403 unless the request carries the right token."""
    settings: Settings = request.app.state.settings
    nonce = request.cookies.get(CSRF_COOKIE, "")
    sent = request.headers.get("x-csrf-token", "")
    if not sent:
        ctype = request.headers.get("content-type", "")
        if ctype.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
            sent = str((await request.form()).get("csrf_token", ""))
    if not nonce or not sent or not hmac.compare_digest(sent, csrf_token(settings, nonce)):
        raise HTTPException(403, "CSRF check failed: reload the page and try again")


# ---- login rate limit ----

def login_blocked(s: Session, settings: Settings, username: str, address: str) -> bool:
    since = datetime.now(UTC) - timedelta(seconds=settings.login_window_s)
    for key in (f"user:{username}", f"ip:{address}"):
        n = s.scalar(select(func.count()).select_from(LoginAttempt).where(LoginAttempt.key == key,
                                                                           LoginAttempt.at >= since))
        if n >= settings.login_max_failures:
            return True
    return False


def record_failure(s: Session, username: str, address: str) -> None:
    now = datetime.now(UTC)
    s.add_all([LoginAttempt(key=f"user:{username}"[:120], at=now), LoginAttempt(key=f"ip:{address}"[:120], at=now)])


def authenticate(s: Session, settings: Settings, username: str, password: str, address: str) -> User:
    """The user, or ``PermissionError`` (wrong name or password) / ``OverflowError`` (rate limited)."""
    name = (username or "").strip().lower()[:64]
    if login_blocked(s, settings, name, address):
        raise OverflowError("too many failed logins: wait a few minutes")
    user = s.scalar(select(User).where(User.username == name))
    if user is None:
        _hasher.hash(password or "x")  # the same work as a real check, so timing does not reveal names
    if user is None or not verify_password(user.password_hash, password or ""):
        record_failure(s, name, address)
        raise PermissionError("wrong username or password")
    return user
