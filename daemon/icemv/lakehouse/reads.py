"""Catalog reads of one refresh (or one command), each table and view loaded at most once.

A refresh used to load each source table about four times (freshness, analysis,
pinning, change classification) and the storage table three times: each load is a JDBC
query plus a metadata JSON read. One `CatalogReads` per refresh attempt serves them all
from the first load, which also makes every step see the same table state. It is also
the `SourceResolver` the pure SQL passes (`sql/analysis`, `sql/pinning`) ask.
"""

from __future__ import annotations

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError
from icemv.identifiers import Identifier
from icemv.lakehouse.handles import Lakehouse
from icemv.sql.sources import TableInfo, ViewInfo
from icemv.sql.state import is_state_column


class CatalogReads:
    """Cached table and view loads; not thread-safe (one per refresh attempt)."""

    def __init__(self, lakehouse: Lakehouse) -> None:
        self.lakehouse = lakehouse
        self._tables: dict[Identifier, Table | None] = {}
        self._views: dict[Identifier, LoadedView | None] = {}
        self.table_loads = 0  # catalog round trips, for tests and tuning
        self.view_loads = 0

    @property
    def catalog_name(self) -> str:
        return self.lakehouse.catalog_name

    def find_table(self, identifier: Identifier) -> Table | None:
        if identifier not in self._tables:
            self.table_loads += 1
            try:
                self._tables[identifier] = self.lakehouse.load_table(identifier)
            except NoSuchTableError:
                self._tables[identifier] = None
        return self._tables[identifier]

    def forget(self, identifier: Identifier) -> None:
        """Load `identifier` again on next use: it was changed since it was loaded."""
        self._tables.pop(identifier, None)

    def load_table(self, identifier: Identifier) -> Table:
        table = self.find_table(identifier)
        if table is None:
            raise NoSuchTableError(f"Table does not exist: {identifier}")
        return table

    def find_view(self, identifier: Identifier) -> LoadedView | None:
        if identifier not in self._views:
            self.view_loads += 1
            try:
                self._views[identifier] = self.lakehouse.views.load(identifier)
            except NoSuchViewError:
                self._views[identifier] = None
        return self._views[identifier]

    def load_view(self, identifier: Identifier) -> LoadedView:
        view = self.find_view(identifier)
        if view is None:
            raise NoSuchViewError(f"no view {identifier}")
        return view

    # --- SourceResolver

    def table(self, identifier: Identifier) -> TableInfo | None:
        table = self.find_table(identifier)
        if table is None:
            return None
        snapshot = table.current_snapshot()
        names = [field.name for field in table.schema().fields]
        return TableInfo(
            identifier=identifier,
            uuid=str(table.metadata.table_uuid),
            snapshot_id=snapshot.snapshot_id if snapshot else None,
            columns=tuple(n for n in names if not is_state_column(n)),
            state_columns=tuple(n for n in names if is_state_column(n)),
        )

    def view(self, identifier: Identifier) -> ViewInfo | None:
        view = self.find_view(identifier)
        if view is None:
            return None
        version = view.metadata.current_version
        return ViewInfo(
            identifier=identifier,
            uuid=view.metadata.view_uuid,
            version_id=view.metadata.current_version_id,
            default_namespace=version.default_namespace,
            sql=version.sql_for("spark"),
            storage_table=version.storage_table,
        )
