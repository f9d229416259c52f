"""One REST catalog, two engines: pyiceberg's RestCatalog and Spark's Iceberg RESTCatalog.

Both are configured from one property map, because both spell the REST client settings
the same way (`uri`, `warehouse`, `prefix`, `credential`, `token`, `oauth2-server-uri`,
`scope`, `header.<name>`). Table loads use the REST spec's ETag: the last answer per
table is kept, and `If-None-Match` lets an unchanged table come back as a bodiless 304,
which keeps the daemon's polls cheap.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from functools import cached_property

from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.rest_http import RestHttp, raise_for_status
from icemv.catalog.rest_views import RestViewStore
from icemv.config import Config
from icemv.identifiers import Identifier

TABLE = "namespaces/{namespace}/tables/{name}"


def rest_properties(config: Config) -> dict[str, str]:
    """The REST client properties both engines take (secrets in clear: never log this)."""
    catalog = config.catalog
    properties: dict[str, str] = {"uri": catalog.uri}
    optional = {
        "warehouse": catalog.warehouse,
        "prefix": catalog.prefix,
        "oauth2-server-uri": catalog.oauth2_server_uri,
        "scope": catalog.scope,
        "credential": catalog.credential.get_secret_value() if catalog.credential else None,
        "token": catalog.token.get_secret_value() if catalog.token else None,
    }
    properties.update({key: value for key, value in optional.items() if value is not None})
    for name, value in catalog.headers.items():
        properties[f"header.{name}"] = value.get_secret_value()
    properties.update(catalog.properties)
    return properties


def _file_io_properties(config: Config) -> dict[str, str]:
    plain: dict[str, str] = {}
    for key, value in config.warehouse.properties.items():
        secret = getattr(value, "get_secret_value", None)
        plain[key] = str(secret() if callable(secret) else value)
    return plain


class RestBackend:
    """The REST catalog kind: pyiceberg catalog, view store, Spark properties, table loads."""

    jdbc_driver: str | None = None

    def __init__(self, config: Config) -> None:
        self._config = config
        self._etags: dict[Identifier, tuple[str, Table]] = {}
        self._lock = threading.Lock()
        self.not_modified = 0  # table loads answered 304 (for tests and benchmarks)

    @cached_property
    def catalog(self) -> RestCatalog:
        return RestCatalog(
            self._config.catalog.name,
            **{**_file_io_properties(self._config), **rest_properties(self._config)},
        )

    @cached_property
    def http(self) -> RestHttp:
        return RestHttp(self.catalog)

    @cached_property
    def views(self) -> RestViewStore:
        return RestViewStore(self.catalog, self.http)

    def spark_properties(self) -> dict[str, str]:
        return {
            "type": "rest",
            **rest_properties(self._config),
            # Other writers commit all the time: never serve a cached table.
            "cache-enabled": "false",
        }

    def listing(self, namespaces: Collection[tuple[str, ...]] | None = None) -> None:
        """The REST API lists names, not metadata locations: loads are conditional instead."""
        return None

    def locate(self, identifiers: Collection[Identifier]) -> None:
        """Likewise: one conditional load per table and view."""
        return None

    def load_table(self, identifier: Identifier) -> Table:
        """loadTable with If-None-Match: an unchanged table costs a 304 and no metadata parse."""
        with self._lock:
            cached = self._etags.get(identifier)
        headers = {"If-None-Match": cached[0]} if cached else None
        response = self.http.request("GET", self.http.url(TABLE, identifier), headers=headers)
        if response.status_code == 404:
            with self._lock:
                self._etags.pop(identifier, None)
            raise NoSuchTableError(f"Table does not exist: {identifier}")
        if response.status_code == 304 and cached is not None:
            self.not_modified += 1
            return _copy(cached[1])
        raise_for_status(response, f"load table {identifier}")
        table = self.http.table(identifier, response.text)
        etag = response.headers.get("ETag")
        if etag:
            with self._lock:
                self._etags[identifier] = (etag, _copy(table))
        return table


def _copy(table: Table) -> Table:
    """A Table of its own: pyiceberg updates a Table in place when it commits through it."""
    return Table(
        identifier=table.name(),
        metadata=table.metadata,
        metadata_location=table.metadata_location,
        io=table.io,
        catalog=table.catalog,
        config=table.config,
    )
