"""Outer joins whose padded rows a filter drops (sql/outer_joins.py): no catalog, no JVM."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from icemv.sql.outer_joins import never_true, outer_joins_to_inner

T2 = frozenset({"t2"})


def _simplified(sql: str) -> tuple[str, list[str]]:
    notes: list[str] = []
    tree = sqlglot.parse_one(sql, read="spark")
    assert isinstance(tree, exp.Query)
    return outer_joins_to_inner(tree, notes).sql(dialect="spark"), notes


@pytest.mark.parametrize(
    "predicate",
    [
        "t2.n > 1",
        "t2.n IN (NULL, 4)",
        "t2.n IS NOT NULL",
        "NOT t2.flag",
        "t2.flag",
        "upper(t2.g) LIKE 'A%'",
        "CAST(t2.n AS STRING) = t1.s",
        "t2.n + t1.n BETWEEN 1 AND 2",
        "t1.n > 1 AND t2.n * 2 <> 0",
        "(t2.n > 1 OR abs(t2.m) < 3)",
        "t2.n IN (SELECT s.k FROM s)",
    ],
)
def test_predicates_that_drop_padded_rows(predicate: str) -> None:
    assert never_true(sqlglot.parse_one(predicate, read="spark"), T2), predicate


@pytest.mark.parametrize(
    "predicate",
    [
        "t2.n IS NULL",
        "NOT (t2.n BETWEEN 1 AND 2)",  # NOT FALSE is TRUE
        "NOT (t2.n IN (1, 2))",
        "coalesce(t2.n, 1) = 1",
        "t2.n <=> t1.n",
        "t2.n > 1 OR t1.n > 1",
        "CASE WHEN t2.n > 1 THEN TRUE ELSE TRUE END",
        "EXISTS (SELECT 1 FROM s WHERE s.k = t2.k)",
        "concat(t2.g, 'x') = 'x'",  # not in the strict list: assumed to make a value
        "t1.n > 1",
    ],
)
def test_predicates_that_may_keep_padded_rows(predicate: str) -> None:
    assert not never_true(sqlglot.parse_one(predicate, read="spark"), T2), predicate


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT * FROM a t1 LEFT JOIN b t2 ON t1.k = t2.k WHERE t2.n > 0",
            "SELECT * FROM a AS t1 JOIN b AS t2 ON t1.k = t2.k WHERE t2.n > 0",
        ),
        (  # the left side's NULLs: a FULL JOIN keeps its left rows only
            "SELECT * FROM a t1 FULL OUTER JOIN b t2 ON t1.k = t2.k WHERE t1.n > 0",
            "SELECT * FROM a AS t1 LEFT JOIN b AS t2 ON t1.k = t2.k WHERE t1.n > 0",
        ),
        (
            "SELECT * FROM a t1 FULL JOIN b t2 ON t1.k = t2.k WHERE t2.n > 0",
            "SELECT * FROM a AS t1 RIGHT JOIN b AS t2 ON t1.k = t2.k WHERE t2.n > 0",
        ),
        (  # a later inner join's ON drops a RIGHT JOIN's padding of every earlier table
            "SELECT * FROM a t1 JOIN x t0 ON t0.k = t1.k RIGHT JOIN b t2 ON t1.k = t2.k "
            "JOIN c t3 ON t0.z = t3.z",
            "SELECT * FROM a AS t1 JOIN x AS t0 ON t0.k = t1.k JOIN b AS t2 ON t1.k = t2.k "
            "JOIN c AS t3 ON t0.z = t3.z",
        ),
    ],
)
def test_outer_joins_become_the_joins_they_equal(sql: str, expected: str) -> None:
    simplified, notes = _simplified(sql)
    assert simplified == expected
    assert notes and "NULL-padded" in notes[0]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM a t1 LEFT JOIN b t2 ON t1.k = t2.k WHERE t2.n IS NULL",  # an anti join
        "SELECT * FROM a t1 LEFT JOIN b t2 ON t1.k = t2.k WHERE t1.n > 0",
        "SELECT * FROM a t1 LEFT JOIN b t2 ON t1.k = t2.k LEFT JOIN c t3 ON t2.z = t3.z",
        "SELECT * FROM a t1 LEFT SEMI JOIN b t2 ON t1.k = t2.k WHERE t1.n > 0",
        # The filter is on the outer query's rows, not on the derived table's join.
        "SELECT * FROM (SELECT t2.n FROM a t1 LEFT JOIN b t2 ON t1.k = t2.k) q WHERE q.n > 0",
        # A subquery's WHERE names its own t2, not the join's.
        "SELECT * FROM a t1 LEFT JOIN b t2 ON t1.k = t2.k "
        "WHERE EXISTS (SELECT 1 FROM c t2 WHERE t2.n > 0)",
    ],
)
def test_outer_joins_that_stay(sql: str) -> None:
    simplified, notes = _simplified(sql)
    assert simplified == sqlglot.parse_one(sql, read="spark").sql(dialect="spark")
    assert notes == []
