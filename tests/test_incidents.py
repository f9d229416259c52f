"""A wrong delta found while refreshing is an incident: counted, logged at error level with
the rule and the snapshots, its rule quarantined for the MV (full refreshes, visible in
`mv explain` and `status`) until the definition changes or an operator clears it.

The wrong delta is provoked the way a real one shows: the storage table lacks a row the
delta deletes (here because another writer deleted it from the storage table).
"""

from __future__ import annotations

import argparse

import pytest
from structlog.testing import capture_logs

from icemv.cli.commands import cmd_mv_clear
from icemv.config import Config
from icemv.errors import RefreshFailedError
from icemv.format.quarantine import QUARANTINE_PROPERTY, quarantine_of
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.explain import explain
from icemv.mv.lifecycle import create_mv, replace_mv
from icemv.mv.model import load_materialized_view
from icemv.mv.report import status_rows
from icemv.refresh.policy import refresh_mv
from icemv.service.metrics import Metrics
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROWS = [(i, "ab"[i % 2], float(i), None) for i in range(1, 11)]
SQL = "SELECT id, vendor, fare FROM trips WHERE fare > 2"


def _wrong_delta(lakehouse: Lakehouse, namespace: str, mv: Identifier, row: int) -> None:
    """Another writer removes a row from the storage table; the source then deletes it."""
    spark = lakehouse.spark
    spark.sql(f"DELETE FROM `lake`.`{namespace}`.`{mv.name}__storage` WHERE id = {row}")
    spark.sql(f"DELETE FROM `lake`.`{namespace}`.`trips` WHERE id = {row}")


def test_a_wrong_delta_quarantines_its_rule_until_cleared(
    lakehouse: Lakehouse, namespace: str, test_config: Config
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = Identifier((namespace,), "paid")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, mv)
    _wrong_delta(lakehouse, namespace, mv, 7)

    with capture_logs() as logs:
        result = refresh_mv(lakehouse, mv)
    assert (result.mode, result.reason, result.incident) == (
        "full",
        "storage-inconsistent",
        "row-deltas",
    )
    assert_matches_oracle(lakehouse, mv)  # repaired by the full refresh
    incident = next(e for e in logs if e["event"] == "refresh_inconsistent")
    assert incident["log_level"] == "error" and incident["rule"] == "row-deltas"
    source = f"{namespace}.trips"
    assert incident["current_snapshots"][source] != incident["recorded_snapshots"][source]
    metrics = Metrics()
    metrics.record_refresh(result)
    exposition = metrics.exposition().decode()
    assert (
        f'icemv_refresh_inconsistent_total{{mv="{mv.dotted}",rule="row-deltas"}} 1.0' in exposition
    )
    storage = lakehouse.load_table(Identifier((namespace,), "paid__storage"))
    quarantine = quarantine_of(storage.properties)
    assert quarantine is not None and quarantine.rule == "row-deltas"
    assert quarantine.snapshots[source] == incident["current_snapshots"][source]

    # Quarantined: the rule's next refreshes recompute, and say why; strict ones fail.
    append_trips(lakehouse, namespace, [(20, "a", 5.0, None)])
    again = refresh_mv(lakehouse, mv)
    assert (again.mode, again.reason, again.incident) == ("full", "rule-quarantined", None)
    report = explain(lakehouse, load_materialized_view(lakehouse, mv))
    assert report["quarantined"]["rule"] == "row-deltas"
    (row,) = [r for r in status_rows(lakehouse, [load_materialized_view(lakehouse, mv)])]
    assert row["quarantined-rule"] == "row-deltas"

    # An operator clears it: incremental refreshes resume.
    cmd_mv_clear(test_config, argparse.Namespace(name=mv.dotted))
    assert QUARANTINE_PROPERTY not in lakehouse.load_table(storage_id(mv)).properties
    append_trips(lakehouse, namespace, [(21, "b", 6.0, None)])
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)


def storage_id(mv: Identifier) -> Identifier:
    return Identifier(mv.namespace, f"{mv.name}__storage")


def test_a_new_definition_is_not_quarantined_and_strict_refreshes_fail(
    lakehouse: Lakehouse, namespace: str
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = Identifier((namespace,), "paid")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental-strict"})
    refresh_mv(lakehouse, mv)
    _wrong_delta(lakehouse, namespace, mv, 5)
    with pytest.raises(RefreshFailedError, match="storage-inconsistent"):
        refresh_mv(lakehouse, mv)
    # The incident was recorded before the strict refusal.
    assert quarantine_of(lakehouse.load_table(storage_id(mv)).properties) is not None
    with pytest.raises(RefreshFailedError, match="rule-quarantined"):
        refresh_mv(lakehouse, mv)

    replace_mv(lakehouse, mv, SQL + " AND id > 0", {"icemv.refresh-policy": "incremental"})
    assert refresh_mv(lakehouse, mv).reason == "definition-changed"
    append_trips(lakehouse, namespace, [(30, "a", 9.0, None)])
    assert refresh_mv(lakehouse, mv).mode == "incremental"
    assert_matches_oracle(lakehouse, mv)
