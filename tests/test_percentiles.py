"""Exact percentiles per group: MEDIAN, PERCENTILE and PERCENTILE_CONT / PERCENTILE_DISC
WITHIN GROUP are maintained by recomputing the groups a change touches (they refreshed in
full before), and computed exactly: sqlglot's Spark rendering wrote PERCENTILE_CONT as
PERCENTILE_APPROX (sql/spark_dialect.py), which picks an input value where PERCENTILE_CONT
interpolates."""

from __future__ import annotations

from decimal import Decimal

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.refresh.policy import refresh_mv
from tests.conftest import CATALOG_KINDS
from tests.support.embedded import refreshed_mv
from tests.support.oracle import assert_matches_oracle, storage_and_oracle
from tests.support.tables import create_spark_table

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.matrix, CATALOG_KINDS]

VIEW = (
    "SELECT g, median(x) AS md, percentile(x, 0.25) AS p25, "
    "percentile_cont(0.9) WITHIN GROUP (ORDER BY amount) AS p90, "
    "percentile_disc(0.5) WITHIN GROUP (ORDER BY amount DESC) AS pd, count(*) AS n "
    "FROM m GROUP BY g"
)


def test_percentiles_are_exact_and_recompute_only_touched_groups(
    lakehouse: Lakehouse, namespace: str
) -> None:
    table = lakehouse.quoted(Identifier((namespace,), "m"))
    spark = lakehouse.spark
    create_spark_table(
        lakehouse,
        table,
        "g STRING, x DOUBLE, amount DECIMAL(10, 2)",
        "('a', 1.0, 1.00), ('a', 2.5, 2.50), ('a', 10.0, 10.00), ('b', 4.0, 4.00), "
        "('b', NULL, NULL), (NULL, 7.0, 7.00)",
    )
    mv = refreshed_mv(lakehouse, namespace, "pct", VIEW, policy="incremental")
    actual, _ = storage_and_oracle(lakehouse, mv)
    # Group a: 1, 2.5, 10. PERCENTILE_CONT(0.9) interpolates 2.5 + 0.8 * 7.5 = 8.5, where
    # PERCENTILE_APPROX answers 10; PERCENTILE_DISC(0.5) DESC is 2.5; 25 %: 1 + 0.5 * 1.5.
    assert ("a", 2.5, 1.75, 8.5, Decimal("2.50"), 3) in actual, actual
    for statement in (
        f"INSERT INTO {table} VALUES ('a', 3.0, 3.00), ('c', -1.0, -1.00)",
        f"DELETE FROM {table} WHERE x = 10.0",
        f"UPDATE {table} SET g = 'b' WHERE x = 1.0",
    ):
        spark.sql(statement)
        result = refresh_mv(lakehouse, mv)
        assert result.mode == "incremental", (statement, result)
        assert_matches_oracle(lakehouse, mv)
    actual, _ = storage_and_oracle(lakehouse, mv)
    # Group a is now 2.5, 3: DESC, 3 already holds half the rows.
    assert ("a", 2.75, 2.625, 2.95, Decimal("3.00"), 2) in actual, actual
