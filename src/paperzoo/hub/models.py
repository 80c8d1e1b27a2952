"""The hub's tables (SQLAlchemy 2 declarative models); the schema itself is created by the Alembic migrations.

papers <- paper_authors -> authors; paper_versions; mentions (one row per post) and mention_snapshots (per-paper
points at ingest times, for Rising); paperzoo_links (registry name, status, verdict, report); users, sessions,
login_attempts, follows, reading_lists <- list_items, notes, recommendations.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Stored as naive UTC on every backend, read back timezone-aware (SQLite keeps no offsets)."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"datetimes stored in the hub must be timezone-aware, got naive {value!r}")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value, dialect):
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    pass


class Paper(Base):
    __tablename__ = "papers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    arxiv_id: Mapped[str] = mapped_column(String(64), unique=True)  # normalised, without version
    version: Mapped[int] = mapped_column(Integer, default=0)  # latest version seen (0: metadata not ingested yet)
    title: Mapped[str] = mapped_column(Text, default="")
    authors_text: Mapped[str] = mapped_column(Text, default="")  # "A, B, C" (display and search)
    abstract: Mapped[str] = mapped_column(Text, default="")
    categories: Mapped[str] = mapped_column(String(400), default="")  # space-separated, primary first
    primary_category: Mapped[str] = mapped_column(String(40), default="")
    published: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # v1
    updated: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)  # latest version
    doi: Mapped[str] = mapped_column(String(200), default="")
    comment: Mapped[str] = mapped_column(Text, default="")
    journal_ref: Mapped[str] = mapped_column(Text, default="")
    sample: Mapped[bool] = mapped_column(Boolean, default=False)  # from the bundled sample, not live data
    ingested_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    authors: Mapped[list[PaperAuthor]] = relationship(order_by="PaperAuthor.position", cascade="all, delete-orphan")
    versions: Mapped[list[PaperVersion]] = relationship(order_by="PaperVersion.version", cascade="all, delete-orphan")
    link: Mapped[PaperzooLink | None] = relationship(uselist=False, cascade="all, delete-orphan")

    @property
    def display_title(self) -> str:
        return self.title or f"arXiv:{self.arxiv_id} (metadata not ingested yet)"

    @property
    def abs_url(self) -> str:
        return f"https://arxiv.org/abs/{self.arxiv_id}"

    @property
    def pdf_url(self) -> str:
        return f"https://arxiv.org/pdf/{self.arxiv_id}"

    @property
    def category_list(self) -> list[str]:
        return self.categories.split()


class Author(Base):
    __tablename__ = "authors"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(300), unique=True)


class PaperAuthor(Base):
    __tablename__ = "paper_authors"

    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"), index=True)
    author: Mapped[Author] = relationship()


class PaperVersion(Base):
    __tablename__ = "paper_versions"

    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    created: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class PaperzooLink(Base):
    """A paper paperzoo implements: its registry entry and latest committed report."""

    __tablename__ = "paperzoo_links"

    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    status: Mapped[str] = mapped_column(String(20))  # planned | implemented | verified | reproduced
    verdict: Mapped[str] = mapped_column(String(40), default="")  # of the latest committed report, "" if none
    claim: Mapped[str] = mapped_column(Text, default="")
    report_path: Mapped[str] = mapped_column(String(300), default="")  # docs/reports/<name>/report.md
    code_path: Mapped[str] = mapped_column(String(300), default="")  # src/paperzoo/papers/<pkg>/
    report_created: Mapped[str] = mapped_column(String(40), default="")

    reports: Mapped[list[PaperzooReport]] = relationship(order_by="PaperzooReport.path", cascade="all, delete-orphan")


class PaperzooReport(Base):
    """Every committed report of a paper paperzoo implements: each recipe's main report (``docs/reports/<recipe>/``)
    and its reports of other budgets (``docs/reports/<recipe>/<preset>/``)."""

    __tablename__ = "paperzoo_reports"

    path: Mapped[str] = mapped_column(String(200), primary_key=True)  # under docs/reports: "perceiver/fsdd-long"
    link_name: Mapped[str] = mapped_column(ForeignKey("paperzoo_links.name", ondelete="CASCADE"), index=True)
    recipe: Mapped[str] = mapped_column(String(100))
    preset: Mapped[str] = mapped_column(String(100), default="")
    verdict: Mapped[str] = mapped_column(String(40), default="")
    label: Mapped[str] = mapped_column(String(200), default="")  # "electra-ablations: not reproduced (small)"
    created: Mapped[str] = mapped_column(String(40), default="")

    @property
    def url(self) -> str:
        return f"/reports/{self.link_name}/{self.path}"


class Mention(Base):
    """One social post linking a paper (a post linking two papers is two rows)."""

    __tablename__ = "mentions"
    __table_args__ = (UniqueConstraint("source", "post_id", "paper_id"),
                      Index("ix_mentions_paper_time", "paper_id", "posted_at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(40))  # bluesky, mastodon, twitter, sample, ...
    post_id: Mapped[str] = mapped_column(String(300))
    account: Mapped[str] = mapped_column(String(300), index=True)
    posted_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    reposts: Mapped[int] = mapped_column(Integer, default=0)
    likes: Mapped[int] = mapped_column(Integer, default=0)
    url: Mapped[str] = mapped_column(Text, default="")
    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"))
    sample: Mapped[bool] = mapped_column(Boolean, default=False)


class MentionSnapshot(Base):
    """A paper's points (see ranking) at one moment; Rising is the velocity between the last two."""

    __tablename__ = "mention_snapshots"
    __table_args__ = (Index("ix_snap_paper_time", "paper_id", "taken_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"))
    taken_at: Mapped[datetime] = mapped_column(UTCDateTime())
    points: Mapped[float] = mapped_column(Float)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(32), unique=True)  # lower case [a-z0-9_-]
    display_name: Mapped[str] = mapped_column(String(80), default="")
    bio: Mapped[str] = mapped_column(Text, default="")
    password_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    @property
    def shown_name(self) -> str:
        return self.display_name or self.username


class Session(Base):
    __tablename__ = "sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the cookie's token
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())


class LoginAttempt(Base):
    __tablename__ = "login_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(120), index=True)  # "user:<name>" or "ip:<address>"
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Follow(Base):
    __tablename__ = "follows"

    follower_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    followee_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
                                             index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ReadingList(Base):
    __tablename__ = "reading_lists"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(120))
    description: Mapped[str] = mapped_column(Text, default="")
    public: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    owner: Mapped[User] = relationship()
    items: Mapped[list[ListItem]] = relationship(order_by="ListItem.position", cascade="all, delete-orphan")


class ListItem(Base):
    __tablename__ = "list_items"
    __table_args__ = (UniqueConstraint("list_id", "paper_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    list_id: Mapped[int] = mapped_column(ForeignKey("reading_lists.id", ondelete="CASCADE"), index=True)
    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    added_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)

    paper: Mapped[Paper] = relationship()


class Note(Base):
    """A user's Markdown note on a paper (one per user and paper); private unless ``public``."""

    __tablename__ = "notes"
    __table_args__ = (UniqueConstraint("owner_id", "paper_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"), index=True)
    body: Mapped[str] = mapped_column(Text, default="")
    public: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)

    owner: Mapped[User] = relationship()
    paper: Mapped[Paper] = relationship()


class Recommendation(Base):
    """Precomputed recommendations of a reading list (tf-idf + linear SVM, see recommend.py)."""

    __tablename__ = "recommendations"

    list_id: Mapped[int] = mapped_column(ForeignKey("reading_lists.id", ondelete="CASCADE"), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, primary_key=True)
    paper_id: Mapped[int] = mapped_column(ForeignKey("papers.id", ondelete="CASCADE"))
    score: Mapped[float] = mapped_column(Float)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    paper: Mapped[Paper] = relationship()
