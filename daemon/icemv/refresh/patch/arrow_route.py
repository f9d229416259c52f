"""Whether a refresh's delta is computed in Arrow on the driver, decided at plan time.

The Arrow path (no Spark job) takes small changes of one source: appends, for a filter /
projection view (the appended rows, filtered and projected) and for a GROUP BY view
merged by its rules (COUNT, SUM, MIN, MAX, AVG with state); deletes and updates
(position deletes, deletion vectors, copy-on-write rewrites of small files: signed change
rows, refresh/changes/arrow_changes.py) for a GROUP BY view merged by its rules under
deletes (COUNT, SUM, AVG with state), and for a filter / projection view (its deleted rows
removed from the storage files holding them). Everything else, and
anything whose Spark semantics Arrow might not match (sql/arrow_expr.py), goes to Spark;
the refusal's reason is reported with the refresh (`engine=spark`, `engine_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.table import Table

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.changes.arrow_changes import changed_rows
from icemv.refresh.changes.arrow_reads import AppendedRowsCache, appended_rows, read_schema
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.patch.arrow_aggregates import ArrowAggregateDelta, compile_aggregate_delta
from icemv.refresh.patch.arrow_rows import ArrowRowsDelta, compile_rows_delta
from icemv.refresh.patch.model import DriverPatch, PatchTarget
from icemv.refresh.plan import IncrementalPlan
from icemv.sql.analysis import AggregateAnalysis


@dataclass(frozen=True)
class ArrowRoute:
    change: SourceChange
    source: Table
    delta: ArrowRowsDelta | ArrowAggregateDelta
    columns: tuple[str, ...] | None = None  # read for a change with deletes; None: all

    def read(self, cache: AppendedRowsCache) -> tuple[pa.Table, int]:
        """The change rows and the source rows read for them: appended rows (shared with
        other MVs through `cache`), or signed rows (a `WEIGHT` column) of a range with
        deletes."""
        if self.change.kind == "append-only":
            appended = appended_rows(self.source, self.change, cache)
            return appended, appended.num_rows
        changed = changed_rows(self.source, self.change, self.columns)
        return changed.rows, changed.rows_read

    def patch(self, rows: pa.Table, target: PatchTarget) -> DriverPatch:
        return self.delta.patch(rows, target.table, target.snapshot_id, target.driver_max_rows)


def arrow_route(plan: IncrementalPlan, max_rows: int, driver_max_rows: int) -> ArrowRoute | str:
    """The Arrow route of this refresh's delta, or why Spark computes it."""
    if max_rows <= 0 or driver_max_rows <= 0:
        return "arrow path off (refresh.arrow_max_rows or driver_commit_max_rows is 0)"
    if len(plan.changes) != 1 or len(plan.moved) != 1:
        return "more than one source table"
    ((identifier, change),) = plan.moved.items()
    limit = min(max_rows, driver_max_rows)  # the patch is committed from the driver too
    if change.changed_records > limit:
        return (
            f"{change.changed_records} changed rows > {limit} "
            "(refresh.arrow_max_rows, driver_commit_max_rows)"
        )
    base = plan.base
    source = base.reads.load_table(identifier)
    source_schema = read_schema(source, change).as_arrow()
    storage_schema = base.storage.schema().as_arrow()
    analysis = plan.analysis
    try:
        delta: ArrowRowsDelta | ArrowAggregateDelta
        if isinstance(analysis, AggregateAnalysis):
            state = base.state_columns
            if analysis.aggregate_strategy(plan.with_deletes, bool(state)) != "merge-aggregates":
                return "the touched groups are recomputed from the source"
            delta = compile_aggregate_delta(
                analysis,
                source_schema,
                storage_schema,
                state,
                base.layout.types,
                plan.with_deletes,
            )
        else:
            if analysis.top_n is not None:  # an append may push rows out of the top n
                return "a top-N view"
            if plan.keyed:
                return "a keyed delta"
            delta = compile_rows_delta(analysis, source_schema, storage_schema)
    except ArrowUnsupportedError as exc:
        return str(exc)
    return ArrowRoute(change, source, delta, plan.change_read(identifier).columns)
