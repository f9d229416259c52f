"""The rewrites of sql/not_in.py and sql/setops.py agree with Spark SQL's own semantics,
NULLs included: each view SQL and the normalised query the refresh maintains, evaluated by
Spark on the same Iceberg tables, give the same rows, and NOT IN's truth table holds."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.sql.analysis import NotMaintainable, analyse
from tests.support.tables import create_trips

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

OUTER = [(1, "a", 1.0, None), (2, "b", None, None), (None, "a", 3.0, None), (1, None, 1.0, None)]
# The subquery side, by case: empty; values without NULL; a NULL among the values.
SUBQUERY_SIDES: dict[str, list[tuple[Any, ...]]] = {
    "empty": [],
    "values": [(1, "x", None, None), (3, "x", None, None)],
    "with-null": [(1, "x", None, None), (None, "x", None, None)],
}
# `SELECT id FROM trips WHERE id NOT IN (SELECT id FROM zones)` by Spark's NOT IN semantics.
NOT_IN_IDS = {"empty": [1, 2, None, 1], "values": [2], "with-null": []}


def _rows(lakehouse: Lakehouse, sql: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row) for row in lakehouse.spark.sql(sql).collect())


def _both(lakehouse: Lakehouse, namespace: str, sql: str) -> tuple[Counter[Any], Counter[Any]]:
    """The view SQL's rows and the maintained (normalised) query's rows."""
    analysis = analyse(CatalogReads(lakehouse), sql, (namespace,))
    assert not isinstance(analysis, NotMaintainable), analysis.details
    prefix = f"{lakehouse.catalog_name}.{namespace}"
    qualified = sql.replace("FROM trips", f"FROM {prefix}.trips").replace(
        "FROM zones", f"FROM {prefix}.zones"
    )
    return _rows(lakehouse, qualified), _rows(lakehouse, analysis.query.sql(dialect="spark"))


@pytest.mark.parametrize("case", list(SUBQUERY_SIDES))
def test_not_in_truth_table_and_its_rewrite(
    lakehouse: Lakehouse, namespace: str, case: str
) -> None:
    create_trips(lakehouse, namespace, rows=OUTER)
    create_trips(lakehouse, namespace, name="zones", rows=SUBQUERY_SIDES[case])
    for sql in (
        "SELECT id FROM trips WHERE id NOT IN (SELECT id FROM zones)",
        # correlated, and the NOT IN one conjunct among others
        "SELECT t.id, t.vendor FROM trips t WHERE t.fare > 0 AND t.id NOT IN "
        "(SELECT z.id FROM zones z WHERE z.vendor = 'x' OR z.vendor = t.vendor)",
        # under an aggregate
        "SELECT vendor, count(*) AS n FROM trips WHERE id NOT IN (SELECT id FROM zones) "
        "GROUP BY vendor",
    ):
        view, maintained = _both(lakehouse, namespace, sql)
        assert maintained == view, (case, sql)
    view, _ = _both(
        lakehouse, namespace, "SELECT id FROM trips WHERE id NOT IN (SELECT id FROM zones)"
    )
    assert view == Counter((i,) for i in NOT_IN_IDS[case])


def test_set_operations_match_spark_with_nulls(lakehouse: Lakehouse, namespace: str) -> None:
    create_trips(lakehouse, namespace, rows=[*OUTER, (None, "a", 3.0, None), (5, None, 2.0, None)])
    create_trips(
        lakehouse,
        namespace,
        name="zones",
        rows=[
            (None, "a", None, None),
            (1, None, None, None),
            (1, None, None, None),
            (7, "c", 1.0, None),
        ],
    )
    for sql in (
        "SELECT id, vendor FROM trips UNION SELECT id, vendor FROM zones",
        "SELECT id, vendor FROM trips INTERSECT SELECT id, vendor FROM zones",
        "SELECT id, vendor FROM trips EXCEPT SELECT id, vendor FROM zones",
        "SELECT id FROM zones EXCEPT (SELECT id FROM trips WHERE fare > 2 UNION ALL "
        "SELECT id FROM trips WHERE vendor IS NULL)",
        "WITH c AS (SELECT id, vendor FROM trips EXCEPT SELECT id, vendor FROM zones) "
        "SELECT * FROM c WHERE vendor > 'a'",
    ):
        view, maintained = _both(lakehouse, namespace, sql)
        assert maintained == view, sql
        assert view, sql  # each case keeps some row, so an empty answer cannot pass
