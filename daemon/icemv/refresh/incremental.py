"""Incremental refresh: apply the view delta since the last refresh record, exactly once.

Given an `IncrementalPlan` (sources pinned and checked against their recorded snapshots),
build each changed source's weighted change rows, derive the view delta, shape it into a
storage patch, and commit it in one snapshot carrying the new refresh-state. The commit
asserts main is still where the plan found it: from the driver by pyiceberg, or through
a private branch for Spark writes. Anything that makes a correct delta impossible raises
FullRefreshRequiredError with the reason.

One decision, at plan time (`arrow_route`): a small change to the one changed source of a
filter or merged GROUP BY view (appends, deletes, updates; that source read alone or
joined with small unchanged tables) is computed in Arrow on the driver, no Spark job;
anything else (or an Arrow refusal met while reading, e.g. NaN under MIN) is computed by
Spark, except when policy `auto` kept the refresh incremental only for the Arrow path's
cheaper read (`plan.arrow_only`): then a refusal is FullRefreshRequiredError
(`delta-too-large`), the full recompute being cheaper than Spark's change read. The
result says which engine computed the delta and, for Spark, why not Arrow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import structlog

from icemv.errors import ArrowUnsupportedError, FullRefreshRequiredError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.arrow_reads import AppendedRowsCache, read_schema, shared_cache
from icemv.refresh.changes.reader import ChangeReader, change_reader
from icemv.refresh.commit.branch import commit_via_branch
from icemv.refresh.commit.driver import commit_rows
from icemv.refresh.commit.spark_write import run_with_commit_properties
from icemv.refresh.patch.aggregates import merge_aggregates_patch, recompute_groups_patch
from icemv.refresh.patch.arrow_route import ArrowRoute, arrow_route
from icemv.refresh.patch.model import (
    DriverPatch,
    PatchTarget,
    SparkPatch,
    StoragePatch,
    TempViews,
)
from icemv.refresh.patch.rows import rows_patch
from icemv.refresh.patch.top_n import unreached_patch
from icemv.refresh.patch.touched_keys import touched_keys
from icemv.refresh.phases import PhaseClock
from icemv.refresh.plan import IncrementalPlan
from icemv.refresh.record import commit_properties, result_of_commit
from icemv.refresh.result import RefreshResult
from icemv.spec.summary import RefreshMode, RefreshReason, StorageWrite, SummaryKey
from icemv.sql.analysis import AggregateAnalysis, RowsAnalysis
from icemv.sql.delta import DeltaInputs, needs_keyed_delta, pre_aggregation_delta, rows_delta
from icemv.sql.pinning import pin_tables
from icemv.sql.state import state_query

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyspark.sql import SparkSession

ENGINE_ARROW, ENGINE_SPARK = "arrow", "spark"
log = structlog.get_logger(__name__)


def incremental_refresh(plan: IncrementalPlan, phases: PhaseClock | None = None) -> RefreshResult:
    phases = phases or PhaseClock()
    base = plan.base
    lakehouse = base.reads.lakehouse
    settings = lakehouse.config.refresh
    moved = bool(plan.moved)
    # The one decision between the Arrow and the Spark delta, before any row is read.
    route: ArrowRoute | str | None = _route(plan, lakehouse)
    phases.end("plan")
    storage = base.storage
    spark = lakehouse.spark
    views = TempViews(spark)
    mode = RefreshMode.INCREMENTAL if moved else RefreshMode.NO_OP
    reason = RefreshReason.SOURCE_CHANGED if moved else RefreshReason.NO_LOGICAL_CHANGE
    planned_from = plan.planned_from.snapshot_id
    engine: str | None = None
    try:
        with change_reader(spark, lakehouse.catalog_name) as reader:
            patch: StoragePatch | None = None
            scanned = 0
            if moved:
                target = PatchTarget(
                    storage,
                    base.mv.storage,
                    lakehouse.catalog_name,
                    planned_from,
                    settings.driver_commit_max_rows,
                )
                if isinstance(route, ArrowRoute):
                    cache = shared_cache(settings.arrow_cache_bytes)
                    patch, scanned, route = _arrow_patch(route, target, cache, phases)
                if patch is None and plan.arrow_only is not None:
                    raise FullRefreshRequiredError(
                        RefreshReason.DELTA_TOO_LARGE,
                        f"{plan.arrow_only}; the Arrow path refused: {route}",
                    )
                if patch is None:
                    # Top-level columns only (`column_names` also names an array's elements).
                    outputs = [f.name for f in storage.schema().fields]
                    try:
                        patch = _prepare_patch(plan, reader, views, outputs, target, phases)
                    except FullRefreshRequiredError as wrong:
                        if wrong.reason != RefreshReason.STORAGE_INCONSISTENT:
                            raise
                        raise FullRefreshRequiredError(wrong.reason, wrong.detail, plan.rule) from (
                            wrong
                        )
                    if isinstance(plan.analysis, RowsAnalysis) and plan.analysis.top_n is not None:
                        mode, reason = RefreshMode.NO_OP, RefreshReason.TOP_N_UNREACHED
                engine = ENGINE_ARROW if route is None else ENGINE_SPARK
            else:  # sources moved only by compaction: a new refresh record, no data change
                patch = DriverPatch(0, 0, storage.schema().as_arrow().empty_table())
                phases.end("changes")
            phases.end("patch")
            details: dict[str, str] = {
                SummaryKey.MODE: mode,
                SummaryKey.REASON: reason,
                SummaryKey.STORAGE_WRITE: (
                    StorageWrite.DRIVER if isinstance(patch, DriverPatch) else StorageWrite.SPARK
                ),
            }
            if engine is not None:
                details[SummaryKey.ENGINE] = engine
            if patch.rows_inserted is not None:
                details[SummaryKey.ROWS_INSERTED] = str(patch.rows_inserted)
            if patch.rows_deleted is not None:
                details[SummaryKey.ROWS_DELETED] = str(patch.rows_deleted)
            properties = commit_properties(base.state, details)
            scanned += reader.records_scanned
            if isinstance(patch, DriverPatch):
                commit_rows(storage, planned_from, patch.rows, patch.replaces, properties)
            else:
                commit_via_branch(
                    lakehouse, base.mv.storage, planned_from, _write(spark, patch, properties)
                )
            phases.end("commit")
    finally:
        views.drop()
    result = result_of_commit(
        base, mode, reason, properties, patch.rows_inserted, patch.rows_deleted, scanned, phases
    )
    return dataclasses.replace(
        result,
        engine=engine,
        engine_reason=route if engine == ENGINE_SPARK and isinstance(route, str) else None,
    )


def arrow_takes(lakehouse: Lakehouse) -> Callable[[IncrementalPlan], bool]:
    """Whether the Arrow path would take a plan's delta (for policy `auto`'s estimate)."""
    return lambda plan: isinstance(_route(plan, lakehouse), ArrowRoute)


def _route(plan: IncrementalPlan, lakehouse: Lakehouse) -> ArrowRoute | str:
    """The Arrow route, or why Spark computes the delta."""
    if str(lakehouse.config.spark.conf.get("spark.sql.ansi.enabled", "")).lower() == "true":
        return "spark.sql.ansi.enabled: Spark fails on overflow and bad casts, Arrow would not"
    settings = lakehouse.config.refresh
    return arrow_route(
        plan,
        settings.arrow_max_rows,
        settings.driver_commit_max_rows,
        settings.arrow_join_max_rows,
        settings.arrow_read_max_rows,
    )


def _arrow_patch(
    route: ArrowRoute, target: PatchTarget, cache: AppendedRowsCache, phases: PhaseClock
) -> tuple[DriverPatch | None, int, ArrowRoute | str | None]:
    """The patch computed in Arrow, the source rows read, and None as the route taken;
    or no patch and why, when the rows show the Arrow path cannot take it after all."""
    try:
        rows, read = route.read(cache)
        phases.end("changes")
        return route.patch(rows, target), read, None
    except ArrowUnsupportedError as exc:
        return None, 0, str(exc)
    except pa.ArrowException as exc:  # a kernel the subset should not have reached: Spark
        log.warning("arrow_delta_failed", mv=str(target.identifier), error=str(exc))
        return None, 0, f"Arrow failed: {exc}"


def _prepare_patch(
    plan: IncrementalPlan,
    reader: ChangeReader,
    views: TempViews,
    outputs: list[str],
    target: PatchTarget,
    phases: PhaseClock,
) -> StoragePatch:
    delta_views = {}
    for identifier, change in plan.moved.items():
        rows = reader.change_rows(change, plan.change_read(identifier))
        if change.changed_records <= target.driver_max_rows:
            # Small: one partition, so the delta's aggregates and joins need no shuffle.
            rows = rows.coalesce(1)
        delta_views[identifier] = views.register_frame("delta", rows)
    phases.end("changes")
    catalog = target.catalog
    inputs = DeltaInputs(
        catalog=catalog,
        delta_views=delta_views,
        old={
            i: c.old_snapshot_id if i in plan.moved else c.new_snapshot_id
            for i, c in plan.changes.items()
        },
        new={i: c.new_snapshot_id for i, c in plan.changes.items()},
    )
    analysis = plan.analysis
    if needs_keyed_delta(analysis, inputs):  # K once, not once per restricted read
        keys = touched_keys(views, analysis.query, inputs, lambda i: _schema(plan, i))
        inputs = dataclasses.replace(inputs, keys=keys)
    if not isinstance(analysis, AggregateAnalysis):
        delta = rows_delta(analysis, inputs)
        if delta is None:
            raise _no_term_error(plan.moved)
        if analysis.top_n is not None:  # append-only (plan.py): reached -> full refresh
            return unreached_patch(
                views.spark, analysis.top_n, delta, analysis.output_columns, target
            )
        return rows_patch(views, delta, outputs, target, plan.insert_only)
    pre_delta = pre_aggregation_delta(analysis, inputs)
    if pre_delta is None:
        raise _no_term_error(plan.moved)
    with_deletes = plan.with_deletes
    state = plan.base.state_columns
    new_query = pin_tables(state_query(analysis, state), catalog, inputs.new)

    def recompute() -> StoragePatch:
        return recompute_groups_patch(views, analysis, pre_delta, new_query, outputs, target)

    if analysis.aggregate_strategy(with_deletes, stateful=bool(state)) == "merge-aggregates":
        types = plan.base.layout.types
        return merge_aggregates_patch(
            views, analysis, pre_delta, outputs, target, with_deletes, recompute, state, types
        )
    return recompute()


def _schema(plan: IncrementalPlan, identifier: Identifier) -> Schema | None:
    """A source's schema at its pinned snapshot, from the refresh's own (shared) loads;
    None: not a source."""
    change = plan.changes.get(identifier)
    if change is None:
        return None
    return read_schema(plan.base.reads.load_table(identifier), change)


def _no_term_error(moved: Iterable[Identifier]) -> RuntimeError:
    """A moved source that no table occurrence of the query matches: a naming bug."""
    names = ", ".join(str(i) for i in moved)
    return RuntimeError(f"the view query reads none of the changed sources {names}")


def _write(
    spark: SparkSession, patch: SparkPatch, properties: Mapping[str, str]
) -> Callable[[str], None]:
    def write(target: str) -> None:
        run_with_commit_properties(spark, properties, lambda: patch.apply(target))

    return write
