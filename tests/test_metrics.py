"""Metrics read back the way Prometheus would: by parsing the exposition text."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from icemv.errors import StorageCommitConflictError
from icemv.format.refresh_state import RefreshState, SourceState
from icemv.identifiers import Identifier
from icemv.mv.freshness import Freshness, SourceFreshness, State
from icemv.mv.history import RefreshRecord
from icemv.refresh.result import Mode, RefreshResult
from icemv.service.metrics import METRIC_NAMES, Metrics

MV = Identifier(("analytics",), "daily")
SOURCE = SourceState("table", ("raw",), "orders", snapshot_id=7)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(metrics: Metrics) -> Samples:
    text = metrics.exposition().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


def series(metrics: Metrics, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples(metrics).items() if n == name}


def result(
    mode: Mode = "incremental", reason: str = "source-changed", **kw: object
) -> RefreshResult:
    fields: dict[str, object] = {
        "mv": MV,
        "mode": mode,
        "reason": reason,
        "storage_snapshot_id": 42,
        "rows_inserted": 5,
        "rows_deleted": 2,
        "sources": (SOURCE,),
        "started_ms": 1_700_000_000_000,
        "duration_seconds": 0.7,
        **kw,
    }
    return RefreshResult(**fields)  # type: ignore[arg-type]


def freshness(state: State, staleness: float = 0.0, pending: int = 0) -> Freshness:
    record = RefreshRecord(
        snapshot_id=42,
        sequence_number=3,
        timestamp_ms=1_700_000_123_456,
        state=RefreshState(1, 1_700_000_000_000, (SOURCE,)),
        details={},
    )
    sources = (SourceFreshness(SOURCE, pending=pending),)
    return Freshness(state, None if state == "fresh" else "x", staleness, record, sources)


def test_process_gauges_start_up_not_ready() -> None:
    metrics = Metrics(version="1.2.3")
    assert value(metrics, "icemv_up") == 1
    assert value(metrics, "icemv_ready") == 0
    assert value(metrics, "icemv_kafka_connected") == 0
    assert series(metrics, "icemv_build_info") == {frozenset({("version", "1.2.3")}): 1}
    metrics.set_ready(True)
    metrics.set_kafka_connected(True)
    assert value(metrics, "icemv_ready") == 1
    assert value(metrics, "icemv_kafka_connected") == 1


def test_metric_names_match_the_exposition() -> None:
    text = Metrics().exposition().decode()
    # An unlabelled counter brings prometheus_client's own `<name>_created` gauge.
    exposed = [
        name
        for name in re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE)
        if not name.endswith("_created")
    ]
    assert sorted(exposed) == sorted(METRIC_NAMES)
    assert len(set(METRIC_NAMES)) == len(METRIC_NAMES)


def test_each_metrics_instance_is_independent() -> None:
    first, second = Metrics(), Metrics()
    first.record_refresh(result())
    assert (
        value(second, "icemv_refresh_rows_total", mv="analytics.daily", change="inserted") is None
    )


def test_record_refresh_counts_rows_outcome_and_duration() -> None:
    metrics = Metrics()
    metrics.record_refresh(result(), commit_latencies_seconds=(0.3, 4.0, 7200.0))
    mv = "analytics.daily"
    assert value(metrics, "icemv_refresh_rows_total", mv=mv, change="inserted") == 5
    assert value(metrics, "icemv_refresh_rows_total", mv=mv, change="deleted") == 2
    labels = {"mv": mv, "mode": "incremental", "outcome": "success", "reason": "source-changed"}
    assert value(metrics, "icemv_refreshes_total", **labels) == 1
    assert series(metrics, "icemv_refreshes_total") == {frozenset(labels.items()): 1}

    duration = {"mv": mv, "mode": "incremental"}
    assert value(metrics, "icemv_refresh_duration_seconds_count", **duration) == 1
    assert value(metrics, "icemv_refresh_duration_seconds_sum", **duration) == pytest.approx(0.7)
    assert value(metrics, "icemv_refresh_duration_seconds_bucket", le="0.5", **duration) == 0
    assert value(metrics, "icemv_refresh_duration_seconds_bucket", le="1.0", **duration) == 1

    assert value(metrics, "icemv_commit_to_fresh_seconds_count", mv=mv) == 3
    assert value(metrics, "icemv_commit_to_fresh_seconds_bucket", mv=mv, le="0.5") == 1
    assert value(metrics, "icemv_commit_to_fresh_seconds_bucket", mv=mv, le="3600.0") == 2
    assert value(metrics, "icemv_commit_to_fresh_seconds_bucket", mv=mv, le="+Inf") == 3

    metrics.record_refresh(result(rows_inserted=10, rows_deleted=0))
    assert value(metrics, "icemv_refresh_rows_total", mv=mv, change="inserted") == 15
    assert value(metrics, "icemv_refreshes_total", **labels) == 2


def test_refresh_phases_are_one_histogram_by_mode_and_phase() -> None:
    metrics = Metrics()
    phases = {"plan": 0.02, "changes": 0.01, "patch": 0.3, "commit": 0.2, "record": 0.004}
    metrics.record_refresh(result(phase_seconds=phases))
    metrics.record_refresh(result("full", "never-refreshed", phase_seconds={"commit": 2.0}))
    counts = series(metrics, "icemv_refresh_phase_seconds_count")
    assert counts == {
        **{frozenset({"mode": "incremental", "phase": p}.items()): 1 for p in phases},
        frozenset({"mode": "full", "phase": "commit"}.items()): 1,
    }  # no mv label: the series stay bounded however many MVs there are
    patch = {"mode": "incremental", "phase": "patch"}
    assert value(metrics, "icemv_refresh_phase_seconds_sum", **patch) == pytest.approx(0.3)
    assert value(metrics, "icemv_refresh_phase_seconds_bucket", le="0.25", **patch) == 0
    assert value(metrics, "icemv_refresh_phase_seconds_bucket", le="0.5", **patch) == 1


def test_histogram_buckets_span_the_documented_ranges() -> None:
    metrics = Metrics()
    metrics.record_refresh(result(), commit_latencies_seconds=(1.0,))
    refresh = {
        dict(labels)["le"] for labels in series(metrics, "icemv_refresh_duration_seconds_bucket")
    }
    commit = {
        dict(labels)["le"] for labels in series(metrics, "icemv_commit_to_fresh_seconds_bucket")
    }
    assert min(float(le) for le in refresh) == 0.1
    assert max(float(le) for le in refresh - {"+Inf"}) == 1800
    assert min(float(le) for le in commit) == 0.25
    assert max(float(le) for le in commit - {"+Inf"}) == 3600


def test_skipped_refresh_and_lost_commit_races() -> None:
    metrics = Metrics()
    metrics.record_refresh(result("skipped", "already-fresh", rows_inserted=0, rows_deleted=0))
    metrics.record_refresh(result("full", "never-refreshed", attempts=3))
    mv = "analytics.daily"
    skipped = {"mv": mv, "mode": "skipped", "outcome": "skipped", "reason": "already-fresh"}
    assert value(metrics, "icemv_refreshes_total", **skipped) == 1
    success = {"mv": mv, "mode": "full", "outcome": "success", "reason": "never-refreshed"}
    assert value(metrics, "icemv_refreshes_total", **success) == 1
    conflict = {"mv": mv, "mode": "full", "outcome": "conflict"}
    assert (
        value(metrics, "icemv_refreshes_total", reason="StorageCommitConflictError", **conflict)
        == 2
    )


def test_record_refresh_failure_labels_the_error_class() -> None:
    metrics = Metrics()
    metrics.record_refresh_failure("analytics.daily", "incremental", RuntimeError("boom"))
    metrics.record_refresh_failure("analytics.daily", "full", StorageCommitConflictError("lost"))
    base = {"mv": "analytics.daily"}
    assert (
        value(
            metrics,
            "icemv_refreshes_total",
            mode="incremental",
            outcome="failure",
            reason="RuntimeError",
            **base,
        )
        == 1
    )
    assert (
        value(
            metrics,
            "icemv_refreshes_total",
            mode="full",
            outcome="conflict",
            reason="StorageCommitConflictError",
            **base,
        )
        == 1
    )


def test_record_freshness_sets_exactly_one_state() -> None:
    metrics = Metrics()
    mv = "analytics.daily"
    metrics.record_freshness(mv, freshness("stale", staleness=12.5, pending=3), 300.0)
    states = {dict(labels)["state"]: v for labels, v in series(metrics, "icemv_mv_state").items()}
    assert states == {"fresh": 0, "stale": 1, "invalid": 0}
    assert value(metrics, "icemv_mv_staleness_seconds", mv=mv) == 12.5
    assert value(metrics, "icemv_mv_pending_snapshots", mv=mv) == 3
    assert value(metrics, "icemv_mv_last_refresh_timestamp_seconds", mv=mv) == 1_700_000_123.456
    assert value(metrics, "icemv_mv_max_staleness_seconds", mv=mv) == 300

    metrics.record_freshness(mv, freshness("fresh"), None)
    states = {dict(labels)["state"]: v for labels, v in series(metrics, "icemv_mv_state").items()}
    assert states == {"fresh": 1, "stale": 0, "invalid": 0}
    assert value(metrics, "icemv_mv_staleness_seconds", mv=mv) == 0
    assert value(metrics, "icemv_mv_max_staleness_seconds", mv=mv) is None


def test_never_refreshed_mv_has_no_last_refresh_series() -> None:
    metrics = Metrics()
    metrics.record_freshness("a.b", freshness("fresh"), None)
    never = Freshness("invalid", "never-refreshed", 60.0, None, ())
    metrics.record_freshness("a.b", never, None)
    assert value(metrics, "icemv_mv_last_refresh_timestamp_seconds", mv="a.b") is None
    assert value(metrics, "icemv_mv_state", mv="a.b", state="invalid") == 1


def test_forget_mv_removes_only_its_series() -> None:
    metrics = Metrics()
    metrics.record_refresh(result(), commit_latencies_seconds=(1.0,))
    metrics.record_refresh_failure("analytics.daily", "full", ValueError())
    metrics.record_freshness("analytics.daily", freshness("stale", 5.0, 1), 60.0)
    metrics.record_freshness("analytics.other", freshness("fresh"), 60.0)

    metrics.forget_mv("analytics.daily")
    left = {dict(labels).get("mv") for (_, labels) in samples(metrics)}
    assert "analytics.daily" not in left
    assert "analytics.other" in left
    assert value(metrics, "icemv_mv_state", mv="analytics.other", state="fresh") == 1


def test_events_and_kafka_lag() -> None:
    metrics = Metrics()
    metrics.record_event("lakekeeper", "routed")
    metrics.record_event("lakekeeper", "routed")
    metrics.record_event("icemv", "duplicate")
    metrics.record_event("made-up-by-a-payload", "not-json")
    assert value(metrics, "icemv_events_total", format="lakekeeper", outcome="routed") == 2
    assert value(metrics, "icemv_events_total", format="icemv", outcome="duplicate") == 1
    assert value(metrics, "icemv_events_total", format="unknown", outcome="not-json") == 1
    assert len(series(metrics, "icemv_events_total")) == 3

    metrics.set_lag("iceberg-events", 0, 17)
    metrics.set_lag("iceberg-events", 1, 0)
    metrics.set_lag("iceberg-events", 0, 4)
    lag = "icemv_kafka_consumer_lag"
    assert value(metrics, lag, topic="iceberg-events", partition="0") == 4
    assert value(metrics, lag, topic="iceberg-events", partition="1") == 0
