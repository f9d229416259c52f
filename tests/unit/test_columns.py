"""What a view needs from a source's change rows: columns and pushable filters; no JVM."""

from __future__ import annotations

import pytest
from sqlglot import exp

from icemv.sql.analysis import analyse
from icemv.sql.columns import ALL, change_read, columns_used, nets_at_once
from tests.unit.sources import Sources, ident

SOURCES = Sources(
    tables={
        "nyc.trips": ("id", "vendor", "fare", "day"),
        "nyc.zones": ("id", "zone"),
        "edge.Mixed Tbl": ("Id", "Vendor Name", "Fare"),
    }
)


def _read(sql: str, table: str = "nyc.trips", namespace: str = "nyc") -> tuple[object, ...]:
    analysis = analyse(SOURCES, sql, (namespace,))
    assert analysis.maintainable, analysis
    read = change_read(
        analysis.query, ident(table), tuple(SOURCES.tables[table]), analysis.keyed is not None
    )
    return read.columns, read.filter_sql()


CASES = [
    # Aggregate: keys, arguments and WHERE columns, in table order; the WHERE pushed.
    (
        "SELECT vendor, sum(fare) AS s FROM trips WHERE day IS NOT NULL GROUP BY vendor",
        "nyc.trips",
        (("vendor", "fare", "day"), "NOT `day` IS NULL"),
    ),
    ("SELECT vendor, count(*) AS n FROM trips GROUP BY vendor", "nyc.trips", (("vendor",), None)),
    ("SELECT count(*) AS n FROM trips", "nyc.trips", ((), None)),
    # Every column used, or a star: all columns (None).
    ("SELECT * FROM trips", "nyc.trips", (None, None)),
    ("SELECT id, vendor, fare, day FROM trips WHERE fare > 1", "nyc.trips", (None, "`fare` > 1")),
    # Inner join: each side's own conjuncts; a conjunct over both sides stays in the query.
    (
        "SELECT t.id, z.zone FROM trips t JOIN zones z ON t.id = z.id "
        "WHERE z.zone = 'a' AND t.fare + z.id > 1 AND t.vendor LIKE 'x%'",
        "nyc.trips",
        (("id", "vendor", "fare"), "`vendor` LIKE 'x%'"),
    ),
    (
        "SELECT t.id, z.zone FROM trips t JOIN zones z ON t.id = z.id WHERE z.zone = 'a'",
        "nyc.zones",
        (None, "`zone` = 'a'"),
    ),
    # A join key named only in ON is read (the embedded engine joins the change rows by it).
    (
        "SELECT z.zone, count(*) AS n FROM trips t LEFT JOIN zones z ON t.vendor = z.zone "
        "GROUP BY z.zone",
        "nyc.trips",
        (("vendor",), None),
    ),
    # A self-join: both occurrences' columns, no filter (which occurrence would it be?).
    (
        "SELECT a.id FROM trips a JOIN trips b ON a.vendor = b.vendor WHERE a.fare > 1",
        "nyc.trips",
        (("id", "vendor", "fare"), None),
    ),
    # An outer join's WHERE sees NULL-padded rows: never pushed.
    (
        "SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id WHERE z.zone IS NULL",
        "nyc.zones",
        (None, None),
    ),
    # A window (keyed): its partition key kept, no filter pushed.
    (
        "SELECT id, row_number() OVER (PARTITION BY vendor ORDER BY id) AS r "
        "FROM trips WHERE fare > 0",
        "nyc.trips",
        (("id", "vendor", "fare"), None),
    ),
    # UNION ALL: the branch that reads the table.
    (
        "SELECT id FROM trips WHERE fare > 1 UNION ALL SELECT id FROM zones WHERE zone = 'x'",
        "nyc.trips",
        (("id", "fare"), "`fare` > 1"),
    ),
    # Names that need quoting keep their exact case.
    (
        "SELECT `Vendor Name`, count(*) AS n FROM `Mixed Tbl` WHERE `Fare` > 2 GROUP BY 1",
        "edge.Mixed Tbl",
        (("Vendor Name", "Fare"), "`Fare` > 2"),
    ),
]


@pytest.mark.parametrize(("sql", "table", "expected"), CASES)
def test_change_read(sql: str, table: str, expected: tuple[object, ...]) -> None:
    namespace = table.split(".")[0]
    assert _read(sql, table, namespace) == expected


def test_unsure_means_all_columns() -> None:
    unqualified = exp.select("id").from_(exp.table_("trips", db="nyc"))
    assert columns_used(unqualified, ident("nyc.trips")) is None
    star = exp.select("*").from_(exp.table_("trips", db="nyc"))
    assert columns_used(star, ident("nyc.trips")) is None
    unknown = exp.select(exp.column("id", table="nowhere")).from_(exp.table_("trips", db="nyc"))
    assert columns_used(unknown, ident("nyc.trips")) is None
    assert change_read(star, ident("nyc.trips"), ("id",), keyed=False) == ALL


def test_nondeterministic_and_subquery_conjuncts_stay() -> None:
    query = exp.maybe_parse(
        "SELECT t.id FROM nyc.trips AS t WHERE rand() < t.fare AND t.day IN "
        "(SELECT z.id FROM nyc.zones AS z) AND t.vendor = 'a'",
        dialect="spark",
    )
    assert isinstance(query, exp.Query)
    read = change_read(query, ident("nyc.trips"), ("id", "vendor", "fare", "day"), keyed=False)
    assert read.filter_sql() == "vendor = 'a'"


@pytest.mark.parametrize(
    ("sql", "recomputes", "nets"),
    [
        ("SELECT vendor, count(*) AS n FROM trips GROUP BY vendor", False, True),
        ("SELECT vendor, max(fare) AS hi FROM trips GROUP BY vendor", True, False),
        ("SELECT id, fare FROM trips WHERE fare > 1", False, True),
        ("SELECT t.id FROM trips t JOIN zones z ON t.id = z.id", False, False),
        (
            "SELECT id, row_number() OVER (PARTITION BY vendor ORDER BY id) AS r FROM trips",
            False,
            False,
        ),
    ],
)
def test_moved_rows_cancel_unless_the_delta_query_nets_them_first(
    sql: str, recomputes: bool, nets: bool
) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert analysis.maintainable, analysis
    assert nets_at_once(analysis.query, analysis.keyed is not None, recomputes) is nets
