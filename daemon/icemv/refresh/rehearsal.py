"""A rehearsal: an MV's last change computed again on the embedded engine, nothing committed.

The first refresh of an MV in a process pays for what later ones find kept: the view
parsed and analysed, the delta and merge trees built and gated, DuckDB's statements
parsed, the storage table's metadata parsed and its rows and live files read. Measured on
a 100-MV fleet, the first commit after the daemon started cost 30 ms of CPU per refresh
against 16 for the next ones.

A rehearsal does that work ahead, while the process has nothing else to do: for an MV
that is fresh, it plans a refresh as if the source table committed to last were still
at its snapshot's parent (the change the MV absorbed last), computes that delta's patch
on the embedded engine over the storage as it is, and throws it away. The trees and
gate answers it keeps are those of the MV's next refresh as long as the next change is
of the same kind (an append after an append). Nothing it computes is committed or
reported: the patch merges a change the storage already holds, so it means nothing but
its cost. A rehearsal that cannot be made (the MV not fresh, a source without a parent
snapshot, a last change of more than MAX_ROWS rows, a route through Spark) or that fails
is simply skipped; the next refresh does the work.
"""

from __future__ import annotations

import dataclasses
import time

import structlog

from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import RefreshRecord
from icemv.mv.model import load_materialized_view
from icemv.refresh.embedded.route import EmbeddedRoute, choose_route
from icemv.refresh.incremental import rehearse_patch
from icemv.refresh.plan import plan_incremental, plan_refresh

log = structlog.get_logger(__name__)

# A last change of more rows is not rehearsed: warming the trees needs a few rows, and a
# large batch (a table's first load, say) would cost its whole read again at start.
MAX_ROWS = 100_000


def rehearse_mv(lakehouse: Lakehouse, identifier: Identifier) -> str:
    """Rehearse `identifier`'s last change (see the module); what happened, for logs:
    `rehearsed`, or why not."""
    try:
        return _rehearse(lakehouse, identifier)
    except Exception as error:  # noqa: BLE001 (a rehearsal only warms caches)
        log.debug("refresh_rehearsal_failed", mv=str(identifier), error=repr(error)[:200])
        return f"failed: {type(error).__name__}"


def _rehearse(lakehouse: Lakehouse, identifier: Identifier) -> str:
    reads = CatalogReads(lakehouse)
    mv = load_materialized_view(lakehouse, identifier, reads)
    freshness = assess_freshness(lakehouse, mv, reads=reads)
    record = freshness.last_refresh
    if freshness.state != "fresh" or record is None:
        return "not fresh"
    stepped = _stepped_back(reads, record)
    if stepped is None:
        return "no earlier source snapshot"
    plan = plan_refresh(reads, mv, int(time.time() * 1000))
    incremental = plan_incremental(plan, stepped, None)
    if not incremental.moved:
        return "no change"
    if sum(c.changed_records for c in incremental.moved.values()) > MAX_ROWS:
        return "last change too large"
    route = choose_route(incremental, lakehouse)
    if not isinstance(route, EmbeddedRoute):
        return "not on the embedded engine"
    return rehearse_patch(incremental, route)


def _stepped_back(reads: CatalogReads, record: RefreshRecord) -> RefreshRecord | None:
    """`record` with the table source committed to last at its recorded snapshot's parent
    (the change the MV absorbed last; a fact table's append rather than its dimension's)."""
    latest: tuple[int, int, int] | None = None  # (committed at, source, parent snapshot)
    for position, source in enumerate(record.state.source_states):
        if source.type != "table" or source.snapshot_id is None:
            continue
        table = reads.load_table(Identifier(source.namespace, source.name))
        snapshot = table.snapshot_by_id(source.snapshot_id)
        parent = snapshot.parent_snapshot_id if snapshot is not None else None
        if snapshot is None or parent is None or table.snapshot_by_id(parent) is None:
            continue
        if latest is None or snapshot.timestamp_ms > latest[0]:
            latest = (snapshot.timestamp_ms, position, parent)
    if latest is None:
        return None
    _, position, parent = latest
    sources = list(record.state.source_states)
    sources[position] = dataclasses.replace(sources[position], snapshot_id=parent)
    state = dataclasses.replace(record.state, source_states=tuple(sources))
    return dataclasses.replace(record, state=state)
