"""initial schema: every table, and the full-text index (SQLite FTS5 or a PostgreSQL tsvector)

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('authors',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('login_attempts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=120), nullable=False),
    sa.Column('at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('login_attempts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_login_attempts_key'), ['key'], unique=False)

    op.create_table('papers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('arxiv_id', sa.String(length=64), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('authors_text', sa.Text(), nullable=False),
    sa.Column('abstract', sa.Text(), nullable=False),
    sa.Column('categories', sa.String(length=400), nullable=False),
    sa.Column('primary_category', sa.String(length=40), nullable=False),
    sa.Column('published', sa.DateTime(), nullable=True),
    sa.Column('updated', sa.DateTime(), nullable=True),
    sa.Column('doi', sa.String(length=200), nullable=False),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('journal_ref', sa.Text(), nullable=False),
    sa.Column('sample', sa.Boolean(), nullable=False),
    sa.Column('ingested_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('arxiv_id')
    )
    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('username', sa.String(length=32), nullable=False),
    sa.Column('display_name', sa.String(length=80), nullable=False),
    sa.Column('bio', sa.Text(), nullable=False),
    sa.Column('password_hash', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('username')
    )
    op.create_table('follows',
    sa.Column('follower_id', sa.Integer(), nullable=False),
    sa.Column('followee_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['followee_id'], ['users.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['follower_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('follower_id', 'followee_id')
    )
    with op.batch_alter_table('follows', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_follows_followee_id'), ['followee_id'], unique=False)

    op.create_table('mention_snapshots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('taken_at', sa.DateTime(), nullable=False),
    sa.Column('points', sa.Float(), nullable=False),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('mention_snapshots', schema=None) as batch_op:
        batch_op.create_index('ix_snap_paper_time', ['paper_id', 'taken_at'], unique=False)

    op.create_table('mentions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=40), nullable=False),
    sa.Column('post_id', sa.String(length=300), nullable=False),
    sa.Column('account', sa.String(length=300), nullable=False),
    sa.Column('posted_at', sa.DateTime(), nullable=False),
    sa.Column('reposts', sa.Integer(), nullable=False),
    sa.Column('likes', sa.Integer(), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('sample', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('source', 'post_id', 'paper_id')
    )
    with op.batch_alter_table('mentions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_mentions_account'), ['account'], unique=False)
        batch_op.create_index('ix_mentions_paper_time', ['paper_id', 'posted_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_mentions_posted_at'), ['posted_at'], unique=False)

    op.create_table('notes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('owner_id', sa.Integer(), nullable=False),
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('public', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('owner_id', 'paper_id')
    )
    with op.batch_alter_table('notes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_notes_owner_id'), ['owner_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_notes_paper_id'), ['paper_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_notes_updated_at'), ['updated_at'], unique=False)

    op.create_table('paper_authors',
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('author_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['author_id'], ['authors.id'], ),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('paper_id', 'position')
    )
    with op.batch_alter_table('paper_authors', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_paper_authors_author_id'), ['author_id'], unique=False)

    op.create_table('paper_versions',
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('paper_id', 'version')
    )
    op.create_table('paperzoo_links',
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('verdict', sa.String(length=40), nullable=False),
    sa.Column('claim', sa.Text(), nullable=False),
    sa.Column('report_path', sa.String(length=300), nullable=False),
    sa.Column('code_path', sa.String(length=300), nullable=False),
    sa.Column('report_created', sa.String(length=40), nullable=False),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('paper_id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('reading_lists',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('owner_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('public', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('reading_lists', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_reading_lists_owner_id'), ['owner_id'], unique=False)

    op.create_table('sessions',
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('token_hash')
    )
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_sessions_user_id'), ['user_id'], unique=False)

    op.create_table('list_items',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('list_id', sa.Integer(), nullable=False),
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('added_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['list_id'], ['reading_lists.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('list_id', 'paper_id')
    )
    with op.batch_alter_table('list_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_list_items_added_at'), ['added_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_list_items_list_id'), ['list_id'], unique=False)

    op.create_table('recommendations',
    sa.Column('list_id', sa.Integer(), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.Column('paper_id', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('computed_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['list_id'], ['reading_lists.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['paper_id'], ['papers.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('list_id', 'rank')
    )


    _create_search_index()


# The search index over title, authors and abstract; paperzoo.hub.search queries it.
SQLITE_FTS = [
    "CREATE VIRTUAL TABLE papers_fts USING fts5(title, authors_text, abstract, content='papers', "
    "content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER papers_fts_ai AFTER INSERT ON papers BEGIN INSERT INTO papers_fts(rowid, title, authors_text, "
    "abstract) VALUES (new.id, new.title, new.authors_text, new.abstract); END",
    "CREATE TRIGGER papers_fts_ad AFTER DELETE ON papers BEGIN INSERT INTO papers_fts(papers_fts, rowid, title, "
    "authors_text, abstract) VALUES ('delete', old.id, old.title, old.authors_text, old.abstract); END",
    "CREATE TRIGGER papers_fts_au AFTER UPDATE OF title, authors_text, abstract ON papers BEGIN "
    "INSERT INTO papers_fts(papers_fts, rowid, title, authors_text, abstract) VALUES ('delete', old.id, old.title, "
    "old.authors_text, old.abstract); INSERT INTO papers_fts(rowid, title, authors_text, abstract) "
    "VALUES (new.id, new.title, new.authors_text, new.abstract); END",
]
POSTGRES_FTS = [
    "ALTER TABLE papers ADD COLUMN search tsvector GENERATED ALWAYS AS ("
    "setweight(to_tsvector('english', coalesce(title, '')), 'A') || "
    "setweight(to_tsvector('simple', coalesce(authors_text, '')), 'B') || "
    "setweight(to_tsvector('english', coalesce(abstract, '')), 'C')) STORED",
    "CREATE INDEX ix_papers_search ON papers USING gin (search)",
]


def _create_search_index() -> None:
    dialect = op.get_bind().dialect.name
    for sql in SQLITE_FTS if dialect == "sqlite" else POSTGRES_FTS if dialect == "postgresql" else []:
        op.execute(sql)


def _drop_search_index() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for t in ("papers_fts_ai", "papers_fts_ad", "papers_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {t}")
        op.execute("DROP TABLE IF EXISTS papers_fts")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_papers_search")
        op.execute("ALTER TABLE papers DROP COLUMN IF EXISTS search")


def downgrade() -> None:
    _drop_search_index()
    op.drop_table('recommendations')
    with op.batch_alter_table('list_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_list_items_list_id'))
        batch_op.drop_index(batch_op.f('ix_list_items_added_at'))

    op.drop_table('list_items')
    with op.batch_alter_table('sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_sessions_user_id'))

    op.drop_table('sessions')
    with op.batch_alter_table('reading_lists', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_reading_lists_owner_id'))

    op.drop_table('reading_lists')
    op.drop_table('paperzoo_links')
    op.drop_table('paper_versions')
    with op.batch_alter_table('paper_authors', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_paper_authors_author_id'))

    op.drop_table('paper_authors')
    with op.batch_alter_table('notes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_notes_updated_at'))
        batch_op.drop_index(batch_op.f('ix_notes_paper_id'))
        batch_op.drop_index(batch_op.f('ix_notes_owner_id'))

    op.drop_table('notes')
    with op.batch_alter_table('mentions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_mentions_posted_at'))
        batch_op.drop_index('ix_mentions_paper_time')
        batch_op.drop_index(batch_op.f('ix_mentions_account'))

    op.drop_table('mentions')
    with op.batch_alter_table('mention_snapshots', schema=None) as batch_op:
        batch_op.drop_index('ix_snap_paper_time')

    op.drop_table('mention_snapshots')
    with op.batch_alter_table('follows', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_follows_followee_id'))

    op.drop_table('follows')
    op.drop_table('users')
    op.drop_table('papers')
    with op.batch_alter_table('login_attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_login_attempts_key'))

    op.drop_table('login_attempts')
    op.drop_table('authors')
