"""The embedded server's catalog database: created on first use."""

from __future__ import annotations

import psycopg2  # type: ignore[import-untyped, unused-ignore]
import structlog
from psycopg2 import sql  # type: ignore[import-untyped, unused-ignore]

from icemv.errors import EmbeddedPostgresError

log = structlog.get_logger(__name__)

SUPERUSER = "postgres"


def ensure_database(port: int, database: str) -> None:
    try:
        conn = psycopg2.connect(
            host="127.0.0.1", port=port, user=SUPERUSER, dbname="postgres", connect_timeout=10
        )
    except psycopg2.Error as e:
        raise EmbeddedPostgresError(f"cannot connect to PostgreSQL on port {port}: {e}") from e
    try:
        conn.autocommit = True  # CREATE DATABASE cannot run in a transaction
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                log.info("embedded_postgres.database_created", database=database)
    finally:
        conn.close()
