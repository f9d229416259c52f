"""What one refresh did, for callers, logs and metrics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from icemv.format.refresh_state import SourceState
from icemv.format.summary import RefreshMode
from icemv.identifiers import Identifier
from icemv.mv.history import RefreshRecord

Mode = RefreshMode  # the name callers import


@dataclass(frozen=True)
class RefreshResult:
    mv: Identifier
    # skipped: the MV was already fresh, nothing committed.
    mode: RefreshMode
    reason: str  # a RefreshReason, or an analysis code for a fallback (`window-function`)
    storage_snapshot_id: int | None
    rows_inserted: int
    rows_deleted: int
    sources: tuple[SourceState, ...]
    started_ms: int
    duration_seconds: float
    attempts: int = 1
    # Source rows this refresh scanned (files of the change sets, or whole sources).
    source_rows_read: int | None = None
    # Where the time went, by phase (refresh/phases.py: plan, changes, patch, commit, record).
    phase_seconds: Mapping[str, float] = field(default_factory=dict)
    # The refreshing thread's CPU time by phase (refresh/phases.py).
    phase_cpu_seconds: Mapping[str, float] = field(default_factory=dict)
    # When each phase ran: (start, end) in epoch seconds.
    phase_spans: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # Who computed the delta: `duckdb` (the embedded engine on the driver, no Spark job) or
    # `spark`; None for a refresh without a delta (full, skipped, no-op). When Spark, why
    # not the embedded engine.
    engine: str | None = None
    engine_reason: str | None = None
    # The delta rule this refresh found wrong and quarantined (refresh/incident.py).
    incident: str | None = None
    # A full refresh the incremental path fell back to: why, in words (the reason's detail).
    fallback_detail: str | None = None
    # The refresh worker process that ran it (service/refresh_workers.py); None: the
    # daemon's own process.
    worker_pid: int | None = None
    # The record of the storage snapshot it committed, and for each source snapshot it
    # absorbed, seconds from that commit to this one (`icemv_commit_to_fresh_seconds`):
    # known where it committed, from what it loaded, so the daemon need not load them again.
    record: RefreshRecord | None = None
    commit_to_fresh_seconds: tuple[float, ...] = ()
    # Snapshots the storage table holds after the commit (upkeep comes early past a bound).
    storage_snapshots: int | None = None

    @property
    def committed(self) -> bool:
        return self.storage_snapshot_id is not None and self.mode != RefreshMode.SKIPPED
