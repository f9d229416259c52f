"""Helpers of the embedded engine's tests: a refreshed MV, and a refresh checked
against the oracle and the engine that computed it."""

from __future__ import annotations

from typing import Any

from icemv.format.summary import SummaryKey
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips


def refreshed_mv(
    lakehouse: Lakehouse,
    namespace: str,
    name: str,
    sql: str,
    policy: str = "incremental-strict",
) -> Identifier:
    """A new MV with refresh policy `policy`, fully refreshed once."""
    mv = Identifier((namespace,), name)
    create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": policy})
    assert refresh_mv(lakehouse, mv).mode == "full"
    return mv


def refresh_by(lakehouse: Lakehouse, mv: Identifier, engine: str) -> RefreshResult:
    """Refresh incrementally, by `engine` (result and commit summary), matching the oracle."""
    result = refresh_mv(lakehouse, mv)
    assert result.mode == "incremental", result
    assert result.engine == engine, result
    assert_matches_oracle(lakehouse, mv)
    storage = lakehouse.load_table(load_materialized_view(lakehouse, mv).storage)
    record = latest_refresh(storage)
    assert record is not None
    snapshot = storage.snapshot_by_id(record.snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.additional_properties[SummaryKey.ENGINE] == engine
    return result


def appends_embedded(
    lakehouse: Lakehouse, namespace: str, mv: Identifier, appends: list[list[tuple[Any, ...]]]
) -> None:
    """Each append to trips, then a refresh of `mv` by the embedded engine."""
    for rows in appends:
        append_trips(lakehouse, namespace, rows)
        result = refresh_by(lakehouse, mv, "duckdb")
        assert result.engine_reason is None
        assert result.source_rows_read == len(rows)
        assert set(result.phase_seconds) == {"plan", "changes", "patch", "commit", "record"}
