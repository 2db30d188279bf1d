"""Async Alembic environment. The URL comes from `sqlalchemy.url` if the caller set it
(tests, the embedded default), otherwise from the settings."""

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

import app.models  # noqa: F401  (registers every table)
from app.core import citus, partitions
from app.core.config import async_dsn, get_settings
from app.models.base import metadata

config = context.config
target_metadata = metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or get_settings().database_url
    if not url:
        raise RuntimeError("DATABASE_URL is not set")
    return async_dsn(url)


def do_run_migrations(connection: Connection) -> None:
    external = connection.in_transaction()
    on_citus = citus.installed(connection)
    if not external:
        connection.commit()  # that read's transaction; the migrations run in their own
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        include_name=partitions.include_name,
        include_object=partitions.include_object,
    )
    with context.begin_transaction():
        if on_citus:
            citus.prepare(connection)
        context.run_migrations()
        if on_citus:
            # every tenant-owned table distributed by tenant, the ones a migration just
            # added included (app.core.citus)
            citus.distribute(connection)


async def run_async_migrations() -> None:
    engine = create_async_engine(_url())
    async with engine.connect() as connection:
        await connection.run_sync(do_run_migrations)
    await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    existing = config.attributes.get("connection")
    if existing is not None:
        do_run_migrations(existing)
    else:
        asyncio.run(run_async_migrations())
