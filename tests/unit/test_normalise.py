"""The normalisation passes on small trees (sql/normalise.py): no catalog, no JVM."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from icemv.sql.normalise import Normalised, normalise

SCHEMA = MappingSchema(
    {
        "lake": {
            "db": {
                "orders": {"id": "int", "k": "string", "x": "int", "ts": "int"},
                "dim": {"k": "string", "name": "string"},
            }
        }
    },
    dialect="spark",
)


def _normalised(sql: str) -> Normalised:
    tree = qualify(
        sqlglot.parse_one(sql, read="spark"),
        schema=SCHEMA,
        catalog="lake",
        db="db",
        dialect="spark",
        quote_identifiers=True,
    )
    assert isinstance(tree, exp.Query)
    return normalise(tree)


def _same(sql: str, expected: str) -> Normalised:
    """`sql` normalises to the same tree as the qualified `expected` (aliases aside)."""
    got = _normalised(sql)
    want = _normalised(expected)
    assert _plain(got.query) == _plain(want.query)
    return got


def _plain(query: exp.Query) -> str:
    """The SQL with table aliases that merging may rename spelled the same."""
    text = query.sql(dialect="spark")
    return text.replace("`orders_2`", "orders_2").replace("`", "")


def test_order_by_without_limit_is_dropped() -> None:
    got = _same("SELECT id FROM orders ORDER BY id", "SELECT id FROM orders")
    assert got.rewrites == ("ORDER BY without LIMIT dropped",)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT id FROM orders ORDER BY id LIMIT 3",
        "SELECT id, row_number() OVER (PARTITION BY k ORDER BY ts) AS rn FROM orders",
    ],
)
def test_an_order_that_matters_stays(sql: str) -> None:
    got = _normalised(sql)
    assert got.query.find(exp.Order) is not None
    assert got.rewrites == ()


def test_a_cte_chain_folds_into_one_aggregate() -> None:
    got = _same(
        "WITH a AS (SELECT k, x FROM orders WHERE x > 0), "
        "b AS (SELECT k, sum(x) AS s FROM a GROUP BY k) SELECT * FROM b",
        "SELECT k, sum(x) AS s FROM orders WHERE x > 0 GROUP BY k",
    )
    assert "CTE a inlined" in got.rewrites and "CTE b inlined" in got.rewrites
    assert got.query.find(exp.With, exp.Subquery) is None


def test_a_cte_read_twice_is_a_self_join() -> None:
    got = _normalised(
        "WITH a AS (SELECT k, x FROM orders WHERE x > 0) "
        "SELECT a1.k, a2.x FROM a a1 JOIN a a2 ON a1.k = a2.k"
    )
    tables = [t.name for t in got.query.find_all(exp.Table)]
    assert tables == ["orders", "orders"]
    assert got.query.find(exp.Subquery) is None
    assert len(list(got.query.find_all(exp.GT))) == 2  # each read keeps the CTE's filter


def test_a_filter_over_an_aggregate_becomes_having() -> None:
    got = _same(
        "SELECT k, s FROM (SELECT k, sum(x) AS s FROM orders GROUP BY k HAVING count(*) > 1) t "
        "WHERE s > 10",
        "SELECT k, sum(x) AS s FROM orders GROUP BY k HAVING count(*) > 1 AND sum(x) > 10",
    )
    assert got.rewrites == ("aggregate subquery lifted",)


def test_outer_expressions_over_an_aggregate_are_substituted() -> None:
    _same(
        "SELECT k, s / n AS mean FROM (SELECT k, sum(x) AS s, count(*) AS n FROM orders "
        "GROUP BY k) t",
        "SELECT k, sum(x) / count(*) AS mean FROM orders GROUP BY k",
    )


@pytest.mark.parametrize(
    "sql",
    [
        # The filter must see the window's value: it cannot move into the inner WHERE.
        "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY k ORDER BY ts DESC) AS rn "
        "FROM orders) t WHERE rn = 1",
        # Joined to another table: the aggregate stays a derived table.
        "SELECT t.k, d.name FROM (SELECT k, sum(x) AS s FROM orders GROUP BY k) t "
        "JOIN dim d ON t.k = d.k",
        # Aggregating the aggregate.
        "SELECT max(s) AS top FROM (SELECT k, sum(x) AS s FROM orders GROUP BY k) t",
    ],
)
def test_derived_tables_that_cannot_fold_stay(sql: str) -> None:
    assert _normalised(sql).query.find(exp.Subquery) is not None


def test_distinct_becomes_a_group_by_of_its_outputs() -> None:
    got = _same(
        "SELECT DISTINCT k, x + 1 AS y FROM orders WHERE x > 2",
        "SELECT k, x + 1 AS y FROM orders WHERE x > 2 GROUP BY k, x + 1",
    )
    assert got.rewrites == ("DISTINCT as GROUP BY with a row count",)


def test_distinct_in_a_cte_folds_too() -> None:
    _same(
        "WITH a AS (SELECT DISTINCT k FROM orders) SELECT k FROM a",
        "SELECT k FROM orders GROUP BY k",
    )


def test_distinct_over_groups_is_left_alone() -> None:
    got = _normalised("SELECT DISTINCT k, count(*) AS n FROM orders GROUP BY k")
    assert got.query.args.get("distinct") is not None
    assert got.rewrites == ()


def test_count_if_is_a_count_of_a_case() -> None:
    got = _same(
        "SELECT k, count_if(x > 1) AS n FROM orders GROUP BY k",
        "SELECT k, count(CASE WHEN x > 1 THEN 1 END) AS n FROM orders GROUP BY k",
    )
    assert got.rewrites == ("count_if(c) as count(CASE WHEN c THEN 1 END)",)


def test_an_outer_join_a_filter_empties_of_padding_is_inner() -> None:
    got = _same(
        "SELECT o.id, d.name FROM orders o LEFT JOIN dim d ON o.k = d.k WHERE d.name <> 'x'",
        "SELECT o.id, d.name FROM orders o JOIN dim d ON o.k = d.k WHERE d.name <> 'x'",
    )
    assert got.rewrites == ("LEFT JOIN d as JOIN: a filter drops its NULL-padded rows",)


def test_a_constant_in_a_distinct_is_no_group_key() -> None:
    got = _same(
        "SELECT DISTINCT k, 4 AS c, 'x' AS s, -1 AS m FROM orders",
        "SELECT k, 4 AS c, 'x' AS s, -1 AS m FROM orders GROUP BY k",
    )
    assert "constant GROUP BY keys dropped" in got.rewrites


def test_a_distinct_of_constants_only_stays() -> None:
    # GROUP BY 4 alone would read as an ordinal, and no GROUP BY gives a row on no input
    got = _normalised("SELECT DISTINCT 4 AS c FROM orders")
    assert got.query.args.get("distinct") is not None
    assert got.query.args.get("group") is None


def test_constant_group_keys_go_while_another_key_stays() -> None:
    _same(
        "SELECT k, 4 AS c, count(*) AS n FROM orders GROUP BY k, c",
        "SELECT k, 4 AS c, count(*) AS n FROM orders GROUP BY k",
    )
    # qualification writes a constant's alias as its ordinal (1): left alone, it is the only key
    got = _normalised("SELECT 4 AS c, count(*) AS n FROM orders GROUP BY c")
    assert got.query.args["group"].expressions == [exp.Literal.number(1)]
    assert got.rewrites == ()
