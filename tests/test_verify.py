"""`icemv mv verify` and the daemon's scheduled audit, on MVs whose storage tables were
corrupted on purpose (a row deleted, a row added, a value changed): found, counted,
repaired; and a clean MV (floating-point sums merged incrementally included) found clean.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from icemv.config import Config
from icemv.format.summary import RefreshReason, SummaryKey
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import create_mv
from icemv.mv.verify import verify_mv
from icemv.refresh.policy import refresh_mv
from tests.support.daemon import RunningDaemon, daemon_config, metric, wait_for
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROWS = [(i, "ab"[i % 2], i * 1.1, None) for i in range(1, 41)]
AGG = "SELECT vendor, count(*) AS n, sum(fare) AS s, avg(fare) AS a FROM trips GROUP BY vendor"
FILTER = "SELECT id, vendor, fare FROM trips WHERE fare > 3"


def _mv(lakehouse: Lakehouse, namespace: str, name: str, sql: str) -> Identifier:
    identifier = Identifier((namespace,), name)
    create_mv(lakehouse, identifier, sql, properties={"icemv.refresh-policy": "incremental"})
    refresh_mv(lakehouse, identifier)
    return identifier


def _storage(mv: Identifier) -> str:
    return f"`lake`.`{mv.namespace[0]}`.`{mv.name}__storage`"


def test_a_clean_mv_verifies_clean_and_corruption_is_found(
    lakehouse: Lakehouse, namespace: str
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    agg = _mv(lakehouse, namespace, "agg", AGG)
    rows = _mv(lakehouse, namespace, "rows", FILTER)
    # Incremental merges: floating-point sums now differ from a full evaluation's last bits.
    for start in (100, 200):
        append_trips(lakehouse, namespace, [(start + i, "a", 0.1 * i, None) for i in range(7)])
        assert refresh_mv(lakehouse, agg).mode == "incremental"
        assert refresh_mv(lakehouse, rows).mode == "incremental"
    for mv in (agg, rows):
        report = verify_mv(lakehouse, mv, slices=8)
        assert report.clean, report
        assert report.storage_rows == report.view_rows > 0
        assert report.checked == tuple(range(8))

    spark = lakehouse.spark
    spark.sql(f"DELETE FROM {_storage(rows)} WHERE id = 7")
    spark.sql(f"INSERT INTO {_storage(rows)} VALUES (999, 'z', 1.5)")
    report = verify_mv(lakehouse, rows, slices=8)
    assert not report.clean
    assert (report.only_in_storage, report.only_in_view) == (1, 1)
    assert report.samples_storage == ((999, "z", 1.5),)
    assert report.samples_view == ((7, "b", pytest.approx(7.7)),)
    assert 1 <= len(report.differing_slices) <= 2
    # A sample of the slices checks only those.
    sampled = verify_mv(lakehouse, rows, slices=8, sample=0.25, seed=3)
    assert len(sampled.checked) == 2 and sampled.storage_rows < report.storage_rows

    spark.sql(f"UPDATE {_storage(agg)} SET n = n + 1 WHERE vendor = 'a'")
    report = verify_mv(lakehouse, agg, slices=8)
    assert not report.clean and (report.only_in_storage, report.only_in_view) == (1, 1)
    assert report.samples_storage[0][0] == report.samples_view[0][0] == "a"

    repaired = refresh_mv(lakehouse, agg, repair=report.summary())
    assert (repaired.mode, repaired.reason) == ("full", RefreshReason.VERIFY_MISMATCH)
    record = latest_refresh(lakehouse.load_table(Identifier((namespace,), "agg__storage")))
    assert record is not None and record.details[SummaryKey.VERIFY_DIFF] == report.summary()
    assert verify_mv(lakehouse, agg, slices=8).clean
    assert_matches_oracle(lakehouse, agg)


def test_the_cli_exits_1_on_a_difference_and_repairs_it(
    lakehouse: Lakehouse, namespace: str, test_config: Config, tmp_path: Path
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace, "rows", FILTER)
    lakehouse.spark.sql(f"DELETE FROM {_storage(mv)} WHERE id < 10")
    raw = test_config.model_dump(mode="json", exclude={"materialized_views"})
    raw["catalog"]["password"] = None
    config = tmp_path / "icemv.yaml"
    config.write_text(yaml.safe_dump(raw))
    icemv = [str(Path(sys.executable).parent / "icemv"), "--config", str(config)]
    env = {**os.environ, "ICEMV_LOGGING__LEVEL": "WARNING"}

    def verify(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*icemv, "mv", "verify", mv.dotted, "--slices", "4", *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )

    found = verify("--format", "json")
    assert found.returncode == 1, found.stderr
    assert '"only-in-view": 7' in found.stdout and '"clean": false' in found.stdout
    repaired = verify("--repair")
    assert repaired.returncode == 1 and "repaired by a full refresh" in repaired.stdout
    clean = verify()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "consistent: 4 of 4 slices, 38 rows" in clean.stdout
    bad = subprocess.run(
        [*icemv, "mv", "verify", mv.dotted, "--sample", "2"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "must be within (0, 1]" in bad.stderr


def test_the_daemon_audit_counts_logs_and_repairs_a_difference(
    lakehouse: Lakehouse, namespace: str, test_config: Config
) -> None:
    create_trips(lakehouse, namespace, rows=ROWS)
    mv = _mv(lakehouse, namespace, "agg", AGG)
    lakehouse.spark.sql(f"DELETE FROM {_storage(mv)} WHERE vendor = 'b'")
    config = daemon_config(
        test_config,
        polling={"interval_seconds": 600},
        maintenance={"verify_interval_seconds": 0.5, "verify_slices": 4},
    )
    with RunningDaemon(config) as daemon:
        port = daemon.http_port
        assert port is not None
        # The schedule runs (it verifies every MV of the catalog, in turn) ...
        wait_for(lambda: metric(port, "icemv_verify_runs_total", {}) > 0, 60, "a verify run")
        # ... and a pass over this MV finds, counts and repairs it.
        assert daemon.reconciler.verify([mv]) == 1
        labels = {"mv": mv.dotted}
        assert metric(port, "icemv_verify_mismatches_total", labels) >= 1
        assert metric(port, "icemv_verify_runs_total", {**labels, "result": "mismatch"}) >= 1

        def repaired() -> bool:
            record = latest_refresh(lakehouse.load_table(Identifier((namespace,), "agg__storage")))
            return record is not None and record.details.get(SummaryKey.REASON) == (
                RefreshReason.VERIFY_MISMATCH
            )

        wait_for(repaired, 120, "the repair")
        assert daemon.reconciler.verify([mv]) == 0
        assert metric(port, "icemv_verify_runs_total", {**labels, "result": "clean"}) >= 1
        assert metric(port, "icemv_verify_last_clean_timestamp_seconds", labels) > 0
    assert_matches_oracle(lakehouse, mv)
