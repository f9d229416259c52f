"""Catalog reads of one refresh (or one command), each table and view loaded at most once.

A refresh used to load each source table about four times (freshness, analysis,
pinning, change classification) and the storage table three times: each load is a JDBC
query plus a metadata JSON read. One `CatalogReads` per refresh attempt serves them all
from the first load, which also makes every step see the same table state. It is also
the `SourceResolver` the pure SQL passes (`sql/analysis`, `sql/pinning`) ask.

A refresh asks for the tables and views the MV's last refresh read in one request where
the catalog can (`refresh_reads`). The daemon's polls go further (`PollReads`): one
`CatalogReads` per poll serves every MV's index entry and freshness check, so a poll loads
each table and view once however many MVs read it. Where the catalog lists metadata
locations in one request (JDBC: every view's, and the tables' of the namespaces the last
poll read), a poll starts with that listing: a table or view whose location is the one the
previous poll loaded is that previous load, reused; a changed one is read from its listed
location; a missing one costs nothing. An idle poll is then one query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Literal, TypeVar

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from icemv.catalog.listing import CatalogListing
from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError
from icemv.identifiers import Identifier
from icemv.lakehouse.handles import Lakehouse
from icemv.sql.memo import Memo
from icemv.sql.sources import TableInfo, ViewInfo
from icemv.sql.state import is_state_column

_Loaded = TypeVar("_Loaded", Table, LoadedView)


def _listed(
    identifier: Identifier,
    locations: Mapping[Identifier, str],
    known: Mapping[Identifier, _Loaded],
    read: Callable[[Identifier, str], _Loaded],
) -> tuple[_Loaded | None, Literal["missing", "reused", "loaded"]]:
    """A listed table or view: the known one if still at its listed location, else read."""
    location = locations.get(identifier)
    if location is None:
        return None, "missing"
    previous = known.get(identifier)
    if previous is not None and previous.metadata_location == location:
        return previous, "reused"
    return read(identifier, location), "loaded"


class CatalogReads:
    """Cached table and view loads; not thread-safe (one per refresh attempt or poll).

    With a `listing`, tables and views load from their listed locations (absent ones are
    missing without a request), and a `known` table or view (a previous poll's) at its
    listed location is reused as it is: never commit through a table read so.
    """

    def __init__(
        self,
        lakehouse: Lakehouse,
        listing: CatalogListing | None = None,
        known_tables: Mapping[Identifier, Table] | None = None,
        known_views: Mapping[Identifier, LoadedView] | None = None,
    ) -> None:
        self.lakehouse = lakehouse
        self.listing = listing
        self._known_tables = known_tables or {}
        self._known_views = known_views or {}
        self._tables: dict[Identifier, Table | None] = {}
        self._views: dict[Identifier, LoadedView | None] = {}
        self._forgotten: set[Identifier] = set()
        # For tests, metrics and tuning: loads (a catalog request or a metadata read) and
        # reuses of a known table or view (nothing read).
        self.table_loads = 0
        self.view_loads = 0
        self.table_reuses = 0
        self.view_reuses = 0

    @property
    def catalog_name(self) -> str:
        return self.lakehouse.catalog_name

    def find_table(self, identifier: Identifier) -> Table | None:
        if identifier not in self._tables:
            self._tables[identifier] = self._first_table_load(identifier)
        return self._tables[identifier]

    def _first_table_load(self, identifier: Identifier) -> Table | None:
        listing = self.listing
        if listing is None or identifier in self._forgotten or not listing.covers(identifier):
            self.table_loads += 1
            try:
                return self.lakehouse.load_table(identifier)
            except NoSuchTableError:
                return None
        table, outcome = _listed(identifier, listing.tables, self._known_tables, listing.read_table)
        self.table_loads += outcome == "loaded"
        self.table_reuses += outcome == "reused"
        return table

    def forget(self, identifier: Identifier) -> None:
        """Load `identifier` again on next use: it was changed since it was loaded."""
        self._tables.pop(identifier, None)
        self._forgotten.add(identifier)  # from the catalog: the listing is older than that

    def load_table(self, identifier: Identifier) -> Table:
        table = self.find_table(identifier)
        if table is None:
            raise NoSuchTableError(f"Table does not exist: {identifier}")
        return table

    def find_view(self, identifier: Identifier) -> LoadedView | None:
        if identifier not in self._views:
            self._views[identifier] = self._first_view_load(identifier)
        return self._views[identifier]

    def _first_view_load(self, identifier: Identifier) -> LoadedView | None:
        listing = self.listing
        if listing is None or not listing.covers_view(identifier):
            self.view_loads += 1
            try:
                return self.lakehouse.views.load(identifier)
            except NoSuchViewError:
                return None
        view, outcome = _listed(identifier, listing.views, self._known_views, listing.read_view)
        self.view_loads += outcome == "loaded"
        self.view_reuses += outcome == "reused"
        return view

    def list_views(self) -> list[Identifier]:
        """Every view of the catalog, sorted (from the listing when there is one)."""
        if self.listing is not None:
            return sorted(self.listing.views)
        return self.lakehouse.views.list()

    def table_namespaces(self) -> frozenset[tuple[str, ...]]:
        """The namespaces of every table asked for, found or not."""
        return frozenset(identifier.namespace for identifier in self._tables)

    def loaded_tables(self) -> dict[Identifier, Table]:
        return {k: v for k, v in self._tables.items() if v is not None}

    def loaded_views(self) -> dict[Identifier, LoadedView]:
        return {k: v for k, v in self._views.items() if v is not None}

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


# What each MV's last refresh read in this process (tables and views, by name), asked for
# together by its next refresh (`refresh_reads`).
_read_by_refresh: Memo[frozenset[Identifier]] = Memo(4096)


def refresh_reads(lakehouse: Lakehouse, mv: Identifier) -> CatalogReads:
    """The reads of a refresh of `mv`: where the catalog can tell several metadata
    locations in one request (JDBC), the tables and views its last refresh read in this
    process are asked for in one, and each loads from its location (a table or view read
    before at the same location: no file read either). Their locations are one consistent
    instant, as separate loads are not. A refresh reading something new loads it by name;
    `remember` what it read for the next."""
    read = _read_by_refresh.get(mv)
    listing = lakehouse.backend.locate(read) if read else None
    return CatalogReads(lakehouse, listing)


def remember(mv: Identifier, reads: CatalogReads) -> None:
    """What a refresh of `mv` read, for its next (`refresh_reads`)."""
    read = frozenset(reads.loaded_tables()) | frozenset(reads.loaded_views())
    if read:
        _read_by_refresh.put(mv, read)


def forget_reads(mv: Identifier) -> None:
    """Nothing remembered of `mv`'s refreshes: the next loads each table by name."""
    _read_by_refresh.pop(mv)


class PollReads:
    """The `CatalogReads` of a daemon's polls, one per poll, each knowing the last one's loads.

    `begin` lists the catalog (one request where the catalog kind can: JDBC): every view,
    and the tables of the namespaces the last poll asked about (a catalog may hold far more
    tables than its MVs read); a table elsewhere is loaded by name. `finish` keeps what a
    completed poll loaded for the next poll to reuse; what no MV read any more is dropped
    with it. Thread-safe: a freshness-target check between polls may `begin` reads of its
    own (and not `finish` them: it saw one MV, not the catalog's).
    """

    def __init__(self, lakehouse: Lakehouse) -> None:
        self._lakehouse = lakehouse
        self._lock = threading.Lock()
        self._tables: dict[Identifier, Table] = {}
        self._views: dict[Identifier, LoadedView] = {}
        # Whose tables a poll lists: the namespaces the last poll asked about (the first
        # poll lists views only and loads its tables by name).
        self._namespaces: frozenset[tuple[str, ...]] = frozenset()

    def begin(self) -> CatalogReads:
        with self._lock:
            namespaces = self._namespaces
        listing = self._lakehouse.backend.listing(namespaces)
        if listing is None:  # every load asks the catalog (REST: conditionally, by ETag)
            return CatalogReads(self._lakehouse)
        with self._lock:
            return CatalogReads(self._lakehouse, listing, dict(self._tables), dict(self._views))

    def finish(self, reads: CatalogReads) -> None:
        if reads.listing is None:
            return
        with self._lock:
            self._tables = reads.loaded_tables()
            self._views = reads.loaded_views()
            self._namespaces = reads.table_namespaces()
