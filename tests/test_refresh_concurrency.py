"""Refreshes of different MVs overlap: the daemon's scheduler, real Spark, the JDBC catalog.

With `refresh.max_concurrent: 2` and two stale MVs, both refreshes run at once: their
Spark-heavy `patch` phases overlap in time (from the phase spans each result records), and
each worker thread's Spark jobs ran in a FAIR pool of its own.
"""

from __future__ import annotations

import time
from concurrent.futures import wait

from icemv.config import RefreshConfig
from icemv.engine.spark import scheduler_pools
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.lifecycle import create_mv
from icemv.refresh.phases import PhaseClock
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import Mode
from icemv.service.daemon import Daemon

TIMEOUT = 300.0


def test_two_refreshes_run_side_by_side_in_pools_of_their_own(
    lakehouse: Lakehouse, namespace: str
) -> None:
    spark = lakehouse.spark
    assert spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"
    base = lakehouse.quoted(Identifier((namespace,), "base"))
    rows = "id, CAST(id % 7 AS INT) AS k, CAST(id % 13 AS DOUBLE) AS v"
    spark.range(20_000).selectExpr(*rows.split(", ")).writeTo(base).create()
    mvs = [Identifier((namespace,), f"mv{n}") for n in range(2)]
    for n, mv in enumerate(mvs):
        sql = f"SELECT k, count(*) AS n, sum(v) AS s FROM base WHERE id % 2 = {n} GROUP BY k"
        create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
        refresh_mv(lakehouse, mv)
    spark.range(20_000, 21_000).selectExpr(*rows.split(", ")).writeTo(base).append()

    # Spark computes the deltas (a 1,000-row append would otherwise take the embedded engine,
    # no Spark job): this is about Spark jobs of two refreshes sharing the executors.
    config = lakehouse.config.model_copy(
        update={"refresh": RefreshConfig(coalesce_seconds=0, max_concurrent=2, embedded_max_rows=0)}
    )
    daemon = Daemon(config, lakehouse=Lakehouse(config))
    daemon.scheduler.start()
    try:
        futures = [daemon.request(mv, "test") for mv in mvs]
        done, _ = wait(futures, TIMEOUT)
    finally:
        daemon.scheduler.stop()
    assert len(done) == 2
    first, second = (future.result() for future in futures)
    assert {first.mode, second.mode} == {Mode.INCREMENTAL}
    # The patch phase is where Spark reads the change rows and computes the delta.
    (start_a, end_a), (start_b, end_b) = first.phase_spans["patch"], second.phase_spans["patch"]
    assert max(start_a, start_b) < min(end_a, end_b), (first.phase_spans, second.phase_spans)
    # One FAIR pool per worker thread (ThreadPoolExecutor names them prefix_0, prefix_1).
    assert {"icemv-refresh_0", "icemv-refresh_1"} <= set(scheduler_pools(spark))


def test_phase_spans_place_each_phase_in_time() -> None:
    clock = PhaseClock()
    for phase in ("plan", "changes", "patch", "changes"):
        clock.end(phase)
    spans = clock.spans
    assert spans["plan"][1] == spans["changes"][0]  # each phase starts where the last ended
    assert spans["changes"][0] <= spans["patch"][0] <= spans["patch"][1] <= spans["changes"][1]
    assert abs(spans["plan"][0] - time.time()) < 60  # epoch seconds, not perf_counter's


def test_a_pool_made_on_first_use_is_not_a_warning(lakehouse: Lakehouse) -> None:
    """Spark warns once per pool that no allocation file declares it, which is how every
    refresh thread's pool is made: the driver's log4j configuration keeps that quiet, and
    only that (the root logger still passes warnings)."""
    jvm = lakehouse.spark.sparkContext._jvm  # noqa: SLF001 (py4j: the JVM's log4j)
    assert jvm is not None
    manager = jvm.org.apache.logging.log4j.LogManager
    pools = manager.getLogger("org.apache.spark.scheduler.FairSchedulableBuilder")
    assert str(pools.getLevel()) == "ERROR"
    assert str(manager.getLogger("org.apache.spark.scheduler.DAGScheduler").getLevel()) == "WARN"
