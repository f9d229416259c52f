"""What the portability gate (sql/portable/) admits since it stopped refusing DECIMAL
arithmetic past precision 38 and NOT IN under OR; the values themselves are checked against
Spark by tests/test_engine_corpus.py."""

from __future__ import annotations

import pytest
from sqlglot import parse_one

from icemv.errors import EngineRefusedError
from icemv.sql.portable import to_duckdb
from icemv.sql.spark_types import BOOLEAN, INT, SparkType

EDGE = {
    "edge": {
        "r": INT,
        "i": INT,
        "f": BOOLEAN,
        "h": SparkType("decimal", 38, 10),
        "n": SparkType("decimal", 7, 2),
        "q": SparkType("decimal", 20, 10),
    }
}


def _duckdb(sql: str) -> str:
    return to_duckdb(parse_one(sql, read="spark"), EDGE).sql


@pytest.mark.parametrize(
    ("expression", "spark_type"),
    [
        ("h * n", "DECIMAL(38, 6)"),  # precision 46, scale 12: 34 integer digits kept
        ("q * q", "DECIMAL(38, 17)"),  # precision 41, scale 20
        ("h * -3", "DECIMAL(38, 8)"),  # -3 is the literal DECIMAL(1, 0), as in Spark
        ("h - n", "DECIMAL(38, 9)"),  # precision 39, scale 10
    ],
)
def test_arithmetic_past_precision_38_is_the_exact_value_cast_to_sparks_type(
    expression: str, spark_type: str
) -> None:
    rendered = _duckdb(f"SELECT {expression} AS v FROM edge")
    assert rendered.endswith(f'AS {spark_type}) AS "v" FROM edge'), rendered


def test_arithmetic_whose_exact_value_needs_more_than_38_places_is_refused() -> None:
    with pytest.raises(EngineRefusedError, match="scale 40"):
        _duckdb("SELECT CAST(h AS DECIMAL(38, 20)) * CAST(h AS DECIMAL(38, 20)) AS v FROM edge")


@pytest.mark.parametrize(
    "where",
    [
        "e.i NOT IN (SELECT o.i FROM edge o)",
        "e.f OR NOT (e.i IN (SELECT o.i FROM edge o))",
        "e.r > 2 AND (e.i NOT IN (SELECT o.i FROM edge o WHERE o.r > e.r) OR e.f)",
        "CASE WHEN e.i IN (SELECT o.i FROM edge o) THEN e.f "
        "ELSE NOT (e.r IN (SELECT o.r FROM edge o)) END",
        "IF(e.f, e.i NOT IN (SELECT o.i FROM edge o), e.r > 1)",
    ],
)
def test_in_filtering_through_and_or_case_and_if_is_admitted(where: str) -> None:
    assert " IN (SELECT" in _duckdb(f"SELECT r AS k FROM edge e WHERE {where}")


@pytest.mark.parametrize(
    "sql",
    [
        # a NOT Spark's optimiser does not move (above a CASE)
        "SELECT r AS k, NOT (CASE WHEN e.f THEN e.i IN (SELECT o.i FROM edge o) END) AS a "
        "FROM edge e",
        "SELECT r AS k, coalesce(e.i IN (SELECT o.i FROM edge o), TRUE) AS a FROM edge e",
        "SELECT r AS k FROM edge e WHERE (e.i NOT IN (SELECT o.i FROM edge o)) = e.f",
        "SELECT r AS k FROM edge e WHERE coalesce(e.i IN (SELECT o.i FROM edge o), TRUE)",
        "SELECT r AS k FROM edge e WHERE CASE e.i IN (SELECT o.i FROM edge o) WHEN e.f THEN 1 "
        "ELSE 0 END = 1",
    ],
)
def test_in_subqueries_whose_nulls_show_are_refused(sql: str) -> None:
    with pytest.raises(EngineRefusedError, match="IN \\(SELECT"):
        _duckdb(sql)


@pytest.mark.parametrize(
    "select",
    [
        "e.i IN (SELECT o.i FROM edge o) AS a",
        "(e.f OR e.i IN (SELECT o.i FROM edge o WHERE o.r > e.r)) AS a",
        "CASE WHEN e.f THEN e.i IN (SELECT o.i FROM edge o) ELSE e.f END AS a",
        "NOT (e.i IN (SELECT o.i FROM edge o)) AS a",
    ],
)
def test_in_subquery_values_under_no_not_are_sparks_null_as_false(select: str) -> None:
    rendered = _duckdb(f"SELECT r AS k, {select} FROM edge e")
    assert "COALESCE(e.i IN (SELECT" in rendered or "COALESCE(NOT (e.i IN (SELECT" in rendered
    assert ", FALSE)" in rendered, rendered


def test_grouping_sets_render_as_themselves_with_grouping_cast_to_sparks_tinyint() -> None:
    rendered = _duckdb(
        "SELECT r, i, grouping(i) AS g, grouping_id() AS gid, count(*) AS c FROM edge "
        "GROUP BY GROUPING SETS ((r, i), (i), ()), ROLLUP(r)"
    )
    assert "GROUP BY GROUPING SETS ((r, i), (i), ()), ROLLUP (r)" in rendered, rendered
    assert 'CAST(GROUPING(i) AS TINYINT) AS "g"' in rendered
    assert 'GROUPING_ID() AS "gid"' in rendered


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT r, grouping(r) AS g FROM edge GROUP BY r", "without grouping sets"),
        ("SELECT r FROM edge GROUP BY GROUPING SETS (CUBE(r, i))", "nested grouping sets"),
        ("SELECT r FROM edge GROUP BY r WITH ROLLUP", "WITH ROLLUP"),
        ("SELECT r, grouping(r, i) AS g FROM edge GROUP BY CUBE(r, i)", "one expression"),
    ],
)
def test_grouping_sets_spark_alone_defines_are_refused(sql: str, why: str) -> None:
    with pytest.raises(EngineRefusedError, match=why):
        _duckdb(sql)


def test_any_value_keeps_nulls_as_sparks_first() -> None:
    assert 'FIRST(n) AS "v"' in _duckdb("SELECT r, any_value(n) AS v FROM edge GROUP BY r")
    with pytest.raises(EngineRefusedError):  # any_value(x, true): IGNORE NULLS
        _duckdb("SELECT r, any_value(n, true) AS v FROM edge GROUP BY r")


def test_outer_and_positional_generators_are_lateral_joins() -> None:
    rendered = _duckdb(
        "SELECT r, p, w, z FROM edge LATERAL VIEW OUTER posexplode(sequence(1, i)) e AS p, w "
        "LATERAL VIEW explode(sequence(1, w)) f AS z"
    )
    # both generators joins, in order: the second reads the first's column
    assert rendered.index("LEFT JOIN LATERAL") < rendered.index("CROSS JOIN LATERAL"), rendered
    assert 'CAST("__icemv_ordinal" - 1 AS INT) AS "p"' in rendered
    assert "WITH ORDINALITY" in rendered and rendered.endswith('AS "f"')
    plain = _duckdb("SELECT r, z FROM edge LATERAL VIEW explode(sequence(1, i)) f AS z")
    assert "CROSS JOIN UNNEST(" in plain and "LATERAL" not in plain


def test_order_by_limit_places_nulls_as_spark_and_refuses_floating_point_keys() -> None:
    rendered = _duckdb("SELECT r AS k FROM edge ORDER BY i, n DESC LIMIT 3")
    assert rendered.endswith("ORDER BY i NULLS FIRST, n DESC LIMIT 3"), rendered
    with pytest.raises(EngineRefusedError, match="floating-point"):
        _duckdb("SELECT r AS k FROM edge ORDER BY i / 2 LIMIT 2")
    with pytest.raises(EngineRefusedError, match="offset"):
        _duckdb("SELECT r AS k FROM edge ORDER BY r LIMIT 2 OFFSET 1")


def test_percentiles_are_sparks_interpolation_written_out() -> None:
    rendered = _duckdb(
        "SELECT f AS k, percentile(i, 0.25) AS a, percentile(q, 0.3) AS b, "
        "median(n) AS d FROM edge GROUP BY f"
    )
    assert "LIST_SORT(LIST(q), 'ASC', 'NULLS LAST')" in rendered, rendered
    assert "CAST('0.3' AS DOUBLE)" in rendered and "QUANTILE" not in rendered, rendered


@pytest.mark.parametrize(
    ("call", "why"),
    [
        ("percentile(i, 1.5)", "percentile at 1.5"),
        ("percentile(DISTINCT i, 0.25)", "DISTINCT"),
        ("median(f)", "MEDIAN of boolean"),
        ("percentile(i, array(0.25, 0.5))", "not one number"),
    ],
)
def test_other_percentiles_are_refused(call: str, why: str) -> None:
    with pytest.raises(EngineRefusedError, match=why):
        _duckdb(f"SELECT {call} AS v FROM edge")


@pytest.mark.parametrize(
    ("sql", "rendered"),
    [
        (
            "SELECT r AS k FROM edge e WHERE NOT (e.f OR e.i IN (SELECT o.i FROM edge o))",
            "WHERE (NOT (e.f) AND NOT (e.i IN (SELECT",
        ),
        (
            "SELECT r AS k, e.f AND NOT (e.f OR e.i IN (SELECT o.i FROM edge o)) AS a FROM edge e",
            "(e.f AND (NOT (e.f) AND COALESCE(NOT (e.i IN (SELECT",
        ),
        (
            "SELECT r AS k, NOT (NOT (e.i IN (SELECT o.i FROM edge o))) AS a FROM edge e",
            "(COALESCE(e.i IN (SELECT",
        ),
    ],
)
def test_nots_stand_where_sparks_optimiser_moves_them_onto_an_in(sql: str, rendered: str) -> None:
    assert rendered in _duckdb(sql), _duckdb(sql)
