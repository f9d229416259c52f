"""Incremental refresh: apply the view delta since the last refresh record, exactly once.

Given an `IncrementalPlan` (sources pinned and checked against their recorded snapshots),
build each changed source's weighted change rows, derive the view delta, shape it into a
storage patch, and commit it in one snapshot carrying the new refresh-state. The commit
asserts main is still where the plan found it: from the driver by pyiceberg, or through
a private branch for Spark writes. Anything that makes a correct delta impossible raises
FullRefreshRequiredError with the reason.

One decision, at plan time (refresh/embedded/route.py): a small change is computed by the embedded
engine (DuckDB on the driver, refresh/embedded/executor.py), anything else by Spark
(refresh/exec/spark.py). Both run the same delta and merge trees (`_patch`). A refusal met
while running the embedded engine sends the refresh to Spark, except when policy `auto`
kept the refresh incremental only for the embedded read's lower cost (`plan.embedded_only`):
then it is FullRefreshRequiredError (`delta-too-large`), the full recompute being cheaper
than Spark's change read; likewise when a MIN/MAX merge on Spark must recompute a group
a delete took the extreme of and the plan found that reread dearer than a full recompute
(`plan.reread_too_dear`). The result says which engine computed the delta and, for Spark,
why not the embedded one.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import structlog

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.engine.jvm import planning_failure
from icemv.errors import EngineRefusedError, FullRefreshRequiredError
from icemv.format.summary import RefreshMode, RefreshReason, StorageWrite, SummaryKey
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.changes.reader import change_reader
from icemv.refresh.commit.branch import commit_via_branch
from icemv.refresh.commit.driver import commit_rows
from icemv.refresh.commit.spark_write import run_with_commit_properties
from icemv.refresh.embedded.executor import NAME as EMBEDDED
from icemv.refresh.embedded.reads import read_schema, shared_cache
from icemv.refresh.embedded.route import EmbeddedRoute, choose_route
from icemv.refresh.exec import Executor
from icemv.refresh.exec.spark import NAME as SPARK
from icemv.refresh.exec.spark import SparkExecutor
from icemv.refresh.patch.aggregates import merge_aggregates_patch, recompute_groups_patch
from icemv.refresh.patch.model import DriverPatch, PatchTarget, SparkPatch, StoragePatch
from icemv.refresh.patch.rows import rows_patch
from icemv.refresh.patch.top_n import unreached_patch
from icemv.refresh.patch.touched_keys import touched_keys
from icemv.refresh.phases import PhaseClock
from icemv.refresh.plan import IncrementalPlan
from icemv.refresh.record import commit_properties, result_of_commit
from icemv.refresh.result import RefreshResult
from icemv.sql.analysis import AggregateAnalysis, RowsAnalysis
from icemv.sql.delta import DeltaInputs, needs_keyed_delta, pre_aggregation_delta, rows_delta
from icemv.sql.state import state_query

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyspark.sql import SparkSession

log = structlog.get_logger(__name__)


def incremental_refresh(plan: IncrementalPlan, phases: PhaseClock | None = None) -> RefreshResult:
    phases = phases or PhaseClock()
    base = plan.base
    lakehouse = base.reads.lakehouse
    moved = bool(plan.moved)
    # The one decision between the embedded engine and Spark, before any row is read.
    route: EmbeddedRoute | str = ""
    if moved:  # decided once: policy auto's estimate may have decided it already
        route = plan.route if plan.route is not None else choose_route(plan, lakehouse)
    phases.end("plan")
    storage = base.storage
    mode = RefreshMode.INCREMENTAL if moved else RefreshMode.NO_OP
    reason = RefreshReason.SOURCE_CHANGED if moved else RefreshReason.NO_LOGICAL_CHANGE
    planned_from = plan.planned_from.snapshot_id
    engine: str | None = None
    scanned = 0
    with contextlib.ExitStack() as spark_parts:
        patch: StoragePatch | None = None
        if not moved:  # sources moved only by compaction: a new record, no data change
            patch = DriverPatch(0, 0, arrow_schema(storage.schema()).empty_table())
            phases.end("changes")
        else:
            target = _target(plan)
            if isinstance(route, EmbeddedRoute):
                patch, scanned, refused = _embedded_patch(plan, route, target, phases)
                engine, route = (EMBEDDED, "") if patch is not None else (None, refused)
            if patch is None and plan.embedded_only is not None:
                raise FullRefreshRequiredError(
                    RefreshReason.DELTA_TOO_LARGE,
                    f"{plan.embedded_only}; the embedded engine refused: {route}",
                )
            if patch is None:
                spark = lakehouse.spark
                views = SparkExecutor(spark)
                spark_parts.callback(views.drop)
                reader = spark_parts.enter_context(change_reader(spark, lakehouse.catalog_name))
                try:
                    inputs = _spark_inputs(plan, reader, views, target, phases)
                    patch = _patch(plan, views, inputs, target)
                except Exception as error:  # Spark failing to plan a delta: recompute
                    failure = planning_failure(error)
                    if failure is None:
                        raise
                    raise FullRefreshRequiredError(
                        RefreshReason.DELTA_FAILED, f"Spark could not plan the delta: {failure}"
                    ) from error
                scanned = reader.records_scanned
                engine = SPARK
            if isinstance(plan.analysis, RowsAnalysis) and plan.analysis.top_n is not None:
                mode, reason = RefreshMode.NO_OP, RefreshReason.TOP_N_UNREACHED
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
        if isinstance(patch, DriverPatch):
            commit_rows(storage, planned_from, patch.rows, patch.replaces, properties)
        else:
            commit_via_branch(
                lakehouse,
                base.mv.storage,
                planned_from,
                _write(lakehouse.spark, patch, properties),
            )
        phases.end("commit")
    result = result_of_commit(
        base, mode, reason, properties, patch.rows_inserted, patch.rows_deleted, scanned, phases
    )
    return dataclasses.replace(
        result,
        engine=engine,
        engine_reason=route if engine == SPARK and isinstance(route, str) and route else None,
    )


def embedded_route(lakehouse: Lakehouse) -> Callable[[IncrementalPlan], EmbeddedRoute | str]:
    """The embedded engine's route of a plan's delta, or why not (policy `auto`'s
    estimate; the plan keeps it for the refresh)."""
    return lambda plan: choose_route(plan, lakehouse)


def _embedded_patch(
    plan: IncrementalPlan, route: EmbeddedRoute, target: PatchTarget, phases: PhaseClock
) -> tuple[StoragePatch | None, int, str]:
    """The patch DuckDB computes and the source rows read for it; or none, and why the
    rows or the trees show that Spark must compute it after all."""
    settings = plan.base.reads.lakehouse.config.refresh
    cache = shared_cache(settings.embedded_cache_bytes)
    executor = route.executor()
    try:
        delta, read = route.read(executor, cache)
        held = route.hold(executor, cache, delta)
        phases.end("changes")
        inputs = _inputs(plan, delta, target, held)
        return _patch(plan, executor, inputs, target), read, ""
    except EngineRefusedError as why:
        return None, 0, str(why)
    finally:
        executor.drop()


def _target(plan: IncrementalPlan) -> PatchTarget:
    """The storage table as the patch reads and replaces it: at the planned snapshot."""
    lakehouse = plan.base.reads.lakehouse
    return PatchTarget(
        plan.base.storage,
        plan.base.mv.storage,
        lakehouse.catalog_name,
        plan.planned_from.snapshot_id,
        lakehouse.config.refresh.driver_commit_max_rows,
    )


def rehearse_patch(plan: IncrementalPlan, route: EmbeddedRoute) -> str:
    """Compute `plan`'s patch on the embedded engine and drop it (refresh/rehearsal.py):
    `rehearsed`, or why the engine refused."""
    patch, _, refused = _embedded_patch(plan, route, _target(plan), PhaseClock())
    return "rehearsed" if patch is not None else f"refused: {refused}"


def _spark_inputs(
    plan: IncrementalPlan,
    reader: object,
    views: SparkExecutor,
    target: PatchTarget,
    phases: PhaseClock,
) -> DeltaInputs:
    """Each moved source's change rows read by Spark, as temp views."""
    from icemv.refresh.changes.reader import ChangeReader

    assert isinstance(reader, ChangeReader)
    delta_views = {}
    for identifier, change in plan.moved.items():
        rows = reader.change_rows(change, plan.change_read(identifier))
        if change.changed_records <= target.driver_max_rows:
            # Small: one partition, so the delta's aggregates and joins need no shuffle.
            rows = rows.coalesce(1)
        delta_views[identifier] = views.register_frame("delta", rows)
    phases.end("changes")
    inputs = _inputs(plan, delta_views, target)
    if needs_keyed_delta(plan.analysis, inputs):  # K once, not once per restricted read
        keys = touched_keys(views, plan.analysis.query, inputs, lambda i: _schema(plan, i))
        inputs = dataclasses.replace(inputs, keys=keys)
    return inputs


def _inputs(
    plan: IncrementalPlan,
    delta_views: Mapping[Identifier, str],
    target: PatchTarget,
    held: Mapping[tuple[Identifier, int | None], str] | None = None,
) -> DeltaInputs:
    return DeltaInputs(
        catalog=target.catalog,
        delta_views=delta_views,
        old={
            i: c.old_snapshot_id if i in plan.moved else c.new_snapshot_id
            for i, c in plan.changes.items()
        },
        new={i: c.new_snapshot_id for i, c in plan.changes.items()},
        held=held,
    )


def _patch(
    plan: IncrementalPlan, views: Executor, inputs: DeltaInputs, target: PatchTarget
) -> StoragePatch:
    """The storage patch of the delta over `inputs`, by either executor; a wrong delta
    (storage-inconsistent) names the rule that computed it."""
    try:
        return _shaped(plan, views, inputs, target)
    except FullRefreshRequiredError as wrong:
        if wrong.reason != RefreshReason.STORAGE_INCONSISTENT:
            raise
        raise FullRefreshRequiredError(wrong.reason, wrong.detail, plan.rule) from wrong


def _shaped(
    plan: IncrementalPlan, views: Executor, inputs: DeltaInputs, target: PatchTarget
) -> StoragePatch:
    # Top-level columns only (`column_names` also names an array's elements).
    outputs = [f.name for f in target.table.schema().fields]
    analysis = plan.analysis
    if not isinstance(analysis, AggregateAnalysis):
        delta = rows_delta(analysis, inputs)
        if delta is None:
            return _unchanged(plan, inputs, target)
        if analysis.top_n is not None:  # a changed row reaching the top n: full refresh
            return unreached_patch(views, analysis.top_n, delta, analysis.output_columns, target)
        return rows_patch(views, delta, outputs, target, plan.insert_only)
    pre_delta = pre_aggregation_delta(analysis, inputs)
    if pre_delta is None:
        return _unchanged(plan, inputs, target)
    with_deletes = plan.with_deletes
    state = plan.base.state_columns

    def recompute() -> StoragePatch:
        if plan.reread_too_dear is not None and isinstance(views, SparkExecutor):
            raise FullRefreshRequiredError(
                RefreshReason.DELTA_TOO_LARGE,
                f"{plan.reread_too_dear} (a delete reached a group's stored extreme: "
                "recomputing the group reads every source)",
            )
        new_query = inputs.pinned(state_query(analysis, state), inputs.new)
        return recompute_groups_patch(views, analysis, pre_delta, new_query, outputs, target)

    if plan.aggregate_strategy() == "merge-aggregates":
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


def _unchanged(plan: IncrementalPlan, inputs: DeltaInputs, target: PatchTarget) -> DriverPatch:
    """No delta term: a keyed view whose moved sources only subqueries no key bounds read
    (no occurrence touches a key: `touched_keys_query`), each such subquery shown to have
    the same value at both snapshots by the plan (`_unless_unchanged_subqueries`, which
    otherwise recomputes): every row of the view is as it was, an empty patch. Elsewhere a
    moved source that no table occurrence of the query matches: a naming bug."""
    if not needs_keyed_delta(plan.analysis, inputs):
        names = ", ".join(str(i) for i in plan.moved)
        raise RuntimeError(f"the view query reads none of the changed sources {names}")
    return DriverPatch(0, 0, arrow_schema(target.table.schema()).empty_table())


def _write(
    spark: SparkSession, patch: SparkPatch, properties: Mapping[str, str]
) -> Callable[[str], None]:
    def write(target: str) -> None:
        run_with_commit_properties(spark, properties, lambda: patch.apply(target))

    return write
