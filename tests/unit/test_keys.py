"""Affected keys (sql/keys.py): which queries partition by one key, and by which columns."""

from __future__ import annotations

import pytest

from icemv.sql.analysis import NotMaintainable, analyse
from tests.unit.sources import Sources

SOURCES = Sources(
    tables={"nyc.trips": ("id", "vendor", "fare"), "nyc.zones": ("id", "zone", "vendor")}
)


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        (
            "SELECT id, fare FROM (SELECT id, fare, row_number() OVER (PARTITION BY id "
            "ORDER BY fare DESC) AS rn FROM trips) t WHERE rn = 1",
            "trips.id",
        ),
        ("SELECT vendor, sum(fare) OVER (PARTITION BY vendor) AS s FROM trips", "trips.vendor"),
        ("SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id", "t.id = z.id"),
        ("SELECT t.id, z.zone FROM trips t FULL JOIN zones z ON z.id = t.id", "t.id = z.id"),
        (
            "SELECT t.vendor, count(z.id) AS n FROM trips t LEFT JOIN zones z "
            "ON t.id = z.id AND z.zone > 'a' GROUP BY t.vendor",
            "t.id = z.id",
        ),
        (
            "SELECT id FROM trips t WHERE NOT EXISTS (SELECT 1 FROM zones z WHERE z.id = t.id)",
            "t.id = z.id",
        ),
        ("SELECT id FROM trips WHERE id IN (SELECT id FROM zones)", "trips.id = zones.id"),
        (
            "SELECT s.id, s.n, z.zone FROM (SELECT id, count(*) AS n FROM trips GROUP BY id) s "
            "JOIN zones z ON s.id = z.id",
            "trips.id = z.id",
        ),
        (
            "SELECT t.id, z.zone FROM (SELECT DISTINCT id, vendor FROM trips) t "
            "JOIN zones z ON t.id = z.id",
            "trips.id = z.id",
        ),
    ],
)
def test_keyed_queries(sql: str, key: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    assert analysis.keyed is not None
    assert sorted(analysis.keyed.describe().split(" = ")) == sorted(key.split(" = "))


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT id, rank() OVER (ORDER BY fare) AS r FROM trips", "window without PARTITION BY"),
        (
            "SELECT id, rank() OVER (PARTITION BY vendor ORDER BY fare) AS r, "
            "lag(fare) OVER (PARTITION BY id ORDER BY fare) AS p FROM trips",
            "no key column",
        ),
        (
            "SELECT id, rank() OVER (PARTITION BY vendor ORDER BY fare) AS r FROM trips "
            "WHERE (id, vendor) NOT IN (SELECT id, vendor FROM zones)",
            "NOT IN",
        ),
        (
            "SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id "
            "LEFT JOIN zones y ON t.vendor = y.vendor",
            "no key column",
        ),
        (
            "SELECT id, (SELECT avg(fare) FROM zones) AS a FROM trips",
            "inner aggregate without GROUP BY",
        ),
        (
            "SELECT t.vendor, z.zone FROM (SELECT vendor, sum(fare) AS s FROM trips "
            "GROUP BY vendor) t JOIN zones z ON t.s = z.id",
            "no key column",
        ),
        (
            "SELECT vendor, count(*) AS n, rank() OVER (PARTITION BY vendor ORDER BY count(*)) "
            "AS r FROM trips GROUP BY vendor",
            "window over the grouped rows",
        ),
    ],
)
def test_queries_without_a_key_stay_full(sql: str, why: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, NotMaintainable)
    assert any(why in detail for detail in analysis.details), analysis.details


@pytest.mark.parametrize(
    ("sql", "nonlinear"),
    [
        ("SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id", {"zones"}),
        ("SELECT t.id, z.zone FROM trips t RIGHT JOIN zones z ON t.id = z.id", {"trips"}),
        ("SELECT t.id, z.zone FROM trips t FULL JOIN zones z ON t.id = z.id", {"trips", "zones"}),
        (
            "SELECT id FROM trips t WHERE NOT EXISTS (SELECT 1 FROM zones z WHERE z.id = t.id)",
            {"zones"},
        ),
        ("SELECT vendor, sum(fare) OVER (PARTITION BY vendor) AS s FROM trips", {"trips"}),
        ("SELECT t.id, u.fare FROM trips t LEFT JOIN trips u ON t.id = u.id", {"trips"}),
    ],
)
def test_changes_to_a_linear_side_need_no_keys(sql: str, nonlinear: set[str]) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable) and analysis.keyed is not None
    assert {source.name for source in analysis.keyed.nonlinear} == nonlinear
