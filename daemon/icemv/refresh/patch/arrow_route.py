"""Whether a refresh's delta is computed in Arrow on the driver, decided at plan time.

The Arrow path (no Spark job) takes small changes of one source, its FROM table, read
alone or joined with tables that did not change (INNER, or LEFT with the changed source
preserved: the delta of `source JOIN t` is `dsource JOIN t`, each joined row carrying
its source row's weight, arrow_select.py): appends (the appended rows), and deletes and
updates (position deletes, deletion vectors, equality deletes on one integer or string
column, copy-on-write rewrites: signed change rows,
refresh/changes/arrow_changes.py; while the read scans at most
`refresh.arrow_read_max_rows` rows, estimated from the manifests, and at most
`refresh.arrow_max_rows` rows changed, counted once read). A filter / projection view
takes the changed rows filtered and projected (under deletes, its deleted rows are
removed from the storage files holding them); a GROUP BY view merges them by its rules
(COUNT, SUM, MIN, MAX, AVG with state; under deletes COUNT, SUM, AVG with state). Each
joined table is read whole with pyiceberg at its pinned snapshot (the same rows as the
recorded one: it did not move), its columns read only, shared across MVs like the
appended rows, and only if it has at most `refresh.arrow_join_max_rows` rows; the joined
rows count against the route's row limit. Everything else, and anything whose Spark
semantics Arrow might not match (sql/arrow_expr.py), goes to Spark; the refusal's reason
is reported with the refresh (`engine=spark`, `engine_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from sqlglot import exp

from icemv.errors import ArrowUnsupportedError
from icemv.identifiers import Identifier
from icemv.refresh.changes.arrow_changes import changed_rows
from icemv.refresh.changes.arrow_reads import (
    AppendedRowsCache,
    appended_rows,
    read_schema,
    table_rows,
)
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.manifests import touched_files
from icemv.refresh.cost import arrow_scan_rows
from icemv.refresh.patch.arrow_aggregates import ArrowAggregateDelta, compile_aggregate_delta
from icemv.refresh.patch.arrow_rows import ArrowRowsDelta, compile_rows_delta
from icemv.refresh.patch.arrow_select import joined_tables, referenced_columns
from icemv.refresh.patch.model import DriverPatch, PatchTarget
from icemv.refresh.plan import IncrementalPlan
from icemv.spec.summary import TOTAL_RECORDS, summary_of
from icemv.sql.analysis import AggregateAnalysis
from icemv.sql.columns import source_of


@dataclass(frozen=True)
class Dimension:
    """An unchanged table a join reads, whole, at its pinned snapshot."""

    table: Table
    snapshot_id: int | None
    schema: Schema  # the snapshot's
    columns: tuple[str, ...]  # those the view names

    def read(self, cache: AppendedRowsCache) -> pa.Table:
        return table_rows(self.table, self.snapshot_id, self.schema, self.columns, cache)


@dataclass(frozen=True)
class ArrowRoute:
    change: SourceChange
    source: Table
    delta: ArrowRowsDelta | ArrowAggregateDelta
    dimensions: tuple[Dimension, ...] = ()  # one per JOIN, in order
    max_rows: int = 0  # joined rows the patch may come from (the route's row limit)
    # Read for a change with deletes (join keys included: sql/columns.py); None: all.
    columns: tuple[str, ...] | None = None

    def read(self, cache: AppendedRowsCache) -> tuple[pa.Table, int]:
        """The rows the delta is computed from and the source rows read for them: appended
        rows (shared with other MVs through `cache`), or signed rows (a `WEIGHT` column)
        of a range with deletes; either joined with the dimensions (read through `cache`),
        each joined row keeping its source row's weight."""
        if self.change.kind != "append-only":
            # One table: the WHERE is over its columns, and is applied to each file read.
            keep = None if self.dimensions else self.delta.select.filtered
            changed = changed_rows(self.source, self.change, self.columns, self.max_rows, keep)
            rows, read = changed.rows, changed.rows_read
        else:
            rows = appended_rows(self.source, self.change, cache)
            read = rows.num_rows
        if not self.dimensions:
            return rows, read
        dimensions = [d.read(cache) for d in self.dimensions]
        joined = self.delta.select.joined(rows, dimensions)
        if joined.num_rows > self.max_rows:
            raise ArrowUnsupportedError(f"{joined.num_rows} joined rows > {self.max_rows}")
        return joined, read

    def patch(self, rows: pa.Table, target: PatchTarget) -> DriverPatch:
        return self.delta.patch(rows, target.table, target.snapshot_id, target.driver_max_rows)


def arrow_route(
    plan: IncrementalPlan,
    max_rows: int,
    driver_max_rows: int,
    join_max_rows: int = 0,
    read_max_rows: int = 0,
) -> ArrowRoute | str:
    """The Arrow route of this refresh's delta, or why Spark computes it."""
    if max_rows <= 0 or driver_max_rows <= 0:
        return "arrow path off (refresh.arrow_max_rows or driver_commit_max_rows is 0)"
    if len(plan.moved) != 1:
        return "more than one source table changed"
    ((identifier, change),) = plan.moved.items()
    limit = min(max_rows, driver_max_rows)  # the patch is committed from the driver too
    if change.kind == "append-only" and change.changed_records > limit:
        return (
            f"{change.changed_records} changed rows > {limit} "
            "(refresh.arrow_max_rows, driver_commit_max_rows)"
        )
    if plan.keyed:
        return "a keyed delta"
    base = plan.base
    source = base.reads.load_table(identifier)
    if change.kind != "append-only":  # the rows that changed are known once read
        scanned = _scan_refusal(source, change, read_max_rows)
        if scanned is not None:
            return scanned
    source_schema = read_schema(source, change).as_arrow()
    storage_schema = base.storage.schema().as_arrow()
    analysis = plan.analysis
    try:
        dimensions = _dimensions(plan, identifier, join_max_rows)
        schemas = {
            alias: pa.schema([d.schema.as_arrow().field(c) for c in d.columns])
            for alias, d in dimensions.items()
        }
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
                schemas,
                plan.with_deletes,
            )
        else:
            if analysis.top_n is not None:  # an append may push rows out of the top n
                return "a top-N view"
            delta = compile_rows_delta(analysis, source_schema, storage_schema, schemas)
    except ArrowUnsupportedError as exc:
        return str(exc)
    columns = plan.change_read(identifier).columns
    return ArrowRoute(change, source, delta, tuple(dimensions.values()), limit, columns)


def _dimensions(plan: IncrementalPlan, changed: Identifier, max_rows: int) -> dict[str, Dimension]:
    """Each JOIN's unchanged table by alias, in JOIN order; ArrowUnsupportedError if the
    view reads the changed source other than as its FROM table, or a table is too big."""
    query = plan.analysis.query
    if not isinstance(query, exp.Select):
        raise ArrowUnsupportedError("not a single SELECT")
    from_ = query.args.get("from_")
    first = from_.this if from_ is not None else None
    if not isinstance(first, exp.Table) or source_of(first) != changed:
        raise ArrowUnsupportedError(f"{changed} is not the FROM table")
    found: dict[str, Dimension] = {}
    for table in joined_tables(query):
        identifier = source_of(table)
        if identifier not in plan.changes or identifier == changed:
            raise ArrowUnsupportedError(f"JOIN {table.name}: not an unchanged source table")
        if max_rows <= 0:
            raise ArrowUnsupportedError("joins off (refresh.arrow_join_max_rows is 0)")
        change = plan.changes[identifier]
        loaded = plan.base.reads.load_table(identifier)
        snapshot = None
        if change.new_snapshot_id is not None:
            snapshot = loaded.snapshot_by_id(change.new_snapshot_id)
            if snapshot is None:
                raise ArrowUnsupportedError(f"joined table {identifier}: pinned snapshot gone")
        records = int(summary_of(snapshot).get(TOTAL_RECORDS, -1)) if snapshot else 0
        if records < 0 or records > max_rows:
            shown = "unknown" if records < 0 else str(records)
            raise ArrowUnsupportedError(
                f"joined table {identifier}: {shown} rows > {max_rows} "
                "(refresh.arrow_join_max_rows)"
            )
        columns = referenced_columns(query, table.alias_or_name)
        schema = read_schema(loaded, change)
        found[table.alias_or_name] = Dimension(
            loaded, snapshot.snapshot_id if snapshot else None, schema, columns
        )
    return found


def _scan_refusal(source: Table, change: SourceChange, read_max_rows: int) -> str | None:
    """Why the Arrow read of a range with deletes would scan too much (its estimate from
    the range's manifests), or None."""
    touched = touched_files(source, change)
    if touched.equality_delete_records and touched.equality_scan_records is None:
        return f"{change.identifier}: an equality delete not pushed down"
    rows, hit = arrow_scan_rows(touched)
    if rows + hit > read_max_rows:
        return (
            f"the change read scans ~{rows + hit} rows > {read_max_rows} "
            "(refresh.arrow_read_max_rows)"
        )
    return None
