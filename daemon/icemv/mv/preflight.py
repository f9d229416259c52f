"""What a refresh settles before planning: leftovers, unrefreshed sources, lost columns.

* Leftover private branches of a killed refresh of this MV are removed (see
  `icemv.mv.maintenance.branches`).
* A source MV that was never refreshed has no storage snapshot to pin, and the spec wants
  a snapshot id for every table source: it is refreshed first (recursively), and if it
  still has none, the refresh is refused.
* A source that lost a column the SQL reads fails the refresh with a reason code, before
  Spark fails it with an analysis traceback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

import structlog

from icemv.errors import (
    SourceNotRefreshedError,
    SourceSchemaIncompatibleError,
    ViewSqlError,
)
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.compatibility import lost_columns
from icemv.mv.maintenance.branches import remove_leftover_branches
from icemv.mv.model import load_materialized_view
from icemv.sql.parse import parse_query, table_references

log = structlog.get_logger(__name__)

# MVs whose source refreshes this thread is running: a cycle of MVs must not recurse.
_preparing = threading.local()


@contextmanager
def _preparing_for(identifier: Identifier) -> Iterator[None]:
    chain: list[Identifier] = _preparing.__dict__.setdefault("chain", [])
    chain.append(identifier)
    try:
        yield
    finally:
        chain.pop()


def prepare_refresh(
    reads: CatalogReads,
    identifier: Identifier,
    refresh: Callable[[Lakehouse, Identifier], object],
) -> None:
    """Run before a refresh of `identifier`; `refresh` refreshes a source MV first.

    The MV and its tables are loaded through `reads`, which the refresh's first attempt
    goes on using, so the preflight costs no catalog round trip of its own.
    """
    lakehouse = reads.lakehouse
    mv = load_materialized_view(lakehouse, identifier, reads)
    storage = reads.find_table(mv.storage)
    if storage is None:
        return  # the refresh reports it
    branch_age = lakehouse.config.maintenance.branch_min_age_seconds
    if remove_leftover_branches(storage, branch_age):
        reads.forget(mv.storage)
    namespace = mv.version.default_namespace or identifier.namespace
    tables = []
    for source in _direct_sources(mv.sql, namespace, lakehouse.catalog_name):
        table = reads.find_table(source)
        if table is not None:
            tables.append(table)
            continue
        view = reads.find_view(source)
        if view is None:
            continue  # pinning reports unknown sources
        source_storage = view.metadata.current_version.storage_table
        if source_storage is None or _has_snapshot(reads, source_storage):
            continue
        if source in _preparing.__dict__.get("chain", []):
            raise SourceNotRefreshedError(
                f"{SourceNotRefreshedError.reason}: materialized views read each other "
                f"({source}, {identifier})"
            )
        log.info("refreshing_source_mv_first", mv=str(identifier), source=str(source))
        with _preparing_for(identifier):
            refresh(lakehouse, source)
        reads.forget(source_storage)
        if not _has_snapshot(reads, source_storage):
            raise SourceNotRefreshedError(
                f"{SourceNotRefreshedError.reason}: source materialized view {source} "
                "has never been refreshed"
            )
    lost = lost_columns(mv.sql, tables)
    if lost:
        raise SourceSchemaIncompatibleError(
            f"{SourceSchemaIncompatibleError.reason}: {identifier} reads "
            f"{', '.join(lost)}, which its sources no longer have"
        )


@lru_cache(maxsize=512)
def _direct_sources(sql: str, namespace: tuple[str, ...], catalog: str) -> tuple[Identifier, ...]:
    """The tables and views the SQL names in `catalog` (a function of its arguments: kept
    for the last 512, as every refresh asks)."""
    try:
        query = parse_query(sql)
    except ViewSqlError:
        return ()  # the refresh reports it
    return tuple(
        Identifier((t.db,) if t.db else namespace, t.name)
        for t in table_references(query)
        if not t.catalog or t.catalog == catalog
    )


def _has_snapshot(reads: CatalogReads, storage: Identifier) -> bool:
    table = reads.find_table(storage)
    return table is not None and table.current_snapshot() is not None
