"""Shared fixtures: a real PostgreSQL catalog database, a warehouse dir, one local Spark."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from icemv.catalog.jdbc import ensure_namespace
from icemv.catalog.lakehouse import Lakehouse
from icemv.config import Config, parse_config
from tests.kafka_broker import kafka_broker  # noqa: F401  (session fixture)
from tests.support.s3 import JARS_WHEEL, S3Server, s3_test_jars, start_moto

ADMIN_URL = os.environ.get("ICEMV_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _reachable(url: str) -> bool:
    try:
        psycopg2.connect(url, connect_timeout=3).close()
    except psycopg2.OperationalError:
        return False
    return True


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The machine's PostgreSQL if it runs, else icemv's own embedded one."""
    if _reachable(ADMIN_URL):
        yield ADMIN_URL
        return
    from icemv.catalog.embedded.server import EmbeddedPostgres

    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data", database="postgres")
    yield server.start()
    server.stop()


def create_database(admin_url: str) -> str:
    name = f"icemv_test_{uuid.uuid4().hex[:10]}"
    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    connection.close()
    return admin_url.rsplit("/", 1)[0] + "/" + name


def drop_database(admin_url: str, url: str) -> None:
    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
    connection.close()


@pytest.fixture(scope="session")
def pg_database(pg_admin_url: str) -> Iterator[str]:
    url = create_database(pg_admin_url)
    yield url
    drop_database(pg_admin_url, url)


@pytest.fixture(scope="session")
def storage_kind(request: pytest.FixtureRequest) -> str:
    """Where `test_config`'s warehouse lives: "local" unless a test parametrizes it
    indirectly: `@pytest.mark.parametrize("storage_kind", STORAGE_KINDS, indirect=True)`
    (tests.support.s3.STORAGE_KINDS)."""
    return str(getattr(request, "param", "local"))


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Server]:
    server, handle = start_moto()
    yield server
    handle.stop()


def warehouse_section(
    storage_kind: str, root: Path, request: pytest.FixtureRequest
) -> dict[str, Any]:
    if storage_kind == "local":
        return {"location": str(root / "warehouse")}
    if not s3_test_jars():
        pytest.fail(f"S3 tests need the S3FileIO jars: pip install --no-deps {JARS_WHEEL}")
    server: S3Server = request.getfixturevalue("moto_s3")
    return server.warehouse(server.create_bucket())


@pytest.fixture(scope="session")
def test_config(
    pg_database: str,
    pg_admin_url: str,
    storage_kind: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Config]:
    root = tmp_path_factory.mktemp("lakehouse")
    # Each storage kind has its own catalog database: a daemon polls every MV it finds.
    database = pg_database if storage_kind == "local" else create_database(pg_admin_url)
    yield parse_config(
        {
            "home": str(root),
            "catalog": {"uri": database},
            "warehouse": warehouse_section(storage_kind, root, request),
            # The S3 jars are always on the classpath: the first session starts the one JVM.
            "spark": {
                "master": "local[2]",
                "driver_memory": "1g",
                "shuffle_partitions": 2,
                "extra_jars": s3_test_jars(),
            },
        }
    )
    if database != pg_database:
        drop_database(pg_admin_url, database)


@pytest.fixture(scope="session")
def lakehouse(test_config: Config) -> Iterator[Lakehouse]:
    lakehouse = Lakehouse(test_config)
    yield lakehouse
    from icemv.engine.spark import stop_spark

    stop_spark()


@pytest.fixture
def namespace(lakehouse: Lakehouse) -> str:
    """A namespace of this test's own, so tests sharing the catalog never collide."""
    name = f"t_{uuid.uuid4().hex[:8]}"
    ensure_namespace(lakehouse.catalog, (name,))
    return name


@pytest.fixture
def sqlite_lakehouse(tmp_path: Path) -> Lakehouse:
    """A lakehouse on a SQLite-file catalog with namespace `nyc`; no Spark (SQLite + JVM lock)."""
    config = parse_config(
        {
            "catalog": {"uri": f"sqlite:///{tmp_path / 'catalog.db'}"},
            "warehouse": {"location": str(tmp_path / "warehouse")},
        }
    )
    lakehouse = Lakehouse(config)
    ensure_namespace(lakehouse.catalog, ("nyc",))
    return lakehouse
