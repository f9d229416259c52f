"""Choose the catalog kind by `catalog.type`; each kind is a sibling module.

A backend gives icemv four things: the pyiceberg catalog (tables, namespaces, commits),
a `ViewCatalog`, the Spark catalog properties (under `spark.sql.catalog.<name>.`), and
table loads (a kind may make them cheaper, as REST does with ETags), and, where one
request can tell it, every table's and view's metadata location (JDBC: one query).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icemv.catalog.listing import CatalogListing
from icemv.catalog.local_io import run_small_io_inline
from icemv.catalog.manifest_reads import keep_manifest_reads
from icemv.catalog.manifest_writes import keep_manifest_writes
from icemv.catalog.pyiceberg_config import read_pyiceberg_config_once
from icemv.catalog.views import ViewCatalog
from icemv.config import Config
from icemv.identifiers import Identifier


class CatalogBackend(Protocol):
    @property
    def catalog(self) -> Catalog: ...

    @property
    def views(self) -> ViewCatalog: ...

    @property
    def jdbc_driver(self) -> str | None:
        """The JDBC driver (postgresql / sqlite) Spark's catalog needs, if any."""
        ...

    def spark_properties(self) -> dict[str, str]:
        """Properties of Spark's SparkCatalog, without the `spark.sql.catalog.<name>.` prefix."""
        ...

    def load_table(self, identifier: Identifier) -> Table: ...

    def listing(
        self, namespaces: Collection[tuple[str, ...]] | None = None
    ) -> CatalogListing | None:
        """Every view, and every table (of `namespaces` when given), with its metadata
        location in one request; None when this kind cannot list them so cheaply."""
        ...

    def locate(self, identifiers: Collection[Identifier]) -> CatalogListing | None:
        """These tables and views, with their metadata locations, in one request; None
        when this kind cannot tell them so cheaply."""
        ...


def open_backend(config: Config) -> CatalogBackend:
    """The backend for `config.catalog.type`; nothing connects until first use."""
    keep_manifest_reads()
    keep_manifest_writes()
    read_pyiceberg_config_once()
    if config.warehouse_uri.startswith("file:"):
        run_small_io_inline()
    if config.catalog.type == "rest":
        from icemv.catalog.rest import RestBackend

        return RestBackend(config)
    from icemv.catalog.jdbc import JdbcBackend

    return JdbcBackend(config)
