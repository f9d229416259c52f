"""`icemv demo`: the quickstart on the embedded default, end to end in one command."""

from __future__ import annotations

from daemon.config import Config
from daemon.demo_data import PICKUP_AGG, PICKUP_AGG_SQL, append_taxis, ensure_taxis
from daemon.freshness import assess_freshness
from daemon.lakehouse import Lakehouse
from daemon.materialized_view import load_materialized_view
from daemon.mv_lifecycle import create_mv
from daemon.mv_report import mv_report, render_report
from daemon.refresh import refresh_mv


def run_demo(config: Config) -> int:
    lakehouse = Lakehouse(config)
    taxis = ensure_taxis(lakehouse)
    batch = len(taxis.snapshots())
    if batch == 0:
        append_taxis(lakehouse, rows=5_000, seed=1)
        batch = 1
        print("wrote 5000 rows to nyc.taxis")
    if not lakehouse.views.exists(PICKUP_AGG):
        create_mv(lakehouse, PICKUP_AGG, PICKUP_AGG_SQL, partition_by=["pickup_date"])
        print(f"created materialized view {PICKUP_AGG}")
    _refresh(lakehouse)
    append_taxis(lakehouse, rows=500, seed=batch + 1)
    mv = load_materialized_view(lakehouse, PICKUP_AGG)
    freshness = assess_freshness(lakehouse, mv)
    print(
        f"another writer appended 500 rows: {PICKUP_AGG} is {freshness.state} "
        f"({freshness.pending_snapshots} pending snapshot, "
        f"{freshness.staleness_seconds:.1f} s stale)"
    )
    _refresh(lakehouse)
    print()
    print(render_report(mv_report(lakehouse, load_materialized_view(lakehouse, PICKUP_AGG))))
    view = lakehouse.spark.table(lakehouse.quoted(PICKUP_AGG))
    rows = view.orderBy("pickup_date", "vendor_id").limit(5).collect()
    print("\nfirst rows of the view, read by Spark:")
    for row in rows:
        print("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()))
    return 0


def _refresh(lakehouse: Lakehouse) -> None:
    result = refresh_mv(lakehouse, PICKUP_AGG)
    print(
        f"refresh {PICKUP_AGG}: {result.mode} ({result.reason}), {result.duration_seconds:.2f} s, "
        f"storage snapshot {result.storage_snapshot_id}"
    )
