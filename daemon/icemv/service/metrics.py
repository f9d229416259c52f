"""Prometheus metrics of the daemon, in a registry of their own.

A dedicated `CollectorRegistry` per `Metrics` keeps the process-global default registry
(and whatever libraries put in it) out of our exposition, and lets tests make fresh ones.
The metric names are a contract with the Helm chart's alerts and dashboards: change them
only together, and keep `METRIC_NAMES` in step.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pyiceberg.exceptions import CommitFailedException

from icemv.errors import StorageCommitConflictError, ViewCommitConflictError
from icemv.lakehouse import CatalogReads
from icemv.mv.freshness import Freshness, State
from icemv.refresh.result import RefreshResult

# Family names as PromQL sees them (histograms add _bucket, _sum and _count series).
METRIC_NAMES: tuple[str, ...] = (
    "icemv_up",
    "icemv_ready",
    "icemv_build_info",
    "icemv_mv_staleness_seconds",
    "icemv_mv_state",
    "icemv_mv_pending_snapshots",
    "icemv_mv_last_refresh_timestamp_seconds",
    "icemv_mv_max_staleness_seconds",
    "icemv_refresh_duration_seconds",
    "icemv_refresh_phase_seconds",
    "icemv_refreshes_total",
    "icemv_refresh_rows_total",
    "icemv_events_total",
    "icemv_events_dead_lettered_total",
    "icemv_commit_to_fresh_seconds",
    "icemv_kafka_consumer_lag",
    "icemv_kafka_connected",
    "icemv_poll_overruns_total",
    "icemv_catalog_loads_total",
    "icemv_refresh_attempts_total",
    "icemv_owned_mvs",
    "icemv_refresh_requests_forwarded_total",
    "icemv_refresh_worker_handbacks_total",
    "icemv_refresh_inconsistent_total",
    "icemv_verify_runs_total",
    "icemv_verify_mismatches_total",
    "icemv_verify_last_clean_timestamp_seconds",
    "icemv_http_requests_refused_total",
)
# What a verification run came to (mv/verify.py).
VERIFY_RESULTS = ("clean", "mismatch", "error", "skipped")

STATES: tuple[State, ...] = ("fresh", "stale", "invalid")
EVENT_FORMATS = frozenset({"icemv", "lakekeeper", "polaris", "unknown"})
# Losing a commit race is routine under concurrency; alert on it apart from real failures.
CONFLICT_ERRORS: tuple[type[BaseException], ...] = (
    StorageCommitConflictError,
    ViewCommitConflictError,
    CommitFailedException,
)

# A no-op incremental refresh takes ~0.1 s, a full rebuild of a big MV tens of minutes.
REFRESH_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800)
# Phases of small refreshes take milliseconds (a fleet's per-MV cost is counted in them).
PHASE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
# Event-driven refreshes land within seconds; polling or backlog can take up to an hour.
COMMIT_TO_FRESH_BUCKETS = (0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)


def _package_version() -> str:
    try:
        return importlib.metadata.version("icemv")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Metrics:
    """All icemv metrics; one instance per daemon, fresh ones in tests."""

    def __init__(self, version: str | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.up = Gauge("icemv_up", "1 while the icemv process runs.", registry=r)
        self.ready = Gauge("icemv_ready", "1 when icemv is ready to serve, else 0.", registry=r)
        self.build_info = Gauge(
            "icemv_build_info", "Always 1; the version is a label.", ["version"], registry=r
        )
        self.staleness = Gauge(
            "icemv_mv_staleness_seconds",
            "Seconds since the first source commit the MV has not absorbed (0 when fresh).",
            ["mv"],
            registry=r,
        )
        self.state = Gauge(
            "icemv_mv_state",
            "1 for the MV's current freshness state, else 0.",
            ["mv", "state"],
            registry=r,
        )
        self.pending = Gauge(
            "icemv_mv_pending_snapshots",
            "Source snapshots (or view versions) committed since the MV's last refresh.",
            ["mv"],
            registry=r,
        )
        self.last_refresh = Gauge(
            "icemv_mv_last_refresh_timestamp_seconds",
            "Unix time of the commit of the MV's latest refresh.",
            ["mv"],
            registry=r,
        )
        self.max_staleness = Gauge(
            "icemv_mv_max_staleness_seconds",
            "The MV's freshness target; absent when it has none.",
            ["mv"],
            registry=r,
        )
        self.refresh_duration = Histogram(
            "icemv_refresh_duration_seconds",
            "Wall time of completed refreshes (mode=skipped: found already fresh).",
            ["mv", "mode"],
            buckets=REFRESH_DURATION_BUCKETS,
            registry=r,
        )
        self.refresh_phase = Histogram(
            "icemv_refresh_phase_seconds",
            "Wall time of completed refreshes by phase (plan, changes, patch, commit, record).",
            ["mode", "phase"],
            buckets=PHASE_BUCKETS,
            registry=r,
        )
        self.refreshes = Counter(
            "icemv_refreshes",
            "Refresh attempts by outcome (success|failure|conflict|skipped) and reason.",
            ["mv", "mode", "outcome", "reason"],
            registry=r,
        )
        self.rows = Counter(
            "icemv_refresh_rows",
            "Rows refreshes inserted into or deleted from MV storage.",
            ["mv", "change"],
            registry=r,
        )
        self.events = Counter(
            "icemv_events",
            "Catalog change events received, by payload format and what became of them.",
            ["format", "outcome"],
            registry=r,
        )
        self.dead_lettered = Counter(
            "icemv_events_dead_lettered",
            "Records given up on (by reason code) and copied to the dead-letter topic.",
            ["reason"],
            registry=r,
        )
        self.commit_to_fresh = Histogram(
            "icemv_commit_to_fresh_seconds",
            "From a source snapshot's commit to the commit of the refresh that absorbed it.",
            ["mv"],
            buckets=COMMIT_TO_FRESH_BUCKETS,
            registry=r,
        )
        self.kafka_lag = Gauge(
            "icemv_kafka_consumer_lag",
            "Messages behind the end of the partition.",
            ["topic", "partition"],
            registry=r,
        )
        self.kafka_connected = Gauge(
            "icemv_kafka_connected", "1 while connected to Kafka, else 0.", registry=r
        )
        self.poll_overruns = Counter(
            "icemv_poll_overruns",
            "Catalog polls that took longer than polling.interval_seconds.",
            registry=r,
        )
        self.catalog_loads = Counter(
            "icemv_catalog_loads",
            "Table and view loads of catalog polls and freshness checks (of targets, after "
            "refreshes): loaded (a catalog request or a metadata read) or reused (unchanged "
            "since the last poll).",
            ["object", "result"],
            registry=r,
        )
        self.attempts = Counter(
            "icemv_refresh_attempts",
            "Refreshes this replica started (each may re-plan after commit conflicts, counted "
            'in icemv_refreshes_total{outcome="conflict"}).',
            ["mv"],
            registry=r,
        )
        self.owned_mvs = Gauge(
            "icemv_owned_mvs",
            "MVs this replica owns: polls, schedules and commit events refresh them here.",
            registry=r,
        )
        self.worker_handbacks = Counter(
            "icemv_refresh_worker_handbacks",
            "Refreshes a worker process (refresh.processes) handed back to the daemon's "
            "process: it needs Spark (spark) or its worker died (lost).",
            ["reason"],
            registry=r,
        )
        self.forwarded = Counter(
            "icemv_refresh_requests_forwarded",
            "MVs whose refresh was requested from the replica owning them (one per MV).",
            registry=r,
        )
        self.inconsistent = Counter(
            "icemv_refresh_inconsistent",
            "Refreshes whose delta was found wrong (it deleted rows the storage table did not "
            "hold), by MV and delta rule; the rule is then quarantined for that MV.",
            ["mv", "rule"],
            registry=r,
        )
        self.http_refused = Counter(
            "icemv_http_requests_refused",
            "HTTP requests answered 503 at once because every handler thread was busy "
            "(probes are answered even then).",
            registry=r,
        )
        self.verify_runs = Counter(
            "icemv_verify_runs",
            "Verifications of an MV's storage table against its SQL, by result "
            "(clean|mismatch|error|skipped).",
            ["mv", "result"],
            registry=r,
        )
        self.verify_mismatches = Counter(
            "icemv_verify_mismatches",
            "Slices a verification found differing from the view's SQL (each repaired by a "
            "full refresh).",
            ["mv"],
            registry=r,
        )
        self.verify_last_clean = Gauge(
            "icemv_verify_last_clean_timestamp_seconds",
            "Unix time of the MV's last verification that found no difference.",
            ["mv"],
            registry=r,
        )
        self.up.set(1)
        self.build_info.labels(version or _package_version()).set(1)

    def record_refresh(
        self, result: RefreshResult, commit_latencies_seconds: Sequence[float] = ()
    ) -> None:
        """Count a finished refresh; `commit_latencies_seconds` are for the snapshots it absorbed.

        Attempts lost to a commit conflict before this one succeeded count as conflicts.
        """
        mv, mode = result.mv.dotted, result.mode
        outcome = "skipped" if mode == "skipped" else "success"
        self.refreshes.labels(mv, mode, outcome, result.reason).inc()
        if result.attempts > 1:
            conflict = StorageCommitConflictError.__name__
            self.refreshes.labels(mv, mode, "conflict", conflict).inc(result.attempts - 1)
        self.refresh_duration.labels(mv, mode).observe(result.duration_seconds)
        for phase, seconds in result.phase_seconds.items():
            self.refresh_phase.labels(mode, phase).observe(seconds)
        self.rows.labels(mv, "inserted").inc(result.rows_inserted)
        self.rows.labels(mv, "deleted").inc(result.rows_deleted)
        for latency in commit_latencies_seconds:
            self.commit_to_fresh.labels(mv).observe(max(0.0, latency))
        if result.incident is not None:
            self.inconsistent.labels(mv, result.incident).inc()

    def record_verify(
        self, mv: str, result: str, mismatched_slices: int = 0, at_seconds: float = 0.0
    ) -> None:
        """One verification run: `result` one of VERIFY_RESULTS."""
        self.verify_runs.labels(mv, result).inc()
        if mismatched_slices:
            self.verify_mismatches.labels(mv).inc(mismatched_slices)
        if result == "clean":
            self.verify_last_clean.labels(mv).set(at_seconds)

    def record_attempt(self, mv: str) -> None:
        self.attempts.labels(mv).inc()

    def set_owned_mvs(self, count: int) -> None:
        self.owned_mvs.set(count)

    def record_worker_handback(self, reason: str) -> None:
        self.worker_handbacks.labels(reason=reason).inc()

    def record_forwarded(self, mvs: int) -> None:
        self.forwarded.inc(mvs)

    def record_refresh_failure(self, mv: str, mode: str, error: BaseException) -> None:
        outcome = "conflict" if isinstance(error, CONFLICT_ERRORS) else "failure"
        code = getattr(error, "reason", None)  # errors with a reason code label by it
        reason = code if isinstance(code, str) else type(error).__name__
        self.refreshes.labels(mv, mode, outcome, reason).inc()

    def record_freshness(
        self, mv: str, freshness: Freshness, max_staleness_seconds: float | None
    ) -> None:
        self.staleness.labels(mv).set(freshness.staleness_seconds)
        for state in STATES:
            self.state.labels(mv, state).set(1 if state == freshness.state else 0)
        self.pending.labels(mv).set(freshness.pending_snapshots)
        # remove(mv), not remove_by_labels: that one scans every series, once per check
        if freshness.last_refresh is None:
            self.last_refresh.remove(mv)
        else:
            self.last_refresh.labels(mv).set(freshness.last_refresh.timestamp_ms / 1000)
        if max_staleness_seconds is None:
            self.max_staleness.remove(mv)
        else:
            self.max_staleness.labels(mv).set(max_staleness_seconds)

    def forget_freshness(self, mv: str) -> None:
        """Drop an MV's freshness series: another replica owns it now and publishes them."""
        for metric in (
            self.staleness,
            self.state,
            self.pending,
            self.last_refresh,
            self.max_staleness,
        ):
            metric.remove_by_labels({"mv": mv})

    def forget_mv(self, mv: str) -> None:
        """Drop a dropped MV's series, so it neither alerts nor lingers on dashboards."""
        self.forget_freshness(mv)
        for metric in (
            self.attempts,
            self.refresh_duration,
            self.refreshes,
            self.rows,
            self.commit_to_fresh,
            self.inconsistent,
            self.verify_runs,
            self.verify_mismatches,
            self.verify_last_clean,
        ):
            metric.remove_by_labels({"mv": mv})

    def record_event(self, format: str, outcome: str) -> None:
        # The format may come from a payload; an open set would be unbounded cardinality.
        self.events.labels(format if format in EVENT_FORMATS else "unknown", outcome).inc()

    def record_rejected_event(self, reason: str, dead_lettered: bool) -> None:
        """A record given up on: `reason` is a fixed code (BadEventError's, or handler-error)."""
        self.record_event("unknown", reason)
        if dead_lettered:
            self.dead_lettered.labels(reason).inc()

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        self.kafka_lag.labels(topic, str(partition)).set(lag)

    def set_ready(self, ready: bool) -> None:
        self.ready.set(1 if ready else 0)

    def set_kafka_connected(self, connected: bool) -> None:
        self.kafka_connected.set(1 if connected else 0)

    def record_http_refused(self) -> None:
        self.http_refused.inc()

    def record_poll_overrun(self) -> None:
        self.poll_overruns.inc()

    def record_catalog_loads(self, reads: CatalogReads) -> None:
        """Count the loads and reuses of one poll (or freshness check)."""
        self.catalog_loads.labels("table", "loaded").inc(reads.table_loads)
        self.catalog_loads.labels("table", "reused").inc(reads.table_reuses)
        self.catalog_loads.labels("view", "loaded").inc(reads.view_loads)
        self.catalog_loads.labels("view", "reused").inc(reads.view_reuses)

    def exposition(self) -> bytes:
        """The Prometheus text format (version 0.0.4) of this registry."""
        return generate_latest(self.registry)
