"""Shared metadata with a constraint naming convention, and column helpers."""

import random
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlmodel import SQLModel

SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = SQLModel.metadata


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> uuid.UUID:
    return uuid.uuid4()


_rng = random.Random()


def time_ordered_id(at: datetime) -> uuid.UUID:
    """A UUIDv7 (RFC 9562): the milliseconds of `at`, then 74 random bits. Ids made later
    sort later, so a table keyed by them grows at one end of its index. For ids that are
    not secrets (whoever may see the row is decided by its other columns)."""
    ms = int(at.timestamp() * 1000) & ((1 << 48) - 1)
    rand = _rng.getrandbits(74)
    return uuid.UUID(
        int=(ms << 80)
        | (0x7 << 76)
        | ((rand >> 62) << 64)
        | (0b10 << 62)
        | (rand & ((1 << 62) - 1))
    )


def table_of(model: type[SQLModel]) -> sa.Table:
    """A table model's Core ``Table``, typed (SQLModel's stubs don't declare ``__table__``)."""
    table = sa.inspect(model).local_table
    if not isinstance(table, sa.Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return table


def row_columns(fields: Sequence[str], model: type[SQLModel]) -> tuple[str, ...]:
    """The model's column names for a plain row's fields, in the row's order: a raw-SQL read
    takes its select list from the table model, never from a hand-written list. A field is
    named like the model's attribute (`meta` reads the `metadata` column); a field the model
    does not have fails at import."""
    mapped = sa.inspect(model).columns
    missing = [f for f in fields if f not in mapped]
    if missing:
        raise TypeError(f"{model.__name__} has no column for {missing}")
    return tuple(mapped[f].name for f in fields)


def ts_column(**kw: object) -> sa.Column:
    return sa.Column(sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now(), **kw)  # type: ignore[arg-type]


def counter_column(*, big: bool = False) -> sa.Column:
    """A count that starts at 0 (runs, attempts, tokens): not null, 0 by default."""
    return sa.Column(sa.BigInteger if big else sa.Integer, nullable=False, server_default="0")


def optional_ts_column() -> sa.Column:
    """A moment that may not have come yet (started, finished, invalidated...)."""
    return sa.Column(sa.DateTime(timezone=True))


def tenant_fk() -> sa.Column:
    """`tenant_id` of a global table (tenants' API keys)."""
    return sa.Column(
        sa.Uuid, sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False, index=True
    )


def tenant_key() -> sa.Column:
    """`tenant_id` of a tenant-owned table: the first column of its primary key, unique
    constraints and foreign keys, the key Citus distributes by and PostgreSQL partitions by
    (`app.core.partitions`)."""
    return sa.Column(sa.Uuid, sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)


def tenant_pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    """The primary key (tenant_id, *columns) of a tenant-owned table, in that order."""
    return sa.PrimaryKeyConstraint("tenant_id", *columns, name=f"pk_{table}")


def session_fk(table: str) -> sa.ForeignKeyConstraint:
    """(tenant_id, session_id) -> sessions: the rows go with their session."""
    return sa.ForeignKeyConstraint(
        ["tenant_id", "session_id"],
        ["sessions.tenant_id", "sessions.id"],
        ondelete="CASCADE",
        name=f"fk_{table}_session_id_sessions",
    )
