"""MIN and MAX under deletes (refresh/patch/aggregate_rules.py): with state, a delete that
spares each group's extreme merges (it recomputed the touched groups before, and a global
MIN/MAX refreshed in full); one that takes the extreme, or ties it, recomputes. Checked
against the oracle after each step, on DuckDB and on Spark."""

from __future__ import annotations

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.embedded import refreshed_mv
from tests.support.oracle import assert_matches_oracle, spark_writes_only
from tests.support.tables import create_spark_table

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.matrix, CATALOG_KINDS]

GROUPED = (
    "SELECT g, min(amount) AS lo, max(ts) AS last, max(name) AS top, sum(amount) AS total "
    "FROM m GROUP BY g"
)
# COUNT_IF merges as the COUNT of a CASE it is (sql/normalise.py): it recomputed before.
GLOBAL = (
    "SELECT min(amount) AS lo, max(ts) AS last, count(name) AS named, "
    "count_if(amount > 3) AS dear FROM m"
)

# (statement, whether the global view's refresh merges): every grouped refresh is
# incremental, merged or with the touched groups recomputed; the global one goes full when
# a delete takes its extreme.
STEPS = [
    ("DELETE FROM {m} WHERE amount = 2.50", True),  # group a's MAX(ts): a recomputed
    ("UPDATE {m} SET amount = 3.00 WHERE amount = 7.25", True),  # a NULL ts deleted
    ("DELETE FROM {m} WHERE amount = 1.00", False),  # the MIN of a and of all
    ("DELETE FROM {m} WHERE name = 'tie'", True),  # ties group b's MAX(ts): recomputed
    ("DELETE FROM {m} WHERE g IS NULL", False),  # the MAX(ts) of all
    ("INSERT INTO {m} VALUES ('a', -5.00, TIMESTAMP'2023-01-01 00:00:00', NULL)", True),
]


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_min_and_max_merge_deletes_that_spare_the_extreme(
    lakehouse: Lakehouse, namespace: str, engine: str
) -> None:
    table = lakehouse.quoted(Identifier((namespace,), "m"))
    spark = lakehouse.spark
    create_spark_table(
        lakehouse,
        table,
        "g STRING, amount DECIMAL(10, 2), ts TIMESTAMP, name STRING",
        "('a', 1.00, TIMESTAMP'2024-01-01 10:00:00', 'x'), "
        "('a', 2.50, TIMESTAMP'2024-01-02 10:00:00', 'y'), ('a', 7.25, NULL, NULL), "
        "('b', 4.00, TIMESTAMP'2024-02-01 00:00:00', 'tie'), "
        "('b', 9.00, TIMESTAMP'2024-02-01 00:00:00', 'z'), "
        "(NULL, 8.00, TIMESTAMP'2024-03-01 00:00:00', 'n')",
    )
    runner = lakehouse if engine == "duckdb" else spark_writes_only(lakehouse)
    if engine == "spark":
        config = runner.config
        refresh = config.refresh.model_copy(update={"embedded_max_rows": 0})
        runner = Lakehouse(config.model_copy(update={"refresh": refresh}))
    mvs = {
        "grouped": refreshed_mv(lakehouse, namespace, "grouped", GROUPED, "incremental"),
        "global": refreshed_mv(lakehouse, namespace, "global", GLOBAL, "incremental"),
    }
    for statement, merges in STEPS:
        spark.sql(statement.format(m=table))
        for view, mv in mvs.items():
            result = refresh_mv(runner, mv)
            assert_matches_oracle(lakehouse, mv)
            if view == "global" and not merges:
                assert (result.mode, result.reason) == ("full", "no-group-keys"), result
                continue
            assert result.mode == "incremental", (statement, view, result)
            # A merge that may recompute (a delete reaching the extreme) holds the sources.
            assert result.engine == engine, result
