"""One catalog, two engines: pyiceberg's SqlCatalog and Spark's Iceberg JdbcCatalog.

Both read and write the same `iceberg_tables` rows (same catalog name, JDBC schema V1 so
that views are rows too). The embedded default starts a private PostgreSQL first: SQLite
would be locked by any live Spark JVM.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import (
    DEFAULT_POOL_PRE_PING_VALUE,
    ICEBERG_TABLE_TYPE,
    IcebergTables,
    SqlCatalog,
)
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.types import strtobool
from sqlalchemy import bindparam, create_engine, or_, select, tuple_, update
from sqlalchemy.engine import URL, Engine
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import ColumnElement

from icemv.catalog.embedded.server import EmbeddedPostgres
from icemv.catalog.jdbc_views import VIEW_TYPE, ViewStore
from icemv.catalog.listing import CatalogListing
from icemv.catalog.metadata_updates import applied
from icemv.catalog.namespaces import ensure_namespace
from icemv.config import Config
from icemv.identifiers import Identifier
from icemv.sql.memo import Memo

_Located = Select[str, str, str | None, str | None]

__all__ = ["CatalogEndpoint", "JdbcBackend", "ensure_namespace", "open_catalog", "resolve_endpoint"]


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


def open_catalog(config: Config, endpoint: CatalogEndpoint) -> _SqlCatalog:
    properties = {
        "uri": endpoint.sqlalchemy_url,
        "warehouse": config.warehouse_uri,
        "schema_version": "v1",
        **{key: _plain(value) for key, value in config.warehouse.properties.items()},
        **config.catalog.properties,
    }
    if config.warehouse_uri.startswith("file:"):
        Path(config.warehouse_uri[len("file://") :]).mkdir(parents=True, exist_ok=True)
    return _SqlCatalog(config.catalog.name, **properties)


# Parsed table metadata by file. A metadata file is written once, under a name no other
# file takes, so its location names its content: every reader may share one parse (the
# models are frozen). Kept per process: a fleet's storage tables and their sources.
_parsed: Memo[TableMetadata] = Memo(1024)

# The row's metadata location (tables only: JDBC schema V1 keeps views in the same rows).
_LOCATION = select(IcebergTables.metadata_location).where(
    IcebergTables.catalog_name == bindparam("catalog"),
    IcebergTables.table_namespace == bindparam("namespace"),
    IcebergTables.table_name == bindparam("name"),
    or_(IcebergTables.iceberg_type == ICEBERG_TABLE_TYPE, IcebergTables.iceberg_type.is_(None)),
)

# A table's row moved from the metadata location a commit started from to its new one.
_MOVE = (
    update(IcebergTables)
    .where(
        IcebergTables.catalog_name == bindparam("catalog"),
        IcebergTables.table_namespace == bindparam("namespace"),
        IcebergTables.table_name == bindparam("name"),
        IcebergTables.metadata_location == bindparam("old_location"),
    )
    .values(
        metadata_location=bindparam("new_location"),
        previous_metadata_location=bindparam("old_location"),
    )
)


class _SqlCatalog(SqlCatalog):
    """pyiceberg's SqlCatalog with a cheaper `load_table`: the row read with one SQL
    expression instead of an ORM session (0.8 against 1.3 ms here), and each metadata file
    parsed once (1.0 ms for a table of 30 snapshots). A refresh loads its tables about
    three times; and a cheaper `commit_table` (below).

    `statements` runs single statements in autocommit: a read of one row, or the one
    UPDATE that moves a table's row, is atomic by itself, and the transaction pyiceberg's
    engine wraps around it costs two more round trips (BEGIN, then ROLLBACK or COMMIT):
    0.28 against 0.15 ms for a one-row read here, and the catalog database's CPU.
    """

    @cached_property
    def statements(self) -> Engine:
        """The catalog database in autocommit, for statements atomic on their own: a pool
        of its own (an autocommit option on the shared pool's connections is undone on
        each return, which costs what it saves)."""
        pre_ping = self.properties.get("pool_pre_ping", DEFAULT_POOL_PRE_PING_VALUE)
        return create_engine(
            self.engine.url, isolation_level="AUTOCOMMIT", pool_pre_ping=strtobool(pre_ping)
        )

    def load_table(self, identifier: str | tuple[str, ...]) -> Table:
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        name = Catalog.table_name_from(identifier)
        with self.statements.connect() as connection:
            location = connection.execute(
                _LOCATION, {"catalog": self.name, "namespace": namespace, "name": name}
            ).scalar()
        if not location:
            raise NoSuchTableError(f"Table does not exist: {namespace}.{name}")
        return table_at(self, (*Catalog.identifier_to_tuple(namespace), name), location)

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        """pyiceberg's commit, first tried from the metadata `table` was loaded with.

        pyiceberg loads the table again, checks the requirements against what it loaded,
        applies the updates to it and moves the row from the location it loaded to the new
        one. A metadata file is written once under a new name, so while the row still
        holds `table`'s location, `table`'s metadata is what that load would find: the
        same commit without the load (1.6 ms of a fleet refresh's 75 here) is to move the
        row only from `table`'s location. When the row has moved on (another writer
        committed; its changes may leave the requirements met), pyiceberg's own commit
        decides, from the table as it is now; the metadata file written for the first try
        is then left unreferenced, as a failed commit leaves its own. The updates are
        applied without pyiceberg's deep copy (catalog/metadata_updates.py), and the new
        metadata is kept parsed: it is what the next load of this table reads.
        """
        if not self.engine.dialect.supports_sane_rowcount or isinstance(table, StagedTable):
            return super().commit_table(table, requirements, updates)  # or a new table
        try:
            for requirement in requirements:  # against `table`; pyiceberg's against the row's
                requirement.validate(table.metadata)
        except CommitFailedException:
            return super().commit_table(table, requirements, updates)
        metadata = applied(table.metadata, updates, table.metadata_location)
        if metadata == table.metadata:
            return super().commit_table(table, requirements, updates)
        version = self._parse_metadata_version(table.metadata_location) + 1
        provider = load_location_provider(metadata.location, metadata.properties)
        location = provider.new_table_metadata_file_location(version)
        io = self._load_file_io(properties=metadata.properties, location=location)
        self._write_metadata(metadata, io, location)
        identifier = table.name()
        names = {
            "catalog": self.name,
            "namespace": Catalog.namespace_to_string(Catalog.namespace_from(identifier)),
            "name": Catalog.table_name_from(identifier),
            "old_location": table.metadata_location,
            "new_location": location,
        }
        with self.statements.connect() as connection:  # one UPDATE: atomic by itself
            moved_rows = connection.execute(_MOVE, names).rowcount
        if moved_rows < 1:
            return super().commit_table(table, requirements, updates)
        _parsed.put(location, metadata)
        return CommitTableResponse(metadata=metadata, metadata_location=location)


def table_at(catalog: SqlCatalog, identifier: tuple[str, ...], metadata_location: str) -> Table:
    """The table whose metadata is at `metadata_location`, as pyiceberg's `load_table`
    builds it."""
    metadata = _parsed.get(metadata_location)
    if metadata is None:
        io = load_file_io(catalog.properties, metadata_location)
        metadata = FromInputFile.table_metadata(io.new_input(metadata_location))
        _parsed.put(metadata_location, metadata)
    return Table(
        identifier=identifier,
        metadata=metadata,
        metadata_location=metadata_location,
        io=load_file_io({**catalog.properties, **metadata.properties}, metadata_location),
        catalog=catalog,
    )


class JdbcBackend:
    """The JDBC catalog kind: pyiceberg SqlCatalog, row-based view store, Spark JdbcCatalog."""

    def __init__(self, config: Config) -> None:
        self._config = config

    @cached_property
    def endpoint(self) -> CatalogEndpoint:
        return resolve_endpoint(self._config)

    @cached_property
    def catalog(self) -> _SqlCatalog:
        return open_catalog(self._config, self.endpoint)

    @cached_property
    def views(self) -> ViewStore:
        return ViewStore(self.catalog, self.catalog.statements)

    @property
    def jdbc_driver(self) -> str | None:
        """The JDBC driver Spark needs on its class path."""
        return "sqlite" if self.endpoint.jdbc_url.startswith("jdbc:sqlite") else "postgresql"

    def spark_properties(self) -> dict[str, str]:
        endpoint = self.endpoint
        properties = {
            "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            "uri": endpoint.jdbc_url,
            "jdbc.schema-version": "V1",
            "warehouse": self._config.warehouse_uri,
            # Other writers commit all the time: never serve a cached table.
            "cache-enabled": "false",
        }
        if endpoint.user:
            properties["jdbc.user"] = endpoint.user
        if endpoint.password:
            properties["jdbc.password"] = endpoint.password
        return properties

    def load_table(self, identifier: Identifier) -> Table:
        return self.catalog.load_table(identifier.as_tuple())

    def listing(self, namespaces: Collection[tuple[str, ...]] | None = None) -> CatalogListing:
        """Every view and table of this catalog with its metadata location, in one query;
        only the tables of `namespaces` when given."""
        where = None
        if namespaces is not None:
            names = sorted({".".join(namespace) for namespace in namespaces})
            where = or_(
                IcebergTables.iceberg_type == VIEW_TYPE, IcebergTables.table_namespace.in_(names)
            )
        tables, views = self._locations(self._query(where))
        scope = None if namespaces is None else frozenset(namespaces)
        return CatalogListing(tables, views, self.read_table, self.views.read, scope)

    def locate(self, identifiers: Collection[Identifier]) -> CatalogListing:
        """These tables' and views' metadata locations in one query (a refresh asks for
        the ones it read last time: one round trip instead of one per table and view)."""
        wanted = frozenset(identifiers)
        names = [(".".join(i.namespace), i.name) for i in sorted(wanted, key=str)]
        tables, views = self._locations(self._named, {"names": names}) if names else ({}, {})
        return CatalogListing(tables, views, self.read_table, self.views.read, identifiers=wanted)

    @cached_property
    def _named(self) -> _Located:
        """`locate`'s query, built once: its names are one expanding parameter, so
        SQLAlchemy compiles it once (building and compiling it took ~40 % of a 1 ms
        query here, once per refresh)."""
        names = tuple_(IcebergTables.table_namespace, IcebergTables.table_name)
        return self._query(names.in_(bindparam("names", expanding=True)))

    def _query(self, where: ColumnElement[bool] | None) -> _Located:
        """The metadata location of each table and of each view (`where` they are)."""
        query = select(
            IcebergTables.table_namespace,
            IcebergTables.table_name,
            IcebergTables.metadata_location,
            IcebergTables.iceberg_type,
        ).where(IcebergTables.catalog_name == self.catalog.name)
        return query if where is None else query.where(where)

    def _locations(
        self, query: _Located, parameters: dict[str, object] | None = None
    ) -> tuple[dict[Identifier, str], dict[Identifier, str]]:
        """The tables' and the views' metadata locations `query` finds."""
        with self.catalog.statements.connect() as connection:
            rows = connection.execute(query, parameters or {}).all()
        tables: dict[Identifier, str] = {}
        views: dict[Identifier, str] = {}
        for namespace, name, location, kind in rows:
            if not (namespace and name and location):
                continue  # a row no load would accept either
            found = views if kind == VIEW_TYPE else tables
            found[Identifier(tuple(namespace.split(".")), name)] = location
        return tables, views

    def read_table(self, identifier: Identifier, metadata_location: str) -> Table:
        """The table whose metadata is at `metadata_location`, as `load_table` builds it."""
        return table_at(self.catalog, identifier.as_tuple(), metadata_location)


def _plain(value: object) -> str:
    secret = getattr(value, "get_secret_value", None)
    return str(secret() if callable(secret) else value)
