"""Every table's and view's metadata location, from one catalog request.

A JDBC catalog keeps them all in one SQL table (`iceberg_tables`), so one query tells
which tables and views exist and, by their metadata location, which changed since a
previous look; a table or view whose location is known loads from that location without
asking the catalog again. All locations come from one statement: one consistent instant.
A catalog may hold far more tables than its MVs read (100,000 rows take 1.5 s to list), so
a listing may be limited to some namespaces' tables (views are then all listed), or to
the tables and views a refresh will read (`identifiers`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError
from icemv.identifiers import Identifier


@dataclass(frozen=True)
class CatalogListing:
    tables: Mapping[Identifier, str]  # identifier -> current metadata location
    views: Mapping[Identifier, str]  # every view
    # Read a table's (view's) metadata at a listed location: a file read, no catalog request.
    read_table: Callable[[Identifier, str], Table]
    read_view: Callable[[Identifier, str], LoadedView]
    # The namespaces whose tables were listed (None: all); a table elsewhere is not missing,
    # only not listed.
    namespaces: frozenset[tuple[str, ...]] | None = None
    # The tables and views asked for by name (None: every view, and the tables of
    # `namespaces`); any other is not missing, only not listed.
    identifiers: frozenset[Identifier] | None = None

    def covers(self, table: Identifier) -> bool:
        """Whether `tables` tells about `table` (listed, or listed as missing)."""
        if self.identifiers is not None:
            return table in self.identifiers
        return self.namespaces is None or table.namespace in self.namespaces

    def covers_view(self, view: Identifier) -> bool:
        """Whether `views` tells about `view` (listed, or listed as missing)."""
        return self.identifiers is None or view in self.identifiers

    def load_table(self, identifier: Identifier) -> Table:
        location = self.tables.get(identifier)
        if location is None:
            raise NoSuchTableError(f"Table does not exist: {identifier}")
        return self.read_table(identifier, location)

    def load_view(self, identifier: Identifier) -> LoadedView:
        location = self.views.get(identifier)
        if location is None:
            raise NoSuchViewError(f"view {identifier} does not exist")
        return self.read_view(identifier, location)
