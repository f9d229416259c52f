"""A rehearsal: an MV's last change computed again on the embedded engine, nothing committed.

The first refresh of an MV in a process pays for what later ones find kept: the view
parsed and analysed, the delta and merge trees built and gated, DuckDB's statements
parsed, the storage table's metadata parsed and its rows and live files read. Measured on
a 100-MV fleet, the first commit after the daemon started cost 30 ms of CPU per refresh
against 16 for the next ones.

A rehearsal does that work ahead, while the process has nothing else to do: for an MV
that is fresh, it plans a refresh as if the source table committed to last (of those
with a parent snapshot) were still at its snapshot's parent (the change the MV absorbed
last), computes that delta's patch on the embedded engine over the storage as it is, and
throws it away. The trees and gate answers it keeps are those of the MV's next refresh
as long as the next change is of the same kind (an append after an append). Nothing it
computes is committed or reported: the patch merges a change the storage already holds,
so it means nothing but its cost. Where that last change cannot be rehearsed (no source
with a parent snapshot, a last change of more than MAX_ROWS rows: the MV was just made,
or its source just loaded), the rehearsal makes one up: an append of SAMPLE_ROWS of the
rows its largest source holds (reads.sampled_append; a star's fact table, not the
dimension made after it), the kind of change a fleet mostly meets. Measured on a new
100-MV fleet, the first commit cost 35 ms of CPU per refresh without it.
A rehearsal that cannot be made (the MV not fresh, a route through Spark) or that fails
is simply skipped; the next refresh does the work.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import structlog
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icemv.format.refresh_state import SourceState
from icemv.format.summary import TOTAL_RECORDS, summary_int
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.history import RefreshRecord
from icemv.mv.model import load_materialized_view
from icemv.refresh.embedded.reads import sampled_append, shared_cache
from icemv.refresh.embedded.route import EmbeddedRoute, choose_route
from icemv.refresh.incremental import rehearse_patch
from icemv.refresh.plan import IncrementalPlan, plan_incremental, plan_refresh

log = structlog.get_logger(__name__)

# A last change of more rows is not rehearsed: warming the trees needs a few rows, and a
# large batch (a table's first load, say) would cost its whole read again at start.
MAX_ROWS = 100_000
# The rows of a made-up append (a fleet's appends here: 1,000 rows).
SAMPLE_ROWS = 1_000


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
    plan = plan_refresh(reads, mv, int(time.time() * 1000))
    incremental, outcome = None, "rehearsed"
    stepped = _stepped_back(reads, record)
    if stepped is not None:
        incremental = plan_incremental(plan, stepped, None)
        if sum(c.changed_records for c in incremental.moved.values()) > MAX_ROWS:
            incremental = None
    if incremental is None or not incremental.moved:
        incremental, outcome = _sampled(plan_incremental(plan, record, None)), "sampled"
        if incremental is None:
            return "no table source"
    route = choose_route(incremental, lakehouse)
    if not isinstance(route, EmbeddedRoute):
        return "not on the embedded engine"
    done = rehearse_patch(incremental, route)
    return outcome if done == "rehearsed" else done


def _sampled(plan: IncrementalPlan) -> IncrementalPlan | None:
    """`plan` (nothing moved) with a made-up append of SAMPLE_ROWS rows to the largest
    table source (reads.sampled_append): of a fact table and its dimensions the one that
    grows, while the one committed to last is the dimension made after it."""
    found = _table_sources(plan.base.reads, plan.base.pinned.sources)
    if not found:
        return None
    position, table, snapshot = max(
        found, key=lambda f: (summary_int(f[2], TOTAL_RECORDS), f[2].timestamp_ms)
    )
    source = plan.base.pinned.sources[position]
    identifier = Identifier(source.namespace, source.name)
    cache = shared_cache(plan.base.reads.lakehouse.config.refresh.embedded_cache_bytes)
    change = sampled_append(identifier, table, snapshot.snapshot_id, SAMPLE_ROWS, cache)
    changes = {**plan.changes, identifier: change}
    return dataclasses.replace(plan, changes=changes, moved={identifier: change})


def _stepped_back(reads: CatalogReads, record: RefreshRecord) -> RefreshRecord | None:
    """`record` with the table source committed to last at its recorded snapshot's parent
    (the change the MV absorbed last; a fact table's append rather than its dimension's),
    of those whose parent snapshot is there (a source changed since it was made)."""
    found = [
        (position, table, snapshot)
        for position, table, snapshot in _table_sources(reads, record.state.source_states)
        if snapshot.parent_snapshot_id is not None
        and table.snapshot_by_id(snapshot.parent_snapshot_id) is not None
    ]
    if not found:
        return None
    position, _, snapshot = max(found, key=lambda f: f[2].timestamp_ms)
    parent = snapshot.parent_snapshot_id
    sources = list(record.state.source_states)
    sources[position] = dataclasses.replace(sources[position], snapshot_id=parent)
    state = dataclasses.replace(record.state, source_states=tuple(sources))
    return dataclasses.replace(record, state=state)


def _table_sources(
    reads: CatalogReads, sources: Sequence[SourceState]
) -> list[tuple[int, Table, Snapshot]]:
    """The table sources among `sources` whose snapshot is there: position, table,
    snapshot."""
    found = []
    for position, source in enumerate(sources):
        if source.type != "table" or source.snapshot_id is None:
            continue
        table = reads.load_table(Identifier(source.namespace, source.name))
        snapshot = table.snapshot_by_id(source.snapshot_id)
        if snapshot is not None:
            found.append((position, table, snapshot))
    return found
