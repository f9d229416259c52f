"""Which hidden state columns an aggregate view keeps, and the query that computes them
(golden SQL, the sqlglot fixture style); and which strategy the state allows. No JVM."""

from __future__ import annotations

import pytest

from icemv.sql.analysis import AggregateAnalysis, analyse
from icemv.sql.state import aggregate_state, is_state_column, state_query
from tests.unit.sources import Sources

SOURCES = Sources(tables={"nyc.trips": ("id", "vendor", "fare")})


def _analysis(sql: str) -> AggregateAnalysis:
    analysis = analyse(SOURCES, sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis), analysis
    return analysis


def test_state_of_every_merged_aggregate() -> None:
    analysis = _analysis(
        "SELECT vendor, sum(fare) AS s, avg(fare) AS a, stddev_pop(fare) AS sd, "
        "max(fare) AS hi FROM trips GROUP BY vendor"
    )
    state = aggregate_state(analysis)
    assert [(c.name, c.role) for c in state] == [
        ("_icemv_rows", "rows"),
        ("_icemv_count_s", "count"),
        ("_icemv_sum_a", "sum"),
        ("_icemv_count_a", "count"),
        ("_icemv_count_sd", "count"),
        ("_icemv_mean_sd", "mean"),
        ("_icemv_m2_sd", "m2"),
    ]
    assert state_query(analysis, state).sql(dialect="spark") == (
        "SELECT `trips`.`vendor` AS `vendor`, SUM(`trips`.`fare`) AS `s`, "
        "AVG(`trips`.`fare`) AS `a`, STDDEV_POP(`trips`.`fare`) AS `sd`, "
        "MAX(`trips`.`fare`) AS `hi`, COUNT(*) AS `_icemv_rows`, "
        "COUNT(`trips`.`fare`) AS `_icemv_count_s`, "
        "SUM(CAST(`trips`.`fare` AS DOUBLE)) AS `_icemv_sum_a`, "
        "COUNT(`trips`.`fare`) AS `_icemv_count_a`, COUNT(`trips`.`fare`) AS `_icemv_count_sd`, "
        "COALESCE(AVG(CAST(`trips`.`fare` AS DOUBLE)), 0) AS `_icemv_mean_sd`, "
        "COALESCE(VAR_POP(CAST(`trips`.`fare` AS DOUBLE)) * COUNT(`trips`.`fare`), 0) "
        "AS `_icemv_m2_sd` "
        "FROM `lake`.`nyc`.`trips` AS `trips` GROUP BY `trips`.`vendor`"
    )


def test_a_decimal_average_sums_in_its_own_type() -> None:
    analysis = _analysis("SELECT vendor, avg(fare) AS a FROM trips GROUP BY vendor")
    (_, total, _) = aggregate_state(analysis, decimal_sums={"_icemv_sum_a"})
    assert total.expression.sql(dialect="spark") == "SUM(`trips`.`fare`)"


def test_count_star_and_plain_aggregates_need_no_state() -> None:
    analysis = _analysis(
        "SELECT vendor, count(*) AS n, count(fare) AS c, min(fare) AS lo FROM trips GROUP BY 1"
    )
    assert aggregate_state(analysis) == ()


@pytest.mark.parametrize(
    ("sql", "stateless", "stateful"),
    [
        ("SELECT vendor, avg(fare) AS a FROM trips GROUP BY vendor",
         "recompute-groups", "merge-aggregates"),
        ("SELECT vendor, sum(fare) AS s FROM trips GROUP BY vendor",
         "recompute-groups", "merge-aggregates"),
        ("SELECT vendor, variance(fare) AS v FROM trips GROUP BY vendor",
         "recompute-groups", "merge-aggregates"),
        ("SELECT avg(fare) AS a, count(*) AS n FROM trips",
         "recompute-groups", "merge-aggregates"),
        # MIN under deletes: merged with state (the patch recomputes a group whose deleted
        # value is its MIN); `count(*), min(x)` alone keeps no state, so it recomputes.
        ("SELECT vendor, min(fare) AS lo FROM trips GROUP BY vendor",
         "recompute-groups", "merge-aggregates"),
        ("SELECT vendor, avg(fare) AS a FROM trips GROUP BY vendor HAVING count(*) > 1",
         "recompute-groups", "recompute-groups"),
    ],
)  # fmt: skip
def test_state_lets_deletes_merge(sql: str, stateless: str, stateful: str) -> None:
    analysis = _analysis(sql)
    assert analysis.aggregate_strategy(with_deletes=True) == stateless
    assert analysis.aggregate_strategy(with_deletes=True, stateful=True) == stateful


def test_the_reserved_prefix() -> None:
    assert is_state_column("_icemv_rows")
    assert is_state_column("_ICEMV_sum_x")
    assert not is_state_column("__icemv_w")
    assert not is_state_column("icemv_x")
