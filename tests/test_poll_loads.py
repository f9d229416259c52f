"""A daemon poll loads each table and view once, and an idle poll on JDBC is one query.

Five MVs over two tables on the PostgreSQL JDBC catalog, refreshed by real Spark; the
poller runs with refresh requests only recorded. Loads are counted below icemv's caches:
the backend's load calls per identifier, SQL statements on the catalog database and table
metadata files read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyiceberg.serializers import FromInputFile
from sqlalchemy import event

import icemv.catalog.jdbc
import icemv.catalog.jdbc_views
import icemv.service.source_index
from icemv.catalog.jdbc import JdbcBackend
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.freshness import assess_freshness
from icemv.mv.lifecycle import create_mv
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from icemv.refresh.result import RefreshResult
from icemv.service.metrics import Metrics
from icemv.service.poller import Reconciler
from icemv.service.source_index import SourceIndex
from icemv.sql.memo import Memo
from tests.support.tables import append_trips, create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

ROWS = [(i, f"v{i % 2}", float(i), None) for i in range(6)]
# Five MVs: two over a, two over b, one joining both.
MV_SQL = {
    "over_a1": "SELECT vendor, count(*) AS n FROM a GROUP BY vendor",
    "over_a2": "SELECT vendor, sum(fare) AS s FROM a WHERE fare > 1 GROUP BY vendor",
    "over_b1": "SELECT vendor, count(*) AS n FROM b GROUP BY vendor",
    "over_b2": "SELECT id, fare FROM b WHERE fare > 2",
    "joined": "SELECT a.vendor, count(*) AS n FROM a JOIN b ON a.id = b.id GROUP BY a.vendor",
}


@dataclass
class Loads:
    """What reached the catalog: loads per (kind, identifier), SQL statements, metadata reads."""

    by_identifier: Counter[tuple[str, Identifier]] = field(default_factory=Counter)
    sql: int = 0
    table_metadata_reads: int = 0
    view_metadata_reads: int = 0
    # Where each table metadata file read was, to attribute reads to this test's tables.
    table_metadata_files: list[str] = field(default_factory=list)

    def take(self) -> Loads:
        taken = Loads(
            Counter(self.by_identifier),
            self.sql,
            self.table_metadata_reads,
            self.view_metadata_reads,
            list(self.table_metadata_files),
        )
        self.by_identifier.clear()
        self.table_metadata_files.clear()
        self.sql = self.table_metadata_reads = self.view_metadata_reads = 0
        return taken

    def of(self, kind: str) -> Counter[Identifier]:
        return Counter({i: n for (k, i), n in self.by_identifier.items() if k == kind})


@pytest.fixture
def loads(lakehouse: Lakehouse, monkeypatch: pytest.MonkeyPatch) -> Iterator[Loads]:
    backend = lakehouse.backend
    assert isinstance(backend, JdbcBackend)
    counted = Loads()

    def wrap(kind: str, load: Callable[..., Any]) -> Callable[..., Any]:
        def counting(identifier: Identifier, *args: Any) -> Any:
            counted.by_identifier[(kind, identifier)] += 1
            return load(identifier, *args)

        return counting

    # Every way a table or view is loaded: by name (a query + a read) or at a listed location.
    monkeypatch.setattr(backend, "load_table", wrap("table", backend.load_table))
    monkeypatch.setattr(backend, "read_table", wrap("table", backend.read_table))
    monkeypatch.setattr(backend.views, "load", wrap("view", backend.views.load))
    monkeypatch.setattr(backend.views, "read", wrap("view", backend.views.read))
    read_metadata = FromInputFile.table_metadata

    def metadata(input_file: Any, *args: Any, **kwargs: Any) -> Any:
        counted.table_metadata_reads += 1
        counted.table_metadata_files.append(str(input_file.location))
        return read_metadata(input_file, *args, **kwargs)

    monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(metadata))
    # Every load parses its file, so that files read count loads.
    monkeypatch.setattr(icemv.catalog.jdbc, "_parsed", Memo(0))
    decode = icemv.catalog.jdbc_views.decode_view_metadata

    def view_metadata(data: bytes) -> Any:
        counted.view_metadata_reads += 1
        return decode(data)

    monkeypatch.setattr(icemv.catalog.jdbc_views, "decode_view_metadata", view_metadata)

    def statement(*_: Any) -> None:
        counted.sql += 1

    # Both of the catalog's engines: pyiceberg's and the autocommit one (catalog/jdbc.py).
    engines = (backend.catalog.engine, backend.catalog.statements)
    for engine in engines:
        event.listen(engine, "before_cursor_execute", statement)
    yield counted
    for engine in engines:
        event.remove(engine, "before_cursor_execute", statement)


def catalog_loads(metrics: Metrics, obj: str, result: str) -> float:
    value = metrics.registry.get_sample_value(
        "icemv_catalog_loads_total", {"object": obj, "result": result}
    )
    return 0.0 if value is None else value


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the index resolved each of this test's MVs (by its SQL) from scratch."""
    counted: Counter[str] = Counter()
    pin = icemv.service.source_index.pin_sources

    def counting(resolver: Any, sql: str, *args: Any) -> Any:
        names = [name for name, text in MV_SQL.items() if text == sql]
        counted.update(names)
        return pin(resolver, sql, *args)

    monkeypatch.setattr(icemv.service.source_index, "pin_sources", counting)
    return counted


def test_one_load_per_table_per_poll_and_idle_polls_are_one_query(
    lakehouse: Lakehouse, namespace: str, loads: Loads, pinned: Counter[str]
) -> None:
    a, b = Identifier((namespace,), "a"), Identifier((namespace,), "b")
    create_trips(lakehouse, namespace, "a", ROWS)
    create_trips(lakehouse, namespace, "b", ROWS)
    mvs = {name: Identifier((namespace,), name) for name in MV_SQL}
    for name, sql in MV_SQL.items():
        create_mv(lakehouse, mvs[name], sql)
        refresh_mv(lakehouse, mvs[name])
    storage = {load_materialized_view(lakehouse, mv).storage for mv in mvs.values()}
    requested: list[Identifier] = []

    def request(mv: Identifier, reason: str) -> Future[RefreshResult]:
        requested.append(mv)
        return Future()

    metrics = Metrics()
    poller = Reconciler(lakehouse, SourceIndex(lakehouse), metrics, request, 60.0)
    loads.take()

    # A cold poll: every table and view the poll needs is loaded once, however many MVs
    # read it (the catalog may hold other tests' MVs too: the bound holds for all).
    poller.poll()
    first = loads.take()
    assert poller.polls == 1
    assert pinned == Counter(dict.fromkeys(MV_SQL, 1))  # each MV's sources resolved once
    pinned.clear()
    assert max(first.of("table").values()) == 1, first.of("table")
    assert max(first.of("view").values()) == 1, first.of("view")
    assert {a, b} | storage <= set(first.of("table"))
    assert set(mvs.values()) <= set(first.of("view"))
    # Other tests' tables share the catalog (some with their metadata files gone): every
    # read is a counted load, and each of this test's tables was read exactly once.
    assert first.table_metadata_reads <= sum(first.of("table").values())
    for table in {a, b} | storage:
        reads = [f for f in first.table_metadata_files if f"/{namespace}/{table.name}/" in f]
        assert len(reads) == 1, (table, reads, first.table_metadata_files[:5])
    assert first.view_metadata_reads <= sum(first.of("view").values())
    assert not set(requested) & set(mvs.values())  # all five are fresh
    loaded_tables = catalog_loads(metrics, "table", "loaded")
    assert len({a, b} | storage) <= loaded_tables <= sum(first.of("table").values())

    # Nothing changed: one query (the listing), nothing loaded or read, all reused.
    poller.poll()
    idle = loads.take()
    assert poller.polls == 2
    assert idle.sql == 1
    assert (idle.table_metadata_reads, idle.view_metadata_reads) == (0, 0)
    assert not idle.by_identifier
    assert not pinned  # and no MV's SQL parsed again: the index reused every resolution
    # What this poll needed was reused (other tests' broken MVs may need less than before).
    assert len({a, b} | storage) <= catalog_loads(metrics, "table", "reused") <= loaded_tables
    assert len(mvs) <= catalog_loads(metrics, "view", "reused")
    assert not set(requested) & set(mvs.values())

    # A freshness-target check between polls (icemv.max-staleness) is one query as well.
    poller.check_by_name(mvs["joined"])
    target_check = loads.take()
    assert (target_check.sql, target_check.table_metadata_reads) == (1, 0)
    assert not target_check.by_identifier
    assert not set(requested) & set(mvs.values())

    # A commit to `a` between polls: `a` alone is loaded again (once), and exactly the MVs
    # that read it are found stale and get refresh requests.
    append_trips(lakehouse, namespace, [(100, "v9", 100.0, None)], name="a")
    loads.take()
    poller.poll()
    after_commit = loads.take()
    assert after_commit.sql == 1
    assert after_commit.of("table") == Counter({a: 1})
    assert after_commit.table_metadata_reads == 1
    readers_of_a = {mvs["over_a1"], mvs["over_a2"], mvs["joined"]}
    assert set(requested) & set(mvs.values()) == readers_of_a
    assert pinned == Counter({"over_a1": 1, "over_a2": 1, "joined": 1})  # a's readers only
    pinned.clear()
    requested.clear()

    # Those refreshes commit to their storage tables: the next poll reloads those (once
    # each), finds every MV fresh again and requests nothing.
    for mv in sorted(readers_of_a):
        refresh_mv(lakehouse, mv)
    loads.take()
    poller.poll()
    refreshed = loads.take()
    assert refreshed.sql == 1
    storage_of_readers = {load_materialized_view(lakehouse, mv).storage for mv in readers_of_a}
    assert refreshed.of("table") == Counter(dict.fromkeys(storage_of_readers, 1))
    assert not pinned  # no MV reads those storage tables
    assert not set(requested) & set(mvs.values())
    for mv in mvs.values():
        assert assess_freshness(lakehouse, load_materialized_view(lakehouse, mv)).state == "fresh"
