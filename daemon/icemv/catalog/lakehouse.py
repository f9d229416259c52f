"""The handles a command needs (catalog, views, Spark), each opened on first use only."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.jdbc import CatalogEndpoint, open_catalog, resolve_endpoint
from icemv.catalog.jdbc_views import ViewStore
from icemv.config import Config
from icemv.identifiers import Identifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Lakehouse:
    def __init__(self, config: Config) -> None:
        self.config = config

    @cached_property
    def endpoint(self) -> CatalogEndpoint:
        return resolve_endpoint(self.config)

    @cached_property
    def catalog(self) -> SqlCatalog:
        return open_catalog(self.config, self.endpoint)

    @cached_property
    def views(self) -> ViewStore:
        return ViewStore(self.catalog)

    @property
    def spark(self) -> SparkSession:
        from icemv.engine.spark import spark_session

        return spark_session(self.config, self.endpoint)

    @property
    def catalog_name(self) -> str:
        return self.config.catalog.name

    def identifier(self, text: str) -> Identifier:
        return Identifier.parse(text, self.config.default_namespace, self.catalog_name)

    def load_table(self, identifier: Identifier) -> Table:
        return self.catalog.load_table(identifier.as_tuple())

    def table_exists(self, identifier: Identifier) -> bool:
        try:
            self.load_table(identifier)
        except NoSuchTableError:
            return False
        return True

    def quoted(self, identifier: Identifier) -> str:
        return identifier.quoted(self.catalog_name)
