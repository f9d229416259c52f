"""Which MVs read which tables: routes a commit hint to the MVs it may make stale.

Built from the catalog (each MV's resolved sources, through plain views and MVs) and
rebuilt whenever MV definitions may have changed. An MV that reads another MV's storage
table is that MV's dependent, so refreshes can run in dependency order.

Rebuilt every poll, so an idle poll must not parse every MV's SQL again: resolving an
MV's sources (`pin_sources`, pure) depends only on its SQL, its namespace and what the
catalog answered about each name it asked for; each MV's last resolution is kept with
those answers, and reused while the same questions get the same answers (an answer
changes when a table or view it names is committed to, created, dropped or replaced).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from icemv.errors import ViewSqlError
from icemv.format.refresh_state import SourceState
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.model import MaterializedView, list_materialized_views
from icemv.sql.pinning import pin_sources
from icemv.sql.sources import TableInfo, ViewInfo

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class IndexSnapshot:
    mvs: dict[Identifier, MaterializedView] = field(default_factory=dict)
    readers: dict[Identifier, frozenset[Identifier]] = field(default_factory=dict)
    dependents: dict[Identifier, frozenset[Identifier]] = field(default_factory=dict)
    # MVs whose sources could not be resolved (a dropped table, say), with the reason.
    broken: dict[Identifier, str] = field(default_factory=dict)


Answer = tuple[str, Identifier, TableInfo | ViewInfo | None]


@dataclass(frozen=True)
class _Resolved:
    """One MV's sources as last resolved, and the catalog's answers they came from."""

    sql: str
    namespace: tuple[str, ...]
    answers: tuple[Answer, ...]
    sources: tuple[SourceState, ...]

    def still_valid(self, sql: str, namespace: tuple[str, ...], reads: CatalogReads) -> bool:
        if (sql, namespace) != (self.sql, self.namespace):
            return False
        for kind, identifier, answer in self.answers:
            now = reads.table(identifier) if kind == "table" else reads.view(identifier)
            if now != answer:
                return False
        return True


class _Recording:
    """A `SourceResolver` that remembers what it answered."""

    def __init__(self, reads: CatalogReads) -> None:
        self._reads = reads
        self.answers: list[Answer] = []

    @property
    def catalog_name(self) -> str:
        return self._reads.catalog_name

    def table(self, identifier: Identifier) -> TableInfo | None:
        answer = self._reads.table(identifier)
        self.answers.append(("table", identifier, answer))
        return answer

    def view(self, identifier: Identifier) -> ViewInfo | None:
        answer = self._reads.view(identifier)
        self.answers.append(("view", identifier, answer))
        return answer


def _resolve(reads: CatalogReads, mv: MaterializedView, known: _Resolved | None) -> _Resolved:
    """`mv`'s sources: `known` if still valid, else pinned again (ViewSqlError, LookupError)."""
    namespace = mv.version.default_namespace or mv.identifier.namespace
    if known is not None and known.still_valid(mv.sql, namespace, reads):
        return known
    recording = _Recording(reads)
    pinned = pin_sources(recording, mv.sql, namespace)
    return _Resolved(mv.sql, namespace, tuple(recording.answers), pinned.sources)


def build_index(
    lakehouse: Lakehouse,
    reads: CatalogReads | None = None,
    resolved: dict[Identifier, _Resolved] | None = None,
) -> IndexSnapshot:
    """The index as the catalog is now; every MV's sources resolved through one `reads`
    (a poll's, or one of its own), so each table and view is loaded once. `resolved`:
    the last build's resolutions, reused where valid and updated in place."""
    reads = reads or CatalogReads(lakehouse)
    resolved = {} if resolved is None else resolved
    mvs = {mv.identifier: mv for mv in list_materialized_views(lakehouse, reads)}
    storage_owner = {mv.storage: mv.identifier for mv in mvs.values()}
    readers: defaultdict[Identifier, set[Identifier]] = defaultdict(set)
    dependents: defaultdict[Identifier, set[Identifier]] = defaultdict(set)
    broken: dict[Identifier, str] = {}
    for gone in set(resolved) - set(mvs):
        del resolved[gone]
    for identifier, mv in mvs.items():
        try:
            resolution = resolved[identifier] = _resolve(reads, mv, resolved.get(identifier))
        except (ViewSqlError, LookupError) as exc:
            resolved.pop(identifier, None)
            broken[identifier] = str(exc)
            continue
        for source in resolution.sources:
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
        self._resolved: dict[Identifier, _Resolved] = {}
        self._building = threading.Lock()  # one build at a time updates `_resolved`

    def rebuild(self, reads: CatalogReads | None = None) -> IndexSnapshot:
        with self._building:
            snapshot = build_index(self._lakehouse, reads, self._resolved)
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
