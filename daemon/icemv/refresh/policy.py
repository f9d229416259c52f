"""The refresh entry point: decide whether and how to refresh one MV, and do it once.

Policy (view property `icemv.refresh-policy`): `auto` (default) refreshes incrementally
unless the change read, its estimated rows weighted by `refresh.auto_cost_factor`, would
scan more than a full recompute (refresh/cost.py); `incremental`
always tries; `incremental-strict` fails rather than fall back to a full recompute (except
for the first refresh and after a definition change, which are full by nature); `full`
always recomputes. Every fallback carries its reason into the commit and the result.

A conflict on the storage commit means another refresh got there first; re-planning from
the new state either finds the MV fresh (nothing to do) or refreshes again.
"""

from __future__ import annotations

import dataclasses
import time

import structlog

from icemv.errors import FullRefreshRequiredError, RefreshFailedError, StorageCommitConflictError
from icemv.format.summary import RefreshMode, RefreshReason
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse, refresh_reads, remember
from icemv.mv.freshness import assess_freshness
from icemv.mv.model import REFRESH_POLICIES, REFRESH_POLICY_PROPERTY, load_materialized_view
from icemv.mv.preflight import prepare_refresh
from icemv.refresh.full import full_refresh
from icemv.refresh.incident import record_incident
from icemv.refresh.incremental import embedded_route, incremental_refresh
from icemv.refresh.phases import PhaseClock
from icemv.refresh.plan import plan_incremental, plan_refresh
from icemv.refresh.result import RefreshResult

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 4
# Fallbacks that even `incremental-strict` accepts: there is nothing to be incremental from.
INHERENTLY_FULL = (RefreshReason.NEVER_REFRESHED, RefreshReason.DEFINITION_CHANGED)


def refresh_mv(
    lakehouse: Lakehouse,
    identifier: Identifier,
    force_full: bool = False,
    repair: str | None = None,
) -> RefreshResult:
    """`repair`: a verification's diff summary; the refresh is then full
    (`verify-mismatch`) and its record keeps the summary."""
    force_full = force_full or repair is not None
    # Each table loaded once per attempt; on the first, those the last refresh read asked
    # for in one request.
    reads = refresh_reads(lakehouse, identifier)
    try:
        return _refresh(lakehouse, identifier, force_full, repair, reads)
    finally:
        remember(identifier, reads)


def _refresh(
    lakehouse: Lakehouse,
    identifier: Identifier,
    force_full: bool,
    repair: str | None,
    reads: CatalogReads,
) -> RefreshResult:
    phases = PhaseClock()  # the first attempt's `plan` includes the preparation
    prepare_refresh(reads, identifier, refresh_mv)  # leftovers, source MVs, lost columns
    for attempt in range(1, MAX_ATTEMPTS + 1):
        started = time.time()
        if attempt > 1:
            phases = PhaseClock()
            reads = CatalogReads(lakehouse)
        mv = load_materialized_view(lakehouse, identifier, reads)
        freshness = assess_freshness(lakehouse, mv, reads=reads)
        if freshness.state == "fresh" and not force_full:
            record = freshness.last_refresh
            return RefreshResult(
                mv=identifier,
                mode=RefreshMode.SKIPPED,
                reason=RefreshReason.ALREADY_FRESH,
                storage_snapshot_id=record.snapshot_id if record else None,
                rows_inserted=0,
                rows_deleted=0,
                sources=record.state.source_states if record else (),
                started_ms=int(started * 1000),
                duration_seconds=time.time() - started,
                attempts=attempt,
                record=record,
            )
        policy = mv.properties.get(REFRESH_POLICY_PROPERTY, "auto")
        if policy not in REFRESH_POLICIES:
            allowed = ", ".join(REFRESH_POLICIES)
            raise RefreshFailedError(
                f"{identifier}: {REFRESH_POLICY_PROPERTY}={policy!r} is not one of {allowed}"
            )
        try:
            plan = plan_refresh(reads, mv, int(started * 1000))
            if repair is not None:
                result = full_refresh(plan, RefreshReason.VERIFY_MISMATCH, phases, repair)
            elif force_full:
                result = full_refresh(plan, RefreshReason.REQUESTED, phases)
            elif policy == "full":
                result = full_refresh(plan, RefreshReason.POLICY_FULL, phases)
            elif freshness.state == "invalid" or freshness.last_refresh is None:
                reason = freshness.reason or RefreshReason.INVALID
                if policy == "incremental-strict" and reason not in INHERENTLY_FULL:
                    raise RefreshFailedError(f"{identifier}: incremental-strict but {reason}")
                result = full_refresh(plan, reason, phases)
            else:
                factor = lakehouse.config.refresh.auto_cost_factor if policy == "auto" else None
                try:
                    incremental = plan_incremental(
                        plan, freshness.last_refresh, factor, embedded_route(lakehouse)
                    )
                    result = incremental_refresh(incremental, phases)
                except FullRefreshRequiredError as fallback:
                    incident = fallback.rule
                    if incident is not None:
                        record_incident(plan, incident, fallback.detail, freshness.last_refresh)
                    if policy == "incremental-strict":
                        raise RefreshFailedError(
                            f"{identifier}: incremental-strict but {fallback}"
                        ) from fallback
                    log.info(
                        "refresh_fallback",
                        mv=str(identifier),
                        reason=fallback.reason,
                        detail=fallback.detail,
                    )
                    result = full_refresh(plan, fallback.reason, phases)
                    result = dataclasses.replace(
                        result, incident=incident, fallback_detail=fallback.detail
                    )
        except StorageCommitConflictError as exc:
            log.info(
                "refresh_conflict_replanning", mv=str(identifier), attempt=attempt, error=str(exc)
            )
            # Whoever won may have made the MV fresh already (a repair still repairs).
            force_full = repair is not None
            continue
        log.debug(
            "refresh_catalog_loads",
            mv=str(identifier),
            tables=reads.table_loads,
            views=reads.view_loads,
        )
        return dataclasses.replace(result, attempts=attempt)
    raise RefreshFailedError(f"{identifier}: storage commit conflicted {MAX_ATTEMPTS} times")
