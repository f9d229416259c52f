"""The refresh entry point: decide whether and how to refresh one MV, and do it once.

A conflict on the storage commit means another refresh got there first; re-planning from
the new state either finds the MV fresh (nothing to do) or refreshes again.
"""

from __future__ import annotations

import time

import structlog

from daemon.freshness import assess_freshness
from daemon.full_refresh import full_refresh
from daemon.identifiers import Identifier
from daemon.lakehouse import Lakehouse
from daemon.materialized_view import load_materialized_view
from daemon.refresh_result import RefreshResult
from daemon.storage_commit import StorageCommitConflictError

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 4


class RefreshFailedError(RuntimeError):
    pass


def refresh_mv(
    lakehouse: Lakehouse, identifier: Identifier, force_full: bool = False
) -> RefreshResult:
    for attempt in range(1, MAX_ATTEMPTS + 1):
        started = time.time()
        mv = load_materialized_view(lakehouse, identifier)
        freshness = assess_freshness(lakehouse, mv)
        if freshness.state == "fresh" and not force_full:
            record = freshness.last_refresh
            return RefreshResult(
                mv=identifier,
                mode="skipped",
                reason="already-fresh",
                storage_snapshot_id=record.snapshot_id if record else None,
                rows_inserted=0,
                rows_deleted=0,
                sources=record.state.source_states if record else (),
                started_ms=int(started * 1000),
                duration_seconds=time.time() - started,
                attempts=attempt,
            )
        reason = "requested" if force_full else (freshness.reason or "stale")
        try:
            result = full_refresh(lakehouse, mv, reason)
        except StorageCommitConflictError as exc:
            log.info(
                "refresh_conflict_replanning", mv=str(identifier), attempt=attempt, error=str(exc)
            )
            force_full = False  # whoever won may have made the MV fresh already
            continue
        return RefreshResult(**{**result.__dict__, "attempts": attempt})
    raise RefreshFailedError(f"{identifier}: storage commit conflicted {MAX_ATTEMPTS} times")
