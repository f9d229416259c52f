"""Refresh worker processes (service/refresh_workers.py) against a real catalog and Spark:
what the embedded engine computes runs in a worker and matches the oracle, what needs Spark
comes back, a dead worker costs one refresh its worker (it runs in this process) and the
pool is replaced, and an error crosses the process boundary as an error."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import shutil
import signal
import sys
from collections.abc import Hashable, Mapping

import pyarrow as pa
import pytest

from icemv.config import Config
from icemv.engine.semantics import SessionSemantics
from icemv.errors import RefreshFailedError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.lifecycle import create_mv
from icemv.refresh import rehearsal
from icemv.refresh.embedded.prepared import PreparedStatements
from icemv.refresh.policy import refresh_mv
from icemv.refresh.rehearsal import rehearse_mv
from icemv.service.refresh_workers import RefreshWorkers, _portable, choose_worker
from tests.support.daemon import max_overlap
from tests.support.oracle import assert_matches_oracle
from tests.support.tables import append_trips, create_trips
from tests.test_fleet_oracle import fleet_rounds

D1 = dt.date(2024, 1, 1)
SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s, avg(fare) AS mean FROM trips GROUP BY vendor"


@pytest.mark.spark
@pytest.mark.postgres
def test_a_worker_refreshes_on_the_embedded_engine_and_hands_back_what_needs_spark(
    lakehouse: Lakehouse, namespace: str, test_config: Config
) -> None:
    create_trips(lakehouse, namespace, rows=[(1, "a", 10.0, D1), (2, "b", 5.0, D1)])
    mv = Identifier((namespace,), "by_vendor")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    handbacks: list[str] = []
    workers = RefreshWorkers(
        test_config, 1, handbacks.append, semantics=lambda: lakehouse.semantics
    )
    try:
        assert workers.refresh(mv) is None  # the first refresh is a full one: Spark's
        assert handbacks == ["spark"]
        assert refresh_mv(lakehouse, mv).mode == "full"

        append_trips(lakehouse, namespace, [(3, "a", 2.5, D1), (4, "c", 1.0, D1)])
        first = workers.refresh(mv)
        assert first is not None
        assert (first.mode, first.engine) == ("incremental", "duckdb")
        assert first.worker_pid is not None and first.worker_pid != os.getpid()
        assert_matches_oracle(lakehouse, mv)
        # The worker's record of its commit and its latencies crossed the boundary: the
        # daemon publishes them without loading the storage table again.
        storage = lakehouse.load_table(Identifier((namespace,), "by_vendor__storage"))
        assert first.record is not None and first.record == latest_refresh(storage)
        assert first.record.snapshot_id == first.storage_snapshot_id
        assert len(first.commit_to_fresh_seconds) == 1  # the one append it absorbed

        # A worker that dies: its refresh comes back to be run here, the pool is replaced.
        os.kill(first.worker_pid, signal.SIGKILL)
        append_trips(lakehouse, namespace, [(5, "b", 4.0, D1)])
        assert workers.refresh(mv) is None
        assert workers.lost == 1
        assert handbacks == ["spark", "lost"]
        again = workers.refresh(mv)
        assert again is not None and again.engine == "duckdb"
        assert again.worker_pid not in (None, os.getpid(), first.worker_pid)
        assert_matches_oracle(lakehouse, mv)
    finally:
        workers.close()

    # Workers of a daemon whose Spark session is in ANSI mode leave every delta to it.
    ansi = RefreshWorkers(
        test_config, 1, handbacks.append, semantics=lambda: SessionSemantics(True, "UTC")
    )
    try:
        append_trips(lakehouse, namespace, [(6, "c", 3.0, D1)])
        assert ansi.refresh(mv) is None
        assert handbacks[-1] == "spark"
    finally:
        ansi.close()


@pytest.mark.spark
@pytest.mark.postgres
@pytest.mark.parametrize("catalog_kind", ["rest"], indirect=True, scope="session")
def test_a_fleet_refreshed_by_worker_processes_matches_its_sql(
    lakehouse: Lakehouse, namespace: str, test_config: Config
) -> None:
    """The same rounds with `refresh.processes: 2`: the embedded engine's refreshes run in
    worker processes, what needs Spark (the first refreshes, which are full) is handed back
    to the daemon's process. On REST (the worker opens its own REST
    client); the test above covers JDBC."""
    results = fleet_rounds(lakehouse, namespace, test_config, processes=2)
    in_workers = [r for r in results if r.worker_pid is not None]
    assert {r.engine for r in in_workers} == {"duckdb"}, in_workers
    assert {r.worker_pid for r in in_workers} - {os.getpid()} == {r.worker_pid for r in in_workers}
    assert len(in_workers) >= 7  # every refresh on DuckDB but the nested MV's first one
    assert {r.engine for r in results if r.worker_pid is None} <= {"spark", None}
    # Each worker has a refresh queued beyond `max_concurrent` (2), but at most 2 run in
    # the workers and at most 2 in this process (the first round hands all back at once).
    in_process = [r for r in results if r.worker_pid is None]
    assert len(in_process) >= 3  # more than can run at once
    assert max_overlap(in_workers) <= 2
    assert max_overlap(in_process) <= 2


@pytest.mark.postgres
def test_workers_that_cannot_start_are_turned_off_not_respawned_per_refresh(
    test_config: Config,
) -> None:
    """A worker that dies before finishing any refresh (here: an interpreter that exits at
    once) turns the workers off: every later refresh runs in the daemon's process."""
    spawn = multiprocessing.get_context("spawn")
    exits_at_once = shutil.which("false")
    assert exits_at_once is not None
    workers = RefreshWorkers(test_config, 1, semantics=lambda: SessionSemantics(False, "UTC"))
    spawn.set_executable(exits_at_once)
    try:
        mv = Identifier(("nowhere",), "mv")
        assert workers.refresh(mv) is None
        assert workers.disabled and workers.lost == 1
        assert workers.refresh(mv) is None
        assert workers.lost == 1  # no new pool was started
    finally:
        spawn.set_executable(sys.executable)
        workers.close()


class _TwoArguments(Exception):
    def __init__(self, left: str, right: str) -> None:
        super().__init__(f"{left} and {right}")


def test_an_error_that_cannot_cross_the_process_boundary_becomes_a_refresh_failure() -> None:
    kept = RefreshFailedError("mv: storage commit conflicted 4 times")
    assert _portable(kept) is kept
    wrapped = _portable(_TwoArguments("this", "that"))
    assert isinstance(wrapped, RefreshFailedError)
    assert str(wrapped) == "_TwoArguments: this and that"


def test_an_mv_goes_to_its_home_worker_unless_another_would_idle_or_is_far_less_busy() -> None:
    a = Identifier(("n",), "a")
    home = choose_worker(a, [0, 0])
    other = 1 - home

    def handed(at_home: int, elsewhere: int) -> list[int]:
        counts = [0, 0]
        counts[home], counts[other] = at_home, elsewhere
        return counts

    assert choose_worker(a, [0, 0]) == home  # the same worker every time
    assert choose_worker(a, handed(1, 0)) == home  # one running: its next queued at home
    assert choose_worker(a, handed(2, 0)) == other  # running + queued at home, the other idle
    assert choose_worker(a, handed(2, 1)) == home  # both busy: home
    assert choose_worker(a, handed(3, 2)) == home
    assert choose_worker(a, handed(3, 1)) == other  # two more at home than there
    assert choose_worker(a, [2, 2]) == home  # both as busy: home
    assert choose_worker(a, handed(0, 3)) == home
    spread = [0, 0]
    for i in range(100):
        spread[choose_worker(Identifier(("n",), f"mv{i}"), [0, 0])] += 1
    assert min(spread) >= 30, spread  # the hash spreads a fleet over both


@pytest.mark.spark
@pytest.mark.postgres
def test_a_join_rehearses_an_append_to_its_largest_source(
    lakehouse: Lakehouse, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither source stepped back to (no parent snapshots): the made-up append is the
    fact table's, the largest, not the dimension's made after it, so the first refresh
    after a fact append runs the statements the rehearsal prepared."""
    create_trips(lakehouse, namespace, rows=[(i, "ab"[i % 2], 1.0 + i, D1) for i in range(20)])
    create_trips(lakehouse, namespace, name="vendors", rows=[(1, "a", 0.0, D1), (2, "b", 0.0, D1)])
    mv = Identifier((namespace,), "by_vendor_joined")
    sql = ("SELECT v.id AS vendor_id, sum(t.fare) AS s FROM trips t "
           "JOIN vendors v ON t.vendor = v.vendor GROUP BY v.id")  # fmt: skip
    create_mv(lakehouse, mv, sql, properties={"icemv.refresh-policy": "incremental"})
    assert refresh_mv(lakehouse, mv).mode == "full"
    statements = _prepared_statements(monkeypatch)
    assert rehearse_mv(lakehouse, mv) == "sampled"
    rehearsed = set(statements)
    assert rehearsed
    append_trips(lakehouse, namespace, [(30, "a", 2.5, D1), (31, "b", 1.0, D1)])
    first = refresh_mv(lakehouse, mv)
    assert (first.mode, first.engine) == ("incremental", "duckdb"), first.engine_reason
    assert set(statements) == rehearsed  # nothing prepared anew
    assert_matches_oracle(lakehouse, mv)


def _prepared_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every statement the embedded executor prepares from now on (one it has
    prepared on the connection before is run as it is: refresh/embedded/prepared.py)."""
    prepared: list[str] = []
    real = PreparedStatements._prepare  # noqa: SLF001 (where a connection prepares one)

    def preparing(
        self: PreparedStatements, key: Hashable, sql: str, named: Mapping[str, pa.Table]
    ) -> object:
        prepared.append(sql)
        return real(self, key, sql, named)

    monkeypatch.setattr(PreparedStatements, "_prepare", preparing)
    return prepared


@pytest.mark.spark
@pytest.mark.postgres
def test_a_rehearsal_warms_a_worker_and_commits_nothing(
    lakehouse: Lakehouse, namespace: str, test_config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh MV's last change rehearsed in its home worker: computed on the embedded
    engine and thrown away (the storage does not move); the refreshes after it stay
    exact."""
    create_trips(lakehouse, namespace, rows=[(1, "a", 10.0, D1), (2, "b", 5.0, D1)])
    mv = Identifier((namespace,), "by_vendor")
    create_mv(lakehouse, mv, SQL, properties={"icemv.refresh-policy": "incremental"})
    storage = Identifier((namespace,), "by_vendor__storage")
    assert rehearse_mv(lakehouse, mv) == "not fresh"  # never refreshed
    assert refresh_mv(lakehouse, mv).mode == "full"
    # The table's first snapshot has no parent: an append of rows it holds, made up.
    before = lakehouse.load_table(storage).metadata.current_snapshot_id
    statements = _prepared_statements(monkeypatch)
    assert rehearse_mv(lakehouse, mv) == "sampled"
    assert lakehouse.load_table(storage).metadata.current_snapshot_id == before
    rehearsed = set(statements)
    assert rehearsed  # the delta and merge statements ran on DuckDB
    append_trips(lakehouse, namespace, [(3, "a", 2.5, D1), (4, "c", 1.0, D1)])
    assert rehearse_mv(lakehouse, mv) == "not fresh"
    first = refresh_mv(lakehouse, mv)
    assert (first.mode, first.engine) == ("incremental", "duckdb")
    assert set(statements) == rehearsed  # the first refresh ran what was rehearsed
    assert_matches_oracle(lakehouse, mv)
    with monkeypatch.context() as patched:
        patched.setattr(rehearsal, "MAX_ROWS", 1)  # the last change appended two rows
        assert rehearse_mv(lakehouse, mv) == "sampled"
    workers = RefreshWorkers(test_config, 2, semantics=lambda: lakehouse.semantics)
    try:
        before = lakehouse.load_table(storage).metadata.current_snapshot_id
        assert workers.rehearse(mv) == "rehearsed"
        assert lakehouse.load_table(storage).metadata.current_snapshot_id == before
        append_trips(lakehouse, namespace, [(5, "c", 4.0, D1), (6, "d", 1.5, D1)])
        after = workers.refresh(mv)
        assert after is not None and after.engine == "duckdb"
        assert_matches_oracle(lakehouse, mv)
    finally:
        workers.close()
