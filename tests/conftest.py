"""Shared fixtures: a real PostgreSQL catalog database, a warehouse dir, one local Spark.

`catalog_kind` picks the catalog behind `test_config` / `lakehouse`: "jdbc" unless a test
module parametrizes it (`CATALOG_KINDS` runs the module on JDBC and on a real REST server).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg2
import pytest

from icemv.catalog.lakehouse import Lakehouse
from icemv.catalog.namespaces import ensure_namespace
from icemv.config import Config, parse_config
from tests.kafka_broker import kafka_broker  # noqa: F401  (session fixture)
from tests.support.rest_catalog import RestCatalogServer, start_rest_catalog

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


# Run a module on both catalog kinds: `pytestmark = [..., CATALOG_KINDS]`.
CATALOG_KINDS = pytest.mark.parametrize(
    "catalog_kind", ["jdbc", "rest"], indirect=True, scope="session"
)


@pytest.fixture(scope="session")
def catalog_kind(request: pytest.FixtureRequest) -> str:
    kind: str = getattr(request, "param", "jdbc")
    return kind


@pytest.fixture(scope="session")
def rest_catalog(
    pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RestCatalogServer]:
    """A real Iceberg REST catalog (Iceberg's CatalogHandlers) on a database of its own."""
    url = create_database(pg_admin_url)
    parts = urlsplit(url)
    jdbc_url = f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"
    warehouse = tmp_path_factory.mktemp("rest-warehouse")
    log = tmp_path_factory.mktemp("rest-log") / "server.log"
    server = start_rest_catalog(jdbc_url, parts.username, warehouse.as_uri(), log)
    yield server
    server.stop()
    drop_database(pg_admin_url, url)


def rest_catalog_section(server: RestCatalogServer) -> dict[str, str]:
    """The `catalog:` config of a REST catalog (OAuth2 client credentials, as users would)."""
    return {
        "type": "rest",
        "uri": server.uri,
        "warehouse": "icemv-test",
        "credential": server.credential,
        "scope": "catalog",
    }


@pytest.fixture(scope="session")
def test_config(
    request: pytest.FixtureRequest,
    catalog_kind: str,
    pg_database: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Config:
    root = tmp_path_factory.mktemp("lakehouse")
    catalog: dict[str, str] = {"uri": pg_database}
    warehouse = root / "warehouse"
    if catalog_kind == "rest":
        server: RestCatalogServer = request.getfixturevalue("rest_catalog")
        catalog = rest_catalog_section(server)
    return parse_config(
        {
            "home": str(root),
            "catalog": catalog,
            "warehouse": {"location": str(warehouse)},
            "spark": {"master": "local[2]", "driver_memory": "1g", "shuffle_partitions": 2},
        }
    )


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
