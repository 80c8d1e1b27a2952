"""every committed report of an implemented paper: each recipe's main report and its reports of other budgets

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('paperzoo_reports',
    sa.Column('path', sa.String(length=200), nullable=False),
    sa.Column('link_name', sa.String(length=100), nullable=False),
    sa.Column('recipe', sa.String(length=100), nullable=False),
    sa.Column('preset', sa.String(length=100), nullable=False),
    sa.Column('verdict', sa.String(length=40), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=False),
    sa.Column('created', sa.String(length=40), nullable=False),
    sa.ForeignKeyConstraint(['link_name'], ['paperzoo_links.name'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('path')
    )
    with op.batch_alter_table('paperzoo_reports', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_paperzoo_reports_link_name'), ['link_name'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('paperzoo_reports', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_paperzoo_reports_link_name'))
    op.drop_table('paperzoo_reports')
