"""Full refresh: recompute the view SQL at the pinned source snapshots, overwrite the storage."""

from __future__ import annotations

from icemv.format.summary import RefreshMode, SummaryKey
from icemv.refresh.commit.spark_write import overwrite_storage
from icemv.refresh.phases import PhaseClock
from icemv.refresh.plan import RefreshPlan
from icemv.refresh.record import commit_properties, result_of_commit
from icemv.refresh.result import RefreshResult


def full_refresh(
    plan: RefreshPlan,
    reason: str,
    phases: PhaseClock | None = None,
    verify_diff: str | None = None,
) -> RefreshResult:
    """Recompute the view; `verify_diff`: what a verification found, kept in the record."""
    phases = phases or PhaseClock()
    phases.end("plan")
    lakehouse = plan.reads.lakehouse
    details: dict[str, str] = {SummaryKey.MODE: RefreshMode.FULL, SummaryKey.REASON: reason}
    if verify_diff is not None:
        details[SummaryKey.VERIFY_DIFF] = verify_diff[:500]
    properties = commit_properties(plan.state, details)
    df = lakehouse.spark.sql(plan.full_sql())
    # The storage schema was derived from the query: align by position, keep storage names.
    df = df.toDF(*[field.name for field in plan.storage.schema().fields])
    planned_from = plan.planned_from
    overwrite_storage(
        df,
        lakehouse.quoted(plan.mv.storage),
        planned_from.snapshot_id if planned_from else None,
        properties,
    )
    phases.end("commit")  # the recompute runs as Spark writes
    return result_of_commit(
        plan,
        RefreshMode.FULL,
        reason,
        properties,
        rows_inserted=None,
        rows_deleted=None,
        source_rows_read=plan.source_records(),
        phases=phases,
    )
