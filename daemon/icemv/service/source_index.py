"""Which MVs read which tables: routes a commit hint to the MVs it may make stale.

Built from the catalog (each MV's resolved sources, through plain views and MVs) and
rebuilt whenever MV definitions may have changed. An MV that reads another MV's storage
table is that MV's dependent, so refreshes can run in dependency order.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from icemv.errors import ViewSqlError
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.model import MaterializedView, list_materialized_views
from icemv.sql.pinning import pin_sources

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class IndexSnapshot:
    mvs: dict[Identifier, MaterializedView] = field(default_factory=dict)
    readers: dict[Identifier, frozenset[Identifier]] = field(default_factory=dict)
    dependents: dict[Identifier, frozenset[Identifier]] = field(default_factory=dict)
    # MVs whose sources could not be resolved (a dropped table, say), with the reason.
    broken: dict[Identifier, str] = field(default_factory=dict)


def build_index(lakehouse: Lakehouse, reads: CatalogReads | None = None) -> IndexSnapshot:
    """The index as the catalog is now; every MV's sources resolved through one `reads`
    (a poll's, or one of its own), so each table and view is loaded once."""
    reads = reads or CatalogReads(lakehouse)
    mvs = {mv.identifier: mv for mv in list_materialized_views(lakehouse, reads)}
    storage_owner = {mv.storage: mv.identifier for mv in mvs.values()}
    readers: defaultdict[Identifier, set[Identifier]] = defaultdict(set)
    dependents: defaultdict[Identifier, set[Identifier]] = defaultdict(set)
    broken: dict[Identifier, str] = {}
    for identifier, mv in mvs.items():
        try:
            pinned = pin_sources(
                reads,
                mv.sql,
                mv.version.default_namespace or identifier.namespace,
            )
        except (ViewSqlError, LookupError) as exc:
            broken[identifier] = str(exc)
            continue
        for source in pinned.sources:
            if source.type != "table":
                continue
            table = Identifier(source.namespace, source.name)
            readers[table].add(identifier)
            if table in storage_owner and storage_owner[table] != identifier:
                dependents[storage_owner[table]].add(identifier)
    return IndexSnapshot(
        mvs=mvs,
        readers={k: frozenset(v) for k, v in readers.items()},
        dependents={k: frozenset(v) for k, v in dependents.items()},
        broken=broken,
    )


def dependency_order(snapshot: IndexSnapshot) -> list[Identifier]:
    """Every MV after the MVs it reads (a cycle, which pinning refuses, is broken by name).

    Start-up polls request refreshes in this order, so a never-refreshed MV is refreshed
    before the MVs over it, which record its storage snapshot.
    """
    reads: dict[Identifier, set[Identifier]] = {mv: set() for mv in snapshot.mvs}
    for upstream, downstream in snapshot.dependents.items():
        for mv in downstream:
            if mv in reads and upstream in reads and upstream != mv:
                reads[mv].add(upstream)
    order: list[Identifier] = []
    done: set[Identifier] = set()
    visiting: set[Identifier] = set()

    def visit(mv: Identifier) -> None:
        if mv in done or mv in visiting:
            return
        visiting.add(mv)
        for upstream in sorted(reads[mv], key=str):
            visit(upstream)
        visiting.discard(mv)
        done.add(mv)
        order.append(mv)

    for mv in sorted(reads, key=str):
        visit(mv)
    return order


class SourceIndex:
    """Thread-safe holder of the latest index; readers never see a half-built one."""

    def __init__(self, lakehouse: Lakehouse) -> None:
        self._lakehouse = lakehouse
        self._lock = threading.Lock()
        self._snapshot = IndexSnapshot()

    def rebuild(self, reads: CatalogReads | None = None) -> IndexSnapshot:
        snapshot = build_index(self._lakehouse, reads)
        with self._lock:
            self._snapshot = snapshot
        for mv, reason in snapshot.broken.items():
            log.warning("mv_sources_unresolvable", mv=str(mv), reason=reason)
        return snapshot

    @property
    def snapshot(self) -> IndexSnapshot:
        with self._lock:
            return self._snapshot

    def readers_of(self, table: Identifier) -> frozenset[Identifier]:
        return self.snapshot.readers.get(table, frozenset())

    def dependents_of(self, mv: Identifier) -> Iterable[Identifier]:
        return self.snapshot.dependents.get(mv, frozenset())
