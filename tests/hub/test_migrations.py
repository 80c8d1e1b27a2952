"""The Alembic migration creates exactly the models' schema (plus the search index) on both engines, upgrades
idempotently and downgrades cleanly."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from paperzoo.hub.db import alembic_config, migrate
from paperzoo.hub.models import Base


def test_migration_matches_the_models_and_round_trips(db_url, backend):
    from alembic import command

    migrate(db_url)  # the fixture's database is already at head: upgrading again is a no-op
    engine = create_engine(db_url)
    try:
        with engine.connect() as c:
            diff = compare_metadata(MigrationContext.configure(c), Base.metadata)
            tables = set(inspect(c).get_table_names())
        # the search index (FTS5 tables, the tsvector column and its index) lives outside the models
        assert [d for d in diff if not any(k in str(d) for k in ("papers_fts", "ix_papers_search", "search"))] == []
        assert set(Base.metadata.tables) <= tables
        if backend == "sqlite":
            assert "papers_fts" in tables
        else:
            assert "search" in {col["name"] for col in inspect(engine).get_columns("papers")}
        command.downgrade(alembic_config(db_url), "base")
        with engine.connect() as c:
            left = set(inspect(c).get_table_names()) - {"alembic_version"}
        assert left == set()
        migrate(db_url)
    finally:
        engine.dispose()
