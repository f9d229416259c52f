"""The handles a command needs (catalog, views, Spark), each opened on first use only."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.backends import CatalogBackend, open_backend
from icemv.catalog.views import ViewCatalog
from icemv.config import Config
from icemv.engine.semantics import SessionSemantics, session_semantics
from icemv.errors import SparkUnavailableError
from icemv.identifiers import Identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Lakehouse:
    def __init__(
        self, config: Config, *, spark: bool = True, semantics: SessionSemantics | None = None
    ) -> None:
        """`spark=False`: a lakehouse without Spark (a refresh worker process); asking for
        it raises SparkUnavailableError. `semantics`: its Spark session's, when known
        without asking the session (a worker is given its daemon's)."""
        self.config = config
        self.has_spark = spark
        self._semantics = semantics

    @cached_property
    def backend(self) -> CatalogBackend:
        """The configured catalog kind (JDBC or REST)."""
        return open_backend(self.config)

    @property
    def catalog(self) -> Catalog:
        return self.backend.catalog

    @property
    def views(self) -> ViewCatalog:
        return self.backend.views

    @property
    def spark(self) -> SparkSession:
        if not self.has_spark:
            raise SparkUnavailableError("this process refreshes on the embedded engine only")
        from icemv.engine.spark import spark_session

        return spark_session(self.config, self.backend)

    @property
    def semantics(self) -> SessionSemantics:
        """The Spark session's ANSI mode and time zone (engine/semantics.py), read once
        from the session, which this starts if it is not running; SparkUnavailableError
        without Spark unless they were given."""
        if self._semantics is None:
            self._semantics = session_semantics(self.spark)
        return self._semantics

    @property
    def catalog_name(self) -> str:
        return self.config.catalog.name

    def identifier(self, text: str) -> Identifier:
        return Identifier.parse(text, self.config.default_namespace, self.catalog_name)

    def load_table(self, identifier: Identifier) -> Table:
        return self.backend.load_table(identifier)

    def table_exists(self, identifier: Identifier) -> bool:
        try:
            self.load_table(identifier)
        except NoSuchTableError:
            return False
        return True

    def quoted(self, identifier: Identifier) -> str:
        return identifier.quoted(self.catalog_name)
