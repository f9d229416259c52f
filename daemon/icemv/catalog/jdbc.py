"""One catalog, two engines: pyiceberg's SqlCatalog and Spark's Iceberg JdbcCatalog.

Both read and write the same `iceberg_tables` rows (same catalog name, JDBC schema V1 so
that views are rows too). The embedded default starts a private PostgreSQL first: SQLite
would be locked by any live Spark JVM.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError
from sqlalchemy.engine import URL

from icemv.catalog.embedded.server import EmbeddedPostgres
from icemv.config import Config


@dataclass(frozen=True)
class CatalogEndpoint:
    """Where the catalog database is, in the forms each engine wants."""

    sqlalchemy_url: str
    jdbc_url: str
    user: str | None
    password: str | None


def resolve_endpoint(config: Config) -> CatalogEndpoint:
    """Resolve the configured catalog, starting the embedded PostgreSQL if that is the choice."""
    catalog = config.catalog
    uri = catalog.uri
    if catalog.embedded:
        server = EmbeddedPostgres(config.home_path / "catalog-postgres", database="icemv")
        uri = server.start()
    parts = urlsplit(uri)
    if parts.scheme == "sqlite":
        path = uri[len("sqlite:///") :]
        return CatalogEndpoint(f"sqlite:///{path}", f"jdbc:sqlite:{path}", None, None)
    in_uri_password = unquote(parts.password) if parts.password else None
    password = catalog.password.get_secret_value() if catalog.password else in_uri_password
    user = catalog.user or (unquote(parts.username) if parts.username else None)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 5432
    database = unquote(parts.path.lstrip("/"))
    return CatalogEndpoint(
        postgres_sqlalchemy_url(host, port, database, user, password, parts.query),
        f"jdbc:postgresql://{host}:{port}/{database}",
        user,
        password,
    )


def postgres_sqlalchemy_url(
    host: str, port: int, database: str, user: str | None, password: str | None, query: str
) -> str:
    """The psycopg2 URL, every part percent-encoded: a password may hold `@`, `:` or `/`."""
    url = URL.create(
        "postgresql+psycopg2",
        username=user,
        password=password if user else None,
        host=host,
        port=port,
        database=database,
        query=dict(parse_qsl(query)),
    )
    return url.render_as_string(hide_password=False)


def open_catalog(config: Config, endpoint: CatalogEndpoint) -> SqlCatalog:
    properties = {
        "uri": endpoint.sqlalchemy_url,
        "warehouse": config.warehouse_uri,
        "schema_version": "v1",
        **{key: _plain(value) for key, value in config.warehouse.properties.items()},
        **config.catalog.properties,
    }
    if config.warehouse_uri.startswith("file:"):
        Path(config.warehouse_uri[len("file://") :]).mkdir(parents=True, exist_ok=True)
    return SqlCatalog(config.catalog.name, **properties)


def ensure_namespace(catalog: SqlCatalog, namespace: tuple[str, ...]) -> None:
    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace(namespace)


def _plain(value: object) -> str:
    secret = getattr(value, "get_secret_value", None)
    return str(secret() if callable(secret) else value)
