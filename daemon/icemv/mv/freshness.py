"""Freshness of an MV from catalog metadata alone (no Spark), as the spec defines it.

fresh: recorded view version is current and every recorded source is at its recorded
snapshot / version. stale: same view version, some source moved on. invalid: definition
replaced, a source dropped or recreated, a source lost a column the SQL reads (checked
once a source moved on: only then is a refresh due), or never refreshed. Staleness in seconds counts
from the commit of the first source snapshot the MV has not absorbed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, Protocol

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of

from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError
from icemv.format.refresh_state import SourceState
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.compatibility import lost_columns
from icemv.mv.history import RefreshRecord, latest_refresh
from icemv.mv.model import MaterializedView

State = Literal["fresh", "stale", "invalid"]


class CatalogReader(Protocol):
    """Table and view loads; a refresh passes its cached ones (`refresh.resolver`)."""

    def load_table(self, identifier: Identifier) -> Table: ...

    def load_view(self, identifier: Identifier) -> LoadedView: ...


class _Direct:
    def __init__(self, lakehouse: Lakehouse) -> None:
        self._lakehouse = lakehouse

    def load_table(self, identifier: Identifier) -> Table:
        return self._lakehouse.load_table(identifier)

    def load_view(self, identifier: Identifier) -> LoadedView:
        return self._lakehouse.views.load(identifier)


@dataclass(frozen=True)
class SourceFreshness:
    recorded: SourceState
    current_snapshot_id: int | None = None
    current_version_id: int | None = None
    # Snapshots (or view versions) committed after the recorded one.
    pending: int = 0
    first_unabsorbed_ms: int | None = None
    problem: Literal["dropped", "replaced"] | None = None

    @property
    def moved(self) -> bool:
        return self.pending > 0 or self.problem is not None


@dataclass(frozen=True)
class Freshness:
    state: State
    reason: str | None
    staleness_seconds: float
    last_refresh: RefreshRecord | None
    sources: tuple[SourceFreshness, ...]

    @property
    def pending_snapshots(self) -> int:
        return sum(source.pending for source in self.sources)


def assess_freshness(
    lakehouse: Lakehouse,
    mv: MaterializedView,
    now_ms: int | None = None,
    reads: CatalogReader | None = None,
    record: RefreshRecord | None = None,
) -> Freshness:
    """`mv`'s freshness now; `record`: its storage's latest refresh record, when the
    caller knows it (a refresh that just committed it), instead of loading the storage."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    reader = reads or _Direct(lakehouse)
    version = mv.version
    if record is None:
        try:
            storage = reader.load_table(mv.storage)
        except NoSuchTableError:
            return Freshness(
                "invalid", "storage-table-missing", _age(now_ms, version.timestamp_ms), None, ()
            )
        record = latest_refresh(storage)
    if record is None:
        return Freshness("invalid", "never-refreshed", _age(now_ms, version.timestamp_ms), None, ())
    sources = tuple(_source_freshness(reader, source) for source in record.state.source_states)
    if record.state.view_version_id not in (None, version.version_id):
        return Freshness(
            "invalid", "definition-changed", _age(now_ms, version.timestamp_ms), record, sources
        )
    broken = [s for s in sources if s.problem is not None]
    if broken:
        since = min((s.first_unabsorbed_ms or now_ms) for s in broken)
        return Freshness(
            "invalid", f"source-{broken[0].problem}", _age(now_ms, since), record, sources
        )
    moved = [s for s in sources if s.moved]
    if not moved:
        return Freshness("fresh", None, 0.0, record, sources)
    since = min((s.first_unabsorbed_ms or now_ms) for s in moved)
    if _lost_columns(reader, mv, record):
        return Freshness(
            "invalid", "source-schema-incompatible", _age(now_ms, since), record, sources
        )
    return Freshness("stale", "source-changed", _age(now_ms, since), record, sources)


def _lost_columns(reader: CatalogReader, mv: MaterializedView, record: RefreshRecord) -> list[str]:
    tables = []
    for source in record.state.tables():
        try:
            tables.append(reader.load_table(Identifier(source.namespace, source.name)))
        except NoSuchTableError:
            continue
    try:
        return lost_columns(mv.sql, tables)
    except Exception:  # noqa: BLE001 (unparsable SQL is the refresh's to report)
        return []


def _age(now_ms: int, since_ms: int) -> float:
    return max(0.0, (now_ms - since_ms) / 1000.0)


def _source_freshness(reader: CatalogReader, recorded: SourceState) -> SourceFreshness:
    identifier = Identifier(recorded.namespace, recorded.name)
    if recorded.type == "view":
        try:
            metadata = reader.load_view(identifier).metadata
        except NoSuchViewError:
            return SourceFreshness(recorded, problem="dropped")
        if recorded.uuid is not None and metadata.view_uuid != recorded.uuid:
            return SourceFreshness(
                recorded, problem="replaced", first_unabsorbed_ms=metadata.versions[0].timestamp_ms
            )
        newer = [v for v in metadata.versions if v.version_id > (recorded.version_id or 0)]
        moved = metadata.current_version_id != recorded.version_id
        return SourceFreshness(
            recorded,
            current_version_id=metadata.current_version_id,
            pending=len(newer) if moved else 0,
            first_unabsorbed_ms=min((v.timestamp_ms for v in newer), default=None)
            if moved
            else None,
        )
    try:
        table = reader.load_table(identifier)
    except NoSuchTableError:
        return SourceFreshness(recorded, problem="dropped")
    current = table.current_snapshot()
    if recorded.uuid is not None and str(table.metadata.table_uuid) != recorded.uuid:
        first = min((s.timestamp_ms for s in table.snapshots()), default=None)
        return SourceFreshness(recorded, problem="replaced", first_unabsorbed_ms=first)
    current_id = current.snapshot_id if current else None
    if current_id == recorded.snapshot_id:
        return SourceFreshness(recorded, current_snapshot_id=current_id)
    unabsorbed = []
    for snapshot in ancestors_of(current, table.metadata):
        if snapshot.snapshot_id == recorded.snapshot_id:
            break
        unabsorbed.append(snapshot)
    return SourceFreshness(
        recorded,
        current_snapshot_id=current_id,
        pending=max(1, len(unabsorbed)),
        first_unabsorbed_ms=min((s.timestamp_ms for s in unabsorbed), default=None),
    )
