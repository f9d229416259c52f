"""Refreshes on a Spark standalone cluster (`spark.master: spark://...`), not local[*].

Slow on a small machine, so one incremental oracle case and one daemon refresh: both reuse
the existing tests' bodies with a Lakehouse whose SparkSession runs on the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from icemv.config import Config
from icemv.engine.spark import stop_spark
from icemv.lakehouse import Lakehouse
from tests.support.spark_cluster import SparkCluster
from tests.test_daemon import test_poll_only_mode_and_manual_refresh as daemon_refresh_case
from tests.test_incremental_refresh import (
    test_each_operation_is_applied_incrementally as incremental_case,
)

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    running = SparkCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    yield running
    running.stop()


@pytest.fixture
def cluster_lakehouse(
    cluster: SparkCluster, test_config: Config, lakehouse: Lakehouse
) -> Iterator[Lakehouse]:
    """The test catalog and warehouse, with this process's SparkSession on the cluster."""
    stop_spark()  # the one session of the process: restarted below against the cluster
    spark = test_config.spark.model_copy(
        update={
            "master": cluster.master_url,
            "conf": {**test_config.spark.conf, "spark.executor.memory": "512m"},
        }
    )
    on_cluster = Lakehouse(test_config.model_copy(update={"spark": spark}))
    session = on_cluster.spark
    assert session.sparkContext.master == cluster.master_url
    _wait_for_executor(session, deadline=time.monotonic() + 120)
    yield on_cluster
    stop_spark()  # later tests get a local session again


def _wait_for_executor(session: object, deadline: float) -> None:
    # getExecutorMemoryStatus lists the driver too: more than one entry is an executor.
    context = session.sparkContext._jsc.sc()  # type: ignore[attr-defined]  # noqa: SLF001
    while context.getExecutorMemoryStatus().size() < 2:
        assert time.monotonic() < deadline, "no executor registered with the driver"
        time.sleep(0.5)


def test_incremental_refresh_on_a_cluster(cluster_lakehouse: Lakehouse, namespace: str) -> None:
    incremental_case(cluster_lakehouse, namespace, "count-sum", "merge-on-read", "spark")


def test_daemon_refresh_on_a_cluster(cluster_lakehouse: Lakehouse, namespace: str) -> None:
    daemon_refresh_case(cluster_lakehouse, namespace, cluster_lakehouse.config)
