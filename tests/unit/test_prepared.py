"""A statement prepared over some rows, run over others, gives what it gives run afresh.

The statements are of the shapes the embedded engine runs (a filter, a grouped delta, a
FULL OUTER JOIN merge of stored groups with a delta's, DECIMAL sums, TIMESTAMP buckets),
prepared over generated rows and run over other generated rows: more, fewer, none, NULLs
where the first had none, values outside the first rows' range.
"""

from __future__ import annotations

import datetime as dt
import weakref
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icemv.refresh.embedded.executor import connect, memory_bytes
from icemv.refresh.embedded.prepared import STALE_SECONDS, Budget, PreparedStatements

SCHEMA = pa.schema(
    [
        ("k", pa.int32()),
        ("amount", pa.decimal128(12, 2)),
        ("fare", pa.float64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("vendor", pa.large_string()),
    ]
)
STORED = pa.schema([("k", pa.int32()), ("n", pa.int64()), ("total", pa.decimal128(22, 2))])

DELTA, STORED_NAME = "__icemv_delta_1", "__icemv_stored_1"
STATEMENTS = (
    f'SELECT "k", "amount" FROM "{DELTA}" WHERE "amount" > CAST(4.50 AS DECIMAL(12, 2))',
    f'SELECT "vendor", COUNT(*) AS "n", SUM("amount") AS "s", AVG("fare") AS "f", '
    f'COUNT("fare") AS "c" FROM "{DELTA}" GROUP BY "vendor"',
    f'SELECT DATE_TRUNC(\'HOUR\', "ts") AS "h", SUM("amount") AS "s" FROM "{DELTA}" '
    "GROUP BY DATE_TRUNC('HOUR', \"ts\")",
    # the merge of stored groups with the delta's, as aggregates.py builds it
    f'SELECT COALESCE("t"."k", "d"."k") AS "k", COALESCE("t"."n", 0) + COALESCE("d"."n", 0) '
    f'AS "n", COALESCE("t"."total", 0) + COALESCE("d"."total", 0) AS "total", '
    f'"t"."k" IS NULL AS "inserted" FROM (SELECT *, TRUE AS "here" FROM "{STORED_NAME}") AS "t" '
    f'FULL OUTER JOIN (SELECT "k", COUNT(*) AS "n", SUM("amount") AS "total" FROM "{DELTA}" '
    'GROUP BY "k") AS "d" ON "t"."k" IS NOT DISTINCT FROM "d"."k"',
)

_ints = st.one_of(st.none(), st.integers(-5, 5), st.integers(-(2**31), 2**31 - 1))
_amounts = st.one_of(
    st.none(),
    st.decimals(min_value=Decimal("-9999999999.99"), max_value=Decimal("9999999999.99"), places=2),
)
_fares = st.one_of(st.none(), st.floats(allow_nan=False, width=64, min_value=-1e12, max_value=1e12))
_times = st.one_of(
    st.none(),
    st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2100, 1, 1)).map(
        lambda t: t.replace(tzinfo=dt.UTC)
    ),
)
_vendors = st.one_of(st.none(), st.sampled_from(["a", "b", "ü", ""]))
_delta = st.lists(st.tuples(_ints, _amounts, _fares, _times, _vendors), max_size=40).map(
    lambda rows: pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, r, strict=True)) for r in rows], SCHEMA
    )
)
_stored = st.lists(
    st.tuples(st.integers(-5, 5), st.integers(0, 100), _amounts),
    max_size=10,
    unique_by=lambda r: r[0],
).map(
    lambda rows: pa.Table.from_pylist(
        [dict(zip(STORED.names, r, strict=True)) for r in rows], STORED
    )
)


def _statements() -> PreparedStatements:
    return PreparedStatements(connect(1, "256MB", "UTC"), Budget(1 << 30))


def _afresh(sql: str, relations: dict[str, pa.Table]) -> pa.Table:
    """The statement run as any statement is, on a connection of its own."""
    connection = connect(1, "256MB", "UTC")
    try:
        scope = {**relations, "connection": connection, "sql": sql}
        rows: pa.Table = eval("connection.sql(sql).to_arrow_table()", {}, scope)
        return rows
    finally:
        connection.close()


def _sorted(rows: pa.Table) -> list[tuple[object, ...]]:
    return sorted((tuple(r.values()) for r in rows.to_pylist()), key=repr)


@settings(max_examples=25, deadline=None)
@given(first=st.tuples(_delta, _stored), later=st.lists(st.tuples(_delta, _stored), max_size=4))
def test_a_prepared_statement_run_over_other_rows_gives_what_a_fresh_run_gives(
    first: tuple[pa.Table, pa.Table], later: list[tuple[pa.Table, pa.Table]]
) -> None:
    prepared = _statements()
    try:
        for delta, stored in [first, *later]:
            relations = {DELTA: delta, STORED_NAME: stored}
            for sql in STATEMENTS:
                try:
                    want = _sorted(_afresh(sql, relations))
                except duckdb.Error:  # an overflow, say: the prepared run must raise too
                    with pytest.raises(duckdb.Error):
                        prepared.run(sql, relations)
                    continue
                assert _sorted(prepared.run(sql, relations)) == want
    finally:
        prepared.close()


def test_a_statement_is_prepared_again_for_another_schema_and_kept_otherwise() -> None:
    prepared = _statements()
    sql = f'SELECT SUM("x") AS "s" FROM "{DELTA}"'
    try:
        small = pa.table({"x": pa.array([1, 2], pa.int64())})
        assert prepared.run(sql, {DELTA: small}).column("s").to_pylist() == [3]
        other = pa.table({"x": pa.array([5, 6], pa.int64())})
        assert prepared.run(sql, {DELTA: other}).column("s").to_pylist() == [11]
        assert len(prepared) == 1  # the same schema and size: kept
        doubles = pa.table({"x": pa.array([0.5, 0.25], pa.float64())})
        assert prepared.run(sql, {DELTA: doubles}).column("s").to_pylist() == [0.75]
        assert len(prepared) == 2  # another type: prepared again
        many = pa.table({"x": pa.array(range(100_000), pa.int64())})
        assert prepared.run(sql, {DELTA: many}).column("s").to_pylist() == [4999950000]
        none = pa.table({"x": pa.array([], pa.int64())})
        assert prepared.run(sql, {DELTA: none}).column("s").to_pylist() == [None]
        assert len(prepared) == 2  # other counts: the same plan (no statistics reach it)
        described = other.replace_schema_metadata({"k": "v"})
        assert prepared.run(sql, {DELTA: described}).column("s").to_pylist() == [11]
        field = pa.field("x", pa.int64(), metadata={"ARROW:extension:name": "x.y"})
        tagged = pa.table({"x": pa.array([5, 6], pa.int64())}, pa.schema([field]))
        assert prepared.run(sql, {DELTA: tagged}).column("s").to_pylist() == [11]
        assert len(prepared) == 4  # other metadata (an extension type lives there): again
        assert prepared.run(sql, {DELTA: tagged}).column("s").to_pylist() == [11]
        assert len(prepared) == 4
        field = pa.field("x", pa.int64(), metadata={"PARQUET:field_id": "1"})
        read = pa.table({"x": pa.array([5, 6], pa.int64())}, pa.schema([field]))
        assert prepared.run(sql, {DELTA: read}).column("s").to_pylist() == [11]
        assert len(prepared) == 4  # the field ids a Parquet reader attaches: the same plan
    finally:
        prepared.close()


def test_past_the_budget_a_statement_runs_unprepared_until_a_stale_one_makes_room() -> None:
    now = [0.0]
    budget = Budget(1)
    prepared = PreparedStatements(connect(1, "256MB", "UTC"), budget, lambda: now[0])
    rows = {DELTA: pa.table({"k": pa.array([1, 2, 1], pa.int64())})}
    texts = [f'SELECT "k", {n} + COUNT(*) AS "n" FROM "{DELTA}" GROUP BY "k"' for n in range(3)]

    def counts(sql: str) -> list[int]:
        return sorted(prepared.run(sql, rows).column("n").to_pylist())

    def kept() -> int:
        found = prepared.connection.execute("SELECT count(*) FROM duckdb_prepared_statements()")
        return found.fetchone()[0] - 1  # the memory measure's own

    try:
        assert counts(texts[0]) == [1, 2]
        assert budget.held > 0  # its hash table, held until it runs again
        assert len(prepared) == kept() == 1
        now[0] += STALE_SECONDS / 2
        assert counts(texts[1]) == [2, 3]  # the budget spent: run unprepared
        assert len(prepared) == kept() == 1
        now[0] += STALE_SECONDS
        assert counts(texts[2]) == [3, 4]  # the first, stale, deallocated to make room
        assert len(prepared) == kept() == 1
        assert counts(texts[0]) == [1, 2]  # unprepared now, still right
    finally:
        prepared.close()
    assert budget.held == 0  # closing frees what it held


def test_a_prepared_statement_holds_no_rows_between_runs() -> None:
    prepared = _statements()
    sql = f'SELECT COUNT(*) AS "n" FROM "{DELTA}"'
    try:
        rows = pa.table({"x": [1, 2, 3]})
        assert prepared.run(sql, {DELTA: rows}).column("n").to_pylist() == [3]
        gone = weakref.ref(rows)
        del rows
        assert gone() is None  # the statement stays prepared, its rows do not
        assert len(prepared) == 1
    finally:
        prepared.close()


@pytest.mark.parametrize(
    ("limit", "expected"),
    [("512MB", 512_000_000), ("2GiB", 2**31), ("1.5 GB", 1_500_000_000), ("64KiB", 65536)],
)
def test_a_memory_limit_reads_as_duckdb_reads_it(limit: str, expected: int) -> None:
    assert memory_bytes(limit) == expected  # DuckDB shows 512MB as 488.2 MiB: decimal
