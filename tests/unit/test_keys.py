"""Affected keys (sql/keys.py): which queries partition by one key, and by which columns."""

from __future__ import annotations

import pytest

from icemv.mv.explain import explain_analysis, render_explain
from icemv.mv.operators import operator_rules
from icemv.sql.analysis import NotMaintainable, RowsAnalysis, analyse
from tests.unit.sources import Sources, ident

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
        # The key is the column the window partitions by, not the one an equality above
        # the window names (`a = b` holds on the view's rows, not on the window's).
        (
            "SELECT id, vendor, n FROM (SELECT id, vendor, count(*) OVER (PARTITION BY vendor) "
            "AS n FROM trips) x WHERE id = vendor",
            "trips.vendor",
        ),
        # Positive IN under OR: TRUE exactly when some value equals the row's key.
        (
            "SELECT id FROM trips WHERE fare > 1 OR id IN (SELECT id FROM zones)",
            "trips.id = zones.id",
        ),
        # A correlated subquery reads one key's rows, whatever it computes from them.
        (
            "SELECT id, rank() OVER (PARTITION BY id ORDER BY fare) AS r, "
            "(SELECT count(*) FROM zones z WHERE z.id = t.id AND z.zone > 'a') AS n FROM trips t",
            "t.id = z.id",
        ),
        (
            "SELECT id FROM trips t WHERE fare > 1 OR "
            "NOT (vendor IN (SELECT z.vendor FROM zones z WHERE z.id = t.id))",
            "t.id = z.id",
        ),
        # Keys equated in the WHERE of a comma join; a padded side made inner by the WHERE.
        (
            "SELECT t.id, rank() OVER (PARTITION BY z.id ORDER BY t.fare) AS r "
            "FROM trips t, zones z WHERE t.id = z.id",
            "t.id = z.id",
        ),
        (
            "SELECT t.id, count(*) OVER (PARTITION BY z.id) AS n FROM trips t "
            "LEFT JOIN zones z ON t.id = z.id WHERE z.id = t.id",
            "t.id = z.id",
        ),
        # A WHERE conjunct on preserved rows applies before the joins after it.
        (
            "SELECT x.id, x.n, z.zone FROM (SELECT id, vendor, count(*) OVER (PARTITION BY "
            "vendor) AS n FROM trips) x LEFT JOIN zones z ON x.id = z.id WHERE x.id = x.vendor",
            "trips.vendor = z.id",
        ),
        # A FULL JOIN's key on every row is the COALESCE of both sides'.
        (
            "SELECT k, count(*) OVER (PARTITION BY k) AS n FROM (SELECT coalesce(t.id, z.id) "
            "AS k FROM trips t FULL JOIN zones z ON t.id = z.id) q",
            "t.id = z.id",
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
        (
            "SELECT id, rank() OVER (ORDER BY fare) AS r FROM trips",
            "a window not partitioned by the key",
        ),
        (
            "SELECT id, rank() OVER (PARTITION BY vendor ORDER BY fare) AS r, "
            "lag(fare) OVER (PARTITION BY id ORDER BY fare) AS p FROM trips",
            "a window not partitioned by the key",
        ),
        (
            "SELECT id, rank() OVER (PARTITION BY id ORDER BY fare) AS r, "
            "(SELECT avg(fare) FROM zones) AS a FROM trips",
            "correlated on other columns than the key",
        ),
        (
            "SELECT vendor, count(*) AS n, rank() OVER (PARTITION BY vendor ORDER BY count(*)) "
            "AS r FROM trips GROUP BY vendor",
            "window over the grouped rows",
        ),
        # Issue 25, class 1: a window (or inner aggregate) by the NULL-padded side of an
        # outer join: unmatched rows of many keys share one NULL partition.
        (
            "SELECT t.id, z.id AS zid, count(*) OVER (PARTITION BY z.id) AS n "
            "FROM trips t LEFT JOIN zones z ON t.id = z.id",
            "a window not partitioned by the key",
        ),
        (
            "SELECT q.zid, q.n, y.zone FROM (SELECT z.id AS zid, count(*) AS n FROM trips t "
            "LEFT JOIN zones z ON t.id = z.id GROUP BY z.id) q JOIN zones y ON q.zid = y.id",
            "an inner aggregate not grouped by the key",
        ),
        (
            "SELECT t.id, count(*) OVER (PARTITION BY t.id) AS n FROM trips t "
            "FULL JOIN zones z ON t.id = z.id",
            "a window not partitioned by the key",
        ),
        # Class 2: an equality above the window does not bind the rows it partitions.
        (
            "SELECT id, vendor, n FROM (SELECT id, vendor, count(*) OVER (PARTITION BY vendor) "
            "AS n, rank() OVER (PARTITION BY id ORDER BY fare) AS r FROM trips) x "
            "WHERE id = vendor",
            "a window not partitioned by the key",
        ),
        # Key or NULL: `<=>` would match the NULLs of many keys; a window or an inner
        # GROUP BY by the padded side puts every unmatched key in one NULL partition.
        (
            "SELECT t.id, count(y.id) AS n FROM trips t FULL JOIN zones z ON t.id = z.id "
            "JOIN zones y ON t.id <=> y.id GROUP BY t.id",
            "a join not on the key",
        ),
        (
            "SELECT t.id, count(*) OVER (PARTITION BY z.id) AS n FROM trips t "
            "LEFT JOIN zones z ON t.id = z.id LEFT JOIN zones y ON z.id <=> y.id",
            "not on the key",
        ),
        # Tables read whole: not on the preserved side of an outer join (padded once per
        # key), and only where an equality reaches them.
        (
            "SELECT t.id, count(*) OVER (PARTITION BY z.zone) AS n FROM trips t "
            "LEFT JOIN zones z ON t.vendor = z.vendor",
            "a window not partitioned by the key",
        ),
    ],
)
def test_queries_without_a_key_stay_full(sql: str, why: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, NotMaintainable)
    assert any(why in detail for detail in analysis.details), analysis.details


@pytest.mark.parametrize(
    "sql",
    [
        # A null-aware IN under NOT, CASE or a comparison, over a table read whole: the
        # same for every key, so the window's key still decomposes; a change to zones
        # recomputes the view.
        "SELECT id, rank() OVER (PARTITION BY vendor ORDER BY fare) AS r FROM trips "
        "WHERE (id, vendor) NOT IN (SELECT id, vendor FROM zones)",
        "SELECT id, rank() OVER (PARTITION BY id ORDER BY fare) AS r FROM trips "
        "WHERE fare > 1 OR NOT (id IN (SELECT id FROM zones))",
        "SELECT id, rank() OVER (PARTITION BY id ORDER BY fare) AS r FROM trips "
        "WHERE CASE WHEN id IN (SELECT id FROM zones) THEN false ELSE true END",
        "SELECT id, rank() OVER (PARTITION BY id ORDER BY fare) AS r FROM trips "
        "WHERE (id IN (SELECT id FROM zones)) IS NOT TRUE",
        "SELECT id, rank() OVER (PARTITION BY id ORDER BY fare) AS r, "
        "(SELECT max(zone) FROM zones) AS top FROM trips",
    ],
)
def test_an_uncorrelated_subquery_over_a_table_read_whole_recomputes_on_it(sql: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, RowsAnalysis) and analysis.keyed is not None, analysis
    assert analysis.recompute_on == {ident("nyc.zones")}
    assert "zones" not in " ".join(analysis.keyed.columns)
    rules = operator_rules(analysis)
    assert "table zones (nyc.zones): read whole; a change to it recomputes the view" in rules


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


@pytest.mark.parametrize(
    ("sql", "keyed", "whole"),
    [
        # A LEFT JOIN chain on different keys: the dimension of the dimension read whole.
        (
            "SELECT t.id, z.zone, y.zone AS vzone FROM trips t LEFT JOIN zones z "
            "ON t.id = z.id LEFT JOIN zones y ON t.vendor = y.vendor",
            "t.id = z.id",
            "y (via y.vendor = t.vendor)",
        ),
        (
            "SELECT z.zone, count(*) AS n, sum(t.fare) AS s FROM trips t LEFT JOIN zones z "
            "ON t.vendor = z.vendor GROUP BY z.zone",
            "t.vendor = z.vendor",
            "",
        ),
        # A window partitioned by a joined table's column: that table keyed by it, the
        # other reached through the join.
        (
            "SELECT t.id, z.zone, row_number() OVER (PARTITION BY z.zone ORDER BY t.fare, "
            "t.id) AS rn FROM trips t JOIN zones z ON t.vendor = z.vendor",
            "z.zone",
            "t (via t.vendor = z.vendor)",
        ),
        # The table left-joined to a FULL JOIN's side: present only where that side is.
        (
            "SELECT t.id, z.zone, y.zone AS vzone FROM trips t FULL JOIN zones z "
            "ON t.id = z.id LEFT JOIN zones y ON t.vendor = y.vendor",
            "t.id = z.id",
            "y (via y.vendor = t.vendor)",
        ),
        # Two hops: y reached through z, whose key is the class's.
        (
            "SELECT t.id, y.zone FROM trips t LEFT JOIN zones z ON t.id = z.id "
            "LEFT JOIN zones y ON z.vendor = y.id",
            "t.id = z.id",
            "y (via y.id = z.vendor)",
        ),
        # Key or NULL: a padded side's key, or the left side of a FULL JOIN, links a
        # later join by `=` (a NULL matches nothing, a value only its own key).
        (
            "SELECT t.id, count(y.id) AS n FROM trips t FULL JOIN zones z ON t.id = z.id "
            "JOIN zones y ON t.id = y.id GROUP BY t.id",
            "t.id = y.id = z.id",
            "",
        ),
        (
            "SELECT t.id, y.zone FROM trips t LEFT JOIN zones z ON t.id = z.id "
            "LEFT SEMI JOIN zones y ON z.id = y.id",
            "t.id = y.id = z.id",
            "",
        ),
        (
            "SELECT t.vendor, count(*) AS n FROM trips t LEFT JOIN zones z ON t.id = z.id "
            "WHERE EXISTS (SELECT 1 FROM zones y WHERE y.id = z.id) GROUP BY t.vendor",
            "t.id = y.id = z.id",
            "",
        ),
        # A correlated subquery over a table read whole, reached by its correlation.
        (
            "SELECT t.id, rank() OVER (PARTITION BY t.id ORDER BY t.fare) AS r FROM trips t "
            "WHERE NOT EXISTS (SELECT 1 FROM zones z WHERE z.vendor = t.vendor AND z.zone > 'a')",
            "t.id",
            "z (via z.vendor = t.vendor)",
        ),
        # A derived relation anchors the reach: read at the new snapshot, its key output
        # is the key of every row a change to the whole table joins.
        (
            "SELECT t.vendor, z.zone FROM (SELECT vendor, sum(fare) AS s FROM trips "
            "GROUP BY vendor) t JOIN zones z ON t.s = z.id",
            "trips.vendor",
            "z (via z.id = t.s)",
        ),
        (
            "SELECT q.id, y.zone FROM (SELECT id, vendor, row_number() OVER (PARTITION BY "
            "vendor ORDER BY fare, id) AS rn FROM trips) q LEFT JOIN zones y ON q.id = y.id",
            "trips.vendor",
            "y (via y.id = q.id)",
        ),
        # A positive IN over a table read whole: only rows with that value can flip.
        (
            "SELECT t.id, rank() OVER (PARTITION BY t.id ORDER BY t.fare) AS r FROM trips t "
            "WHERE t.fare > 1 AND t.vendor IN (SELECT z.vendor FROM zones z WHERE z.zone > 'a')",
            "t.id",
            "z (via z.vendor = t.vendor)",
        ),
    ],
)
def test_keyed_queries_with_tables_read_whole(sql: str, keyed: str, whole: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    assert analysis.keyed is not None
    assert sorted(set(analysis.keyed.columns)) == sorted(keyed.split(" = "))
    assert ", ".join(analysis.keyed.whole) == whole


def test_explain_names_the_rule_of_each_operator() -> None:
    analysis = analyse(
        SOURCES,
        "SELECT y.zone, count(*) AS n, median(t.fare) AS md FROM trips t LEFT JOIN zones z "
        "ON t.id = z.id LEFT JOIN zones y ON z.vendor = y.id GROUP BY y.zone",
        ("nyc",),
    )
    assert not isinstance(analysis, NotMaintainable), analysis.details
    text = render_explain({"name": "v", **explain_analysis(analysis, "auto")})
    assert "table t (nyc.trips): rows of the touched keys of id" in text, text
    assert (
        "table y (nyc.zones): read whole; its changes reach the key through y.id = z.vendor" in text
    )
    assert "LEFT JOIN lake.nyc.zones AS y: affected keys" in text, text
    assert "aggregate median: the touched groups recomputed" in text, text


def test_an_aggregate_without_its_group_key_is_kept_as_rows_of_its_groups() -> None:
    analysis = analyse(
        SOURCES,
        "WITH c AS (SELECT vendor, count(*) AS n, sum(fare) AS s FROM trips GROUP BY vendor) "
        "SELECT n * 2 AS n2 FROM c WHERE s > 3",
        ("nyc",),
    )
    assert isinstance(analysis, RowsAnalysis) and analysis.keyed is not None
    assert analysis.keyed.columns == ("trips.vendor",)
    assert analysis.rewrites[-1] == "groups as rows (a group key not in the output)"
    assert "GROUP BY trips.vendor (inner): the touched groups recomputed" in operator_rules(
        analysis
    )
    # No key class: a group key that is an expression only.
    refused = analyse(SOURCES, "SELECT count(*) AS n FROM trips GROUP BY fare * 2", ("nyc",))
    assert isinstance(refused, NotMaintainable) and refused.reasons == ("group-key-not-in-output",)


@pytest.mark.parametrize(
    ("sql", "recomputed_on"),
    [
        (
            "SELECT t.id, z.zone FROM trips t LEFT JOIN zones z ON t.id = z.id "
            "LEFT JOIN zones y ON t.vendor > y.vendor",
            "nyc.zones",
        ),
        (
            "SELECT t.id, count(*) OVER (PARTITION BY z.zone) AS n FROM trips t "
            "JOIN zones z ON t.fare > z.id",
            "nyc.trips",
        ),
    ],
)
def test_a_table_read_whole_that_no_equality_reaches_is_recomputed_on(
    sql: str, recomputed_on: str
) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    assert analysis.keyed is not None
    assert analysis.recompute_on == {ident(recomputed_on)}


@pytest.mark.parametrize(
    "sql",
    [
        # A `<=>` from the padded side of an outer join: a padded row has no row to join at
        # the new snapshot, yet its NULL matches the NULLs of the whole table.
        "SELECT t.id, z.zone, y.zone AS yzone FROM trips t LEFT JOIN zones z ON t.id = z.id "
        "LEFT JOIN zones y ON z.vendor <=> y.vendor",
        "SELECT t.id, (SELECT count(*) FROM zones y WHERE y.vendor <=> z.vendor) AS n "
        "FROM trips t LEFT JOIN zones z ON t.id = z.id",
        # A correlated subquery over a table read whole whose correlation reaches no key.
        "SELECT t.id, rank() OVER (PARTITION BY t.id ORDER BY t.fare) AS r FROM trips t "
        "WHERE NOT EXISTS (SELECT 1 FROM zones z WHERE z.vendor < t.vendor)",
        # The IN subquery's own table has the outer table's alias: it would reach itself.
        "SELECT trips.id, count(*) OVER (PARTITION BY trips.id) AS n FROM trips "
        "WHERE trips.vendor IN (SELECT trips.zone FROM zones trips WHERE trips.id > 0)",
    ],
)
def test_no_reach_through_a_padded_null_a_non_equality_or_a_shadowed_alias(sql: str) -> None:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    assert analysis.keyed is not None
    # The whole zones occurrence is not reached: a change to zones recomputes the view.
    assert ident("nyc.zones") in analysis.recompute_on, analysis.keyed
    assert not any("(via" in w and "zones" not in w.split(" ")[0] for w in analysis.keyed.whole)
