"""Incremental refresh: apply the view delta since the last refresh record, exactly once.

Plan: pin every source now; check each against its recorded snapshot (history intact,
same table); build the delta of each changed source; derive the view delta; write it to
a private branch of the storage table in one commit carrying the new refresh-state, and
fast-forward main only if nobody else committed since the plan. Anything that makes a
correct delta impossible raises FullRefreshRequiredError with the reason.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icemv.catalog.lakehouse import Lakehouse
from icemv.errors import FullRefreshRequiredError
from icemv.identifiers import Identifier
from icemv.mv.history import RefreshRecord
from icemv.mv.model import MaterializedView
from icemv.refresh.changes.classify import SourceChange, classify_change
from icemv.refresh.changes.reader import ChangeReader, change_reader
from icemv.refresh.commit.driver import commit_rows
from icemv.refresh.commit.spark_write import (
    REFRESH_ID_KEY,
    commit_properties,
    commit_via_branch,
    find_commit,
    run_with_commit_properties,
)
from icemv.refresh.patch.strategies import (
    PatchTarget,
    StoragePatch,
    _Views,
    merge_aggregates_patch,
    recompute_groups_patch,
    rows_patch,
)
from icemv.refresh.result import RefreshResult
from icemv.spec.refresh_state import RefreshState
from icemv.sql.analysis import IvmAnalysis, analyse
from icemv.sql.delta import (
    DeltaInputs,
    pre_aggregation_delta_sql,
    query_at_sql,
    rows_delta_sql,
)
from icemv.sql.pinning import pin_sources

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class IncrementalPolicy:
    # `auto` recomputes fully when the changed records exceed this share of the sources.
    max_delta_ratio: float | None


def incremental_refresh(
    lakehouse: Lakehouse, mv: MaterializedView, record: RefreshRecord, policy: IncrementalPolicy
) -> RefreshResult:
    started = time.time()
    started_ms = int(started * 1000)
    phases: dict[str, float] = {}
    mark = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = round(phases.get(name, 0.0) + now - mark, 3)
        mark = now

    namespace = mv.version.default_namespace or mv.identifier.namespace
    analysis = analyse(lakehouse, mv.sql, namespace)
    if not analysis.maintainable:
        raise FullRefreshRequiredError(analysis.reasons[0], "; ".join(analysis.details))
    storage = lakehouse.load_table(mv.storage)
    planned_from = storage.current_snapshot()
    if planned_from is None:
        raise FullRefreshRequiredError("never-refreshed")
    pinned = pin_sources(lakehouse, mv.sql, namespace)
    recorded = {s.key: s for s in record.state.source_states}
    current = {s.key: s for s in pinned.sources}
    if recorded.keys() != current.keys():
        raise FullRefreshRequiredError(
            "sources-changed", "the view reads other tables than recorded"
        )

    changes: dict[Identifier, SourceChange] = {}
    for key, source in current.items():
        if source.type != "table":
            continue
        identifier = Identifier(source.namespace, source.name)
        table = lakehouse.load_table(identifier)
        changes[identifier] = classify_change(table, recorded[key], source.snapshot_id)
    moved = {i: c for i, c in changes.items() if c.kind in ("append-only", "general")}
    if policy.max_delta_ratio is not None and moved:
        changed = sum(c.changed_records for c in moved.values())
        total = sum(max(c.total_records, 1) for c in moved.values())
        if changed > policy.max_delta_ratio * total:
            raise FullRefreshRequiredError(
                "delta-too-large", f"{changed} changed records against {total} in the sources"
            )

    phase("plan")
    state = RefreshState(mv.version.version_id, started_ms, pinned.sources)
    outputs = storage.schema().column_names
    spark = lakehouse.spark
    views = _Views(spark)
    mode = "incremental" if moved else "no-op"
    try:
        with change_reader(spark, lakehouse.catalog_name) as reader:
            if moved:
                target = PatchTarget(
                    storage,
                    planned_from.snapshot_id,
                    f"{lakehouse.quoted(mv.storage)} VERSION AS OF {planned_from.snapshot_id}",
                    lakehouse.config.refresh.driver_commit_max_rows,
                )
                patch = _prepare_patch(
                    lakehouse, analysis, changes, moved, reader, views, outputs, target
                )
            else:  # sources moved only by compaction: a new refresh record, no data change
                patch = StoragePatch(0, 0, rows=storage.schema().as_arrow().empty_table())
            phase("delta")
            details = {
                "icemv.mode": mode,
                "icemv.reason": "source-changed" if moved else "no-logical-change",
                "icemv.storage-write": "spark" if patch.rows is None else "driver",
            }
            if patch.rows_inserted is not None:
                details["icemv.rows-inserted"] = str(patch.rows_inserted)
            if patch.rows_deleted is not None:
                details["icemv.rows-deleted"] = str(patch.rows_deleted)
            properties = commit_properties(state, details)
            scanned = reader.records_scanned
            if patch.rows is not None:
                commit_rows(
                    storage, planned_from.snapshot_id, patch.rows, patch.replaces, properties
                )
            else:
                commit_via_branch(
                    lakehouse,
                    mv.storage,
                    planned_from.snapshot_id,
                    lambda target: _write(spark, patch, properties, target),
                )
            phase("commit")
    finally:
        views.drop()
    committed = find_commit(storage.refresh(), properties[REFRESH_ID_KEY])
    summary = committed.summary.additional_properties if committed and committed.summary else {}
    inserted = patch.rows_inserted
    if inserted is None:
        inserted = int(summary.get("added-records", 0))
    deleted = patch.rows_deleted
    if deleted is None:
        deleted = int(summary.get("added-position-deletes", 0)) + int(
            summary.get("deleted-records", 0)
        )
    return RefreshResult(
        mv=mv.identifier,
        mode=mode,  # type: ignore[arg-type]
        reason=properties["icemv.reason"],
        storage_snapshot_id=committed.snapshot_id if committed else None,
        rows_inserted=inserted,
        rows_deleted=deleted,
        sources=pinned.sources,
        started_ms=started_ms,
        duration_seconds=time.time() - started,
        source_rows_read=scanned,
        phase_seconds=phases,
    )


def _prepare_patch(
    lakehouse: Lakehouse,
    analysis: IvmAnalysis,
    changes: dict[Identifier, SourceChange],
    moved: dict[Identifier, SourceChange],
    reader: ChangeReader,
    views: _Views,
    outputs: list[str],
    target: PatchTarget,
) -> StoragePatch:
    delta_views = {}
    for identifier, change in moved.items():
        name = f"__icemv_delta_{uuid.uuid4().hex[:12]}"
        rows = reader.change_rows(change)
        if change.changed_records <= target.driver_max_rows:
            # Small: one partition, so the delta's aggregates and joins need no shuffle.
            rows = rows.coalesce(1)
        rows.createOrReplaceTempView(name)
        views.names.append(name)
        delta_views[identifier] = name
    inputs = DeltaInputs(
        catalog=lakehouse.catalog_name,
        delta_views=delta_views,
        old={i: c.old_snapshot_id if i in moved else c.new_snapshot_id for i, c in changes.items()},
        new={i: c.new_snapshot_id for i, c in changes.items()},
    )
    if analysis.shape == "rows":
        delta_sql = rows_delta_sql(analysis, inputs)
        assert delta_sql is not None
        insert_only = all(c.kind == "append-only" for c in moved.values())
        return rows_patch(views, delta_sql, outputs, target, insert_only)
    pre_delta = pre_aggregation_delta_sql(analysis, inputs)
    assert pre_delta is not None
    with_deletes = any(c.kind == "general" for c in moved.values())
    new_sql = query_at_sql(analysis, lakehouse.catalog_name, inputs.new)

    def recompute() -> StoragePatch:
        return recompute_groups_patch(views, analysis, pre_delta, new_sql, outputs, target)

    if analysis.aggregate_strategy(with_deletes) == "merge-aggregates":
        return merge_aggregates_patch(
            views, analysis, pre_delta, outputs, target, with_deletes, recompute
        )
    return recompute()


def _write(
    spark: SparkSession, patch: StoragePatch, properties: dict[str, str], target: str
) -> None:
    apply = patch.apply
    assert apply is not None, "a patch without rows is a Spark write"
    run_with_commit_properties(spark, properties, lambda: apply(target))
