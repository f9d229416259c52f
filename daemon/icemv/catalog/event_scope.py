"""Which catalog events are about the configured catalog.

A Kafka topic may carry events of several catalogs or warehouses. Polaris names the
catalog (`catalog_name`, which a REST client addresses as its `warehouse`); Lakekeeper
names the warehouse by id (`warehouse-id`, which its server hands out as the REST path
`prefix`). An event naming another one is skipped with a counted reason.
"""

from __future__ import annotations

from collections.abc import Callable

from icemv.catalog.backends import CatalogBackend
from icemv.config import Config

# (catalog, warehouse) named by an event -> skip reason, or None to route it.
EventScope = Callable[[str | None, str | None], str | None]


def event_scope(config: Config, backend: CatalogBackend) -> EventScope:
    catalog = config.catalog
    names = {catalog.name}
    if catalog.type == "rest" and catalog.warehouse:
        names.add(catalog.warehouse)

    def known_warehouse(warehouse: str) -> bool:
        if warehouse in (catalog.warehouse, catalog.prefix):
            return True
        # The server's prefix, known once the client has fetched GET /v1/config.
        return warehouse == backend.catalog.properties.get("prefix")

    def check(event_catalog: str | None, event_warehouse: str | None) -> str | None:
        if event_catalog is not None and event_catalog not in names:
            return "other-catalog"
        rest = catalog.type == "rest"
        if rest and event_warehouse is not None and not known_warehouse(event_warehouse):
            return "other-warehouse"
        return None

    return check
