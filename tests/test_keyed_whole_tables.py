"""Affected keys with tables read whole (sql/key_check.py): LEFT JOIN chains on different
keys, and windows partitioned by a joined table's column, refresh incrementally (they
recomputed in full before), equal to the view SQL evaluated by Spark at the recorded
snapshots, on DuckDB and on Spark.

Every table of the chain moves in turn and together: appends of first matches and of
NULL keys, deletes of a dimension's last match (the padded row comes back), updates that
change a join key (an order moves to another customer, a customer to another nation).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.mv.explain import explain
from icemv.mv.model import load_materialized_view
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.embedded import refreshed_mv
from tests.support.oracle import assert_matches_oracle, spark_writes_only

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.matrix, CATALOG_KINDS]

TABLES = {
    "lines": "l_id BIGINT, l_order BIGINT, l_price DECIMAL(12, 2), l_ship TIMESTAMP",
    "orders": "o_id BIGINT, o_cust BIGINT, o_status STRING",
    "customers": "c_id BIGINT, c_nation BIGINT, c_segment STRING",
    "nations": "n_id BIGINT, n_name STRING",
}
ROWS = {
    "lines": [
        "(1, 10, 5.25, TIMESTAMP'2024-01-01 10:00:00')",
        "(2, 10, 7.50, TIMESTAMP'2024-01-01 11:30:00')",
        "(3, 11, 1.05, TIMESTAMP'2024-01-02 09:00:00')",
        "(4, 12, 9.99, NULL)",
        "(5, NULL, 3.00, TIMESTAMP'2024-01-03 00:00:00')",
        "(6, 99, 2.00, TIMESTAMP'2024-01-03 08:00:00')",
    ],
    "orders": ["(10, 100, 'O')", "(11, 101, 'F')", "(12, NULL, 'O')", "(13, 102, 'P')"],
    "customers": ["(100, 1, 'AUTO')", "(101, 2, 'BUILD')", "(102, NULL, 'AUTO')"],
    "nations": ["(1, 'FRANCE')", "(2, 'PERU')", "(3, 'CHINA')"],
}
CHAIN = (
    "SELECT l.l_id, l.l_price, o.o_status, c.c_segment, n.n_name FROM lines l "
    "LEFT JOIN orders o ON l.l_order = o.o_id LEFT JOIN customers c ON o.o_cust = c.c_id "
    "LEFT JOIN nations n ON c.c_nation = n.n_id"
)
CHAIN_AGGREGATE = (
    "SELECT n.n_name, c.c_segment, count(*) AS n, count(o.o_id) AS matched, "
    "sum(l.l_price) AS revenue, max(l.l_ship) AS last_ship FROM lines l "
    "LEFT JOIN orders o ON l.l_order = o.o_id LEFT JOIN customers c ON o.o_cust = c.c_id "
    "LEFT JOIN nations n ON c.c_nation = n.n_id GROUP BY n.n_name, c.c_segment"
)
# Top 2 orders per segment by revenue, every tie broken (the view is one bag).
WINDOW = (
    "SELECT * FROM (SELECT o.o_id, c.c_segment, o.o_status, "
    "rank() OVER (PARTITION BY c.c_segment ORDER BY o.o_status, o.o_id) AS rk, "
    "count(*) OVER (PARTITION BY c.c_segment) AS orders_in_segment, "
    "lag(o.o_id) OVER (PARTITION BY c.c_segment ORDER BY o.o_id) AS previous "
    "FROM orders o JOIN customers c ON o.o_cust = c.c_id) t WHERE rk <= 2"
)

# The joins around a table read whole, each once: on the padded side of a RIGHT JOIN, cross
# joined with its equality in the WHERE (over a LEFT JOIN's padded side), semi and anti
# joined, a window's key three hops away.
EDGES = {
    "right_join": (
        "SELECT c.c_id, c.c_segment, n.n_name, o.o_id FROM nations n RIGHT JOIN customers c "
        "ON c.c_nation = n.n_id LEFT JOIN orders o ON o.o_cust = c.c_id"
    ),
    # Once key or NULL; now an inner join, the WHERE's equality dropping the padded rows.
    "where_equality": (
        "SELECT o.o_id, c.c_segment, n.n_name FROM orders o LEFT JOIN customers c "
        "ON o.o_cust = c.c_id, nations n WHERE n.n_id = c.c_nation"
    ),
    "semi": (
        "SELECT c.c_id, count(*) OVER (PARTITION BY c.c_segment) AS peers FROM customers c "
        "LEFT SEMI JOIN nations n ON c.c_nation = n.n_id"
    ),
    "anti": (
        "SELECT c.c_id, count(*) OVER (PARTITION BY c.c_segment) AS peers FROM customers c "
        "LEFT ANTI JOIN nations n ON c.c_nation = n.n_id"
    ),
    "three_hops": (
        "SELECT l.l_id, c.c_segment, sum(l.l_price) OVER (PARTITION BY c.c_segment "
        "ORDER BY l.l_id) AS running FROM lines l JOIN orders o ON l.l_order = o.o_id "
        "JOIN customers c ON o.o_cust = c.c_id"
    ),
    # Key or NULL: a FULL JOIN's side, then an inner join on it by `=`.
    "full_then_inner": (
        "SELECT o.o_id, c.c_segment, k.c_nation FROM orders o FULL JOIN customers c "
        "ON o.o_cust = c.c_id JOIN customers k ON o.o_cust = k.c_id"
    ),
    # Key or NULL: a correlated EXISTS on the padded side of a LEFT JOIN.
    "padded_exists": (
        "SELECT l.l_id, o.o_status FROM lines l LEFT JOIN orders o ON l.l_order = o.o_id "
        "WHERE EXISTS (SELECT 1 FROM orders p WHERE p.o_id = o.o_id AND p.o_status <> 'P')"
    ),
    # A correlated NOT EXISTS over a table read whole, reached by its correlation.
    "whole_not_exists": (
        "SELECT c.c_id, rank() OVER (PARTITION BY c.c_segment ORDER BY c.c_id) AS rk "
        "FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.o_cust = c.c_id "
        "AND o.o_status = 'P')"
    ),
    # A positive IN over a table read whole, reached through the IN.
    "whole_in": (
        "SELECT c.c_id, count(*) OVER (PARTITION BY c.c_segment) AS peers FROM customers c "
        "WHERE c.c_nation IN (SELECT n.n_id FROM nations n WHERE n.n_name <> 'PERU')"
    ),
    # A derived relation anchors a table read whole: nations reached through q's output.
    "derived_anchor": (
        "SELECT q.o_id, q.rn, n.n_name FROM (SELECT o.o_id, o.o_cust, c.c_nation, "
        "row_number() OVER (PARTITION BY o.o_cust ORDER BY o.o_id) AS rn FROM orders o "
        "JOIN customers c ON o.o_cust = c.c_id) q LEFT JOIN nations n ON q.c_nation = n.n_id"
    ),
    # Aggregates whose output lacks a group key: their groups kept as rows by that key.
    "groups_as_rows": (
        "SELECT count(*) AS n, sum(l.l_price) AS revenue, max(l.l_ship) AS last_ship "
        "FROM lines l GROUP BY l.l_order"
    ),
    "joined_groups_as_rows": (
        "SELECT max(o.o_status) AS top_status, count(*) AS n FROM orders o JOIN customers c "
        "ON o.o_cust = c.c_id GROUP BY c.c_segment HAVING count(*) > 1"
    ),
    # A non-equi join to a table read whole: linear in orders, recomputed when nations changes.
    "non_equi": (
        "SELECT o.o_id, o.o_status, n.n_name FROM orders o "
        "LEFT JOIN nations n ON o.o_cust < n.n_id * 40"
    ),
    # A UNION ALL whose branch filters by a subquery: linear in each branch's outer
    # table, recomputed when the subquery's table changes (not keyed).
    "union_filter": (
        "SELECT c.c_id AS id, c.c_segment AS label FROM customers c WHERE c.c_nation > 1 "
        "UNION ALL SELECT o.o_id AS id, o.o_status AS label FROM orders o "
        "WHERE o.o_cust NOT IN (SELECT n.n_id * 50 + 50 FROM nations n)"
    ),
    # A `<=>` from a padded side: an order without a customer matches a nation with a NULL
    # id through the NULL of its padding, which no customer row reaches: nations recomputes.
    "padded_null_safe": (
        "SELECT o.o_id, c.c_segment, n.n_name FROM orders o LEFT JOIN customers c "
        "ON o.o_cust = c.c_id LEFT JOIN nations n ON c.c_nation <=> n.n_id"
    ),
    # An uncorrelated NOT IN over a table read whole: recomputed when nations changes.
    "whole_not_in": (
        "SELECT c.c_id, count(*) OVER (PARTITION BY c.c_segment) AS peers FROM customers c "
        "WHERE c.c_nation NOT IN (SELECT n.n_id FROM nations n WHERE n.n_name <> 'PERU')"
    ),
    # Outer joins whose padded rows the WHERE drops are inner joins (sql/outer_joins.py):
    # a window partitioned by the padded side's column, and an aggregate over a FULL JOIN
    # and a non-equi LEFT JOIN (customers was recomputed on, the view refreshed in full).
    "filtered_left_window": (
        "SELECT l.l_id, o.o_status, c.c_segment, rank() OVER (PARTITION BY c.c_segment "
        "ORDER BY l.l_id) AS rk FROM lines l LEFT JOIN orders o ON l.l_order = o.o_id "
        "LEFT JOIN customers c ON o.o_cust = c.c_id WHERE c.c_segment <> 'BUILD'"
    ),
    "filtered_full_join": (
        "SELECT c.c_segment, count(*) AS n, sum(l.l_price) AS revenue FROM lines l "
        "FULL JOIN orders o ON l.l_order = o.o_id LEFT JOIN customers c "
        "ON o.o_cust < c.c_id WHERE upper(c.c_segment) LIKE 'A%' AND l.l_price > 0 "
        "GROUP BY c.c_segment"
    ),
}
# Views maintained without affected keys: linear in their tables (a subquery filter's table
# recomputed), their outer joins inner ones as a filter drops the padding.
LINEAR = ("union_filter", "filtered_full_join", "where_equality")
# What explain says each view reads whole (None: it reads no table whole).
WHOLE: dict[str, str | None] = {
    "left_chain": "c", "left_chain_aggregate": "c", "joined_window": "o",
    "full_then_inner": None, "padded_exists": None, "whole_not_exists": "o", "whole_in": "n",
    "whole_not_in": None, "groups_as_rows": None, "joined_groups_as_rows": "o",
    "derived_anchor": "n",
    "non_equi": "n (no equality",
    "union_filter": None,
    "padded_null_safe": "n (no equality",
    "filtered_full_join": None,
    "where_equality": None,
}  # fmt: skip
NULL_NATION = "(NULL, 'NOWHERE')"
# Views that recompute when a step since the last refresh has this text: any change to
# nations for a non-equi join or a NOT IN of the linear subquery rule, a NULL joining a
# keyed NOT IN's subquery (else its subqueries keep their values).
RECOMPUTED_ON = {
    "non_equi": "{nations}",
    "whole_not_in": NULL_NATION,
    "union_filter": "{nations}",
    "padded_null_safe": "{nations}",
}


@dataclass(frozen=True)
class _Step:
    statements: tuple[str, ...]

    def __call__(self, lakehouse: Lakehouse, name: Callable[[str], str]) -> None:
        for statement in self.statements:
            lakehouse.spark.sql(statement.format(**{t: name(t) for t in TABLES}))


def _sql(*statements: str) -> _Step:
    return _Step(statements)


# Each step moves one table or several; the view is refreshed and checked after each.
STEPS: list[tuple[str, _Step]] = [
    ("line appended to an order without a match", _sql(
        "INSERT INTO {lines} VALUES (7, 13, 4.00, TIMESTAMP'2024-01-04 12:00:00'), "
        "(8, 14, 1.00, NULL)")),
    ("order 14 appears: line 8 gains its first match", _sql(
        "INSERT INTO {orders} VALUES (14, 101, 'F')")),
    ("customer 101 moves to nation 3", _sql(
        "UPDATE {customers} SET c_nation = 3 WHERE c_id = 101")),
    ("nation 3 renamed, nation 1 deleted", _sql(
        "UPDATE {nations} SET n_name = 'CHINA!' WHERE n_id = 3",
        "DELETE FROM {nations} WHERE n_id = 1")),
    ("order 10 moves to customer 102 and a line is deleted", _sql(
        "UPDATE {orders} SET o_cust = 102 WHERE o_id = 10",
        "DELETE FROM {lines} WHERE l_id = 3")),
    ("customer 102 deleted: its orders lose their last match", _sql(
        "DELETE FROM {customers} WHERE c_id = 102")),
    ("every table at once, NULL keys included", _sql(
        "INSERT INTO {lines} VALUES (9, 12, 0.01, TIMESTAMP'2024-01-05 00:00:00')",
        "INSERT INTO {orders} VALUES (15, NULL, 'O'), (16, 100, 'P')",
        "INSERT INTO {customers} VALUES (102, 1, 'BUILD'), (103, NULL, NULL)",
        "INSERT INTO {nations} VALUES (1, 'FRANCE')")),
    ("a nation with a NULL id: every NOT IN over nations turns NULL", _sql(
        f"INSERT INTO {{nations}} VALUES {NULL_NATION}")),
]  # fmt: skip


def _tables(lakehouse: Lakehouse, namespace: str) -> Callable[[str], str]:
    def name(table: str) -> str:
        return lakehouse.quoted(Identifier((namespace,), table))

    for table, columns in TABLES.items():
        lakehouse.spark.sql(
            f"CREATE TABLE {name(table)} ({columns}) USING iceberg TBLPROPERTIES "
            "('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
            "'write.update.mode' = 'merge-on-read')"
        )
        lakehouse.spark.sql(f"INSERT INTO {name(table)} VALUES {', '.join(ROWS[table])}")
    return name


def _spark_only(lakehouse: Lakehouse) -> Lakehouse:
    """Deltas computed and written by Spark: the embedded engine off."""
    lakehouse = spark_writes_only(lakehouse)
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"embedded_max_rows": 0})
    return Lakehouse(config.model_copy(update={"refresh": refresh}))


VIEWS = {"left_chain": CHAIN, "left_chain_aggregate": CHAIN_AGGREGATE, "joined_window": WINDOW}


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_chains_and_joined_windows_refresh_incrementally(
    lakehouse: Lakehouse, namespace: str, engine: str
) -> None:
    name = _tables(lakehouse, namespace)
    runner = lakehouse if engine == "duckdb" else _spark_only(lakehouse)
    views = VIEWS | (EDGES if engine == "duckdb" else {})
    mvs = {
        view: refreshed_mv(
            lakehouse,
            namespace,
            view,
            sql,
            "incremental" if view in RECOMPUTED_ON else "incremental-strict",
        )
        for view, sql in views.items()
    }
    for view, mv in mvs.items():
        explained = str(explain(lakehouse, load_materialized_view(lakehouse, mv)))
        whole = WHOLE.get(view, "")
        keyed = view not in LINEAR

        assert not keyed or "affected keys" in explained, explained
        assert whole is None or f"read whole: {whole}" in explained, explained
    engines, modes = set(), []

    def steps_since(at: int) -> str:
        """The SQL of the steps since the last refresh."""
        since = max((a for a in refresh_after if a < at), default=-1) + 1
        return " ".join(" ".join(step.statements) for _, step in STEPS[since : at + 1])

    # On Spark (seconds a refresh), two refreshes, each over several steps and tables.
    refresh_after = range(len(STEPS)) if engine == "duckdb" else (3,)
    for at, (what, step) in enumerate(STEPS):
        step(lakehouse, name)
        if at not in refresh_after and at != len(STEPS) - 1:
            continue
        for view, mv in mvs.items():
            result = refresh_mv(runner, mv)
            if view in RECOMPUTED_ON and RECOMPUTED_ON[view] in steps_since(at):
                assert result.reason == "subquery-source-changed", (what, mv, result)
            else:
                assert result.mode in ("incremental", "no-op", "skipped"), (what, mv, result)
            assert_matches_oracle(lakehouse, mv)
            modes.append(result.mode)
            if result.mode == "incremental":
                engines.add((result.engine, result.engine_reason))
    assert {e for e, _ in engines} == {engine}, engines
    assert modes.count("incremental") >= (15 if engine == "duckdb" else 6), modes
