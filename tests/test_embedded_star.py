"""Star joins on the embedded engine, their large sides read restricted to the delta's keys
(refresh/embedded/restrict.py): a fact table joined to two dimensions (one through a
second hop), refreshed after fact appends and deletes, dimension updates, deletes and key
changes, and both moving in one range; NULL keys on both sides, fact keys no dimension
has, a duplicated dimension key, an INT fact key against a BIGINT dimension key. Every
refresh equals the view SQL evaluated by Spark at the recorded snapshots, on DuckDB with
every table that may be read restricted so read (the cache bound too small to keep a
table whole), and a twin refreshed by Spark."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.refresh.embedded.reads import shared_cache
from icemv.refresh.embedded.restrict import explain_joined_reads
from tests.support.embedded import refresh_by, refreshed_mv
from tests.support.oracle import storage_and_oracle

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

STAR = (
    "SELECT s.region, p.category, CAST(f.ts AS DATE) AS day, count(*) AS n, "
    "sum(f.amount) AS total FROM sales f {join} stores s ON f.store_id = s.store_id "
    "{join} products p ON p.product = f.product GROUP BY s.region, p.category, CAST(f.ts AS DATE)"
)
VIEWS = {
    "inner_star": STAR.format(join="JOIN"),
    "left_star": STAR.format(join="LEFT JOIN"),
    "inner_rows": (
        "SELECT f.id, f.amount, s.region FROM sales f JOIN stores s "
        "ON s.store_id = f.store_id WHERE s.region <> 'r9'"
    ),
    "left_rows": (
        "SELECT f.id, f.product, s.region FROM sales f LEFT JOIN stores s "
        "ON f.store_id = s.store_id"
    ),
    # Two hops: regions meet the fact's change rows through stores.
    "chain": (
        "SELECT r.manager, count(*) AS n, sum(f.amount) AS total FROM sales f "
        "JOIN stores s ON f.store_id = s.store_id JOIN regions r ON r.region = s.region "
        "GROUP BY r.manager"
    ),
}
STEPS: list[tuple[str, list[str]]] = [
    (
        "fact append",
        [
            "INSERT INTO {sales} VALUES (100, 1, 'apple', 10.50, TIMESTAMP'2024-01-01 10:00:00'),"
            " (101, 2, 'kiwi', 3.25, TIMESTAMP'2024-01-02 11:00:00'),"
            " (102, NULL, 'apple', 7.00, TIMESTAMP'2024-01-01 12:00:00'),"
            " (103, 99, NULL, 1.00, TIMESTAMP'2024-01-03 09:00:00'),"
            " (104, 4, 'pear', 2.00, TIMESTAMP'2024-01-02 08:00:00')"
        ],
    ),
    ("fact delete", ["DELETE FROM {sales} WHERE id IN (3, 7, 100)"]),
    ("dimension update", ["UPDATE {stores} SET region = 'r2' WHERE store_id IN (1, 5)"]),
    ("dimension delete", ["DELETE FROM {stores} WHERE store_id = 2"]),
    ("dimension key change", ["UPDATE {stores} SET store_id = 99 WHERE store_id = 3"]),
    (
        "second dimension",
        [
            "INSERT INTO {products} VALUES ('kiwi', 'fruit'), (NULL, 'none')",
            "DELETE FROM {products} WHERE product = 'pear'",
        ],
    ),
    ("region update", ["UPDATE {regions} SET manager = 'Mo' WHERE region = 'r2'"]),
    (
        "fact and dimension",
        [
            "INSERT INTO {sales} VALUES (105, 5, 'apple', 4.75, TIMESTAMP'2024-01-04 10:00:00'),"
            " (106, 99, 'kiwi', 8.00, TIMESTAMP'2024-01-04 11:00:00')",
            "UPDATE {stores} SET region = 'r9' WHERE store_id = 4",
        ],
    ),
]


def _changed(statements: list[str]) -> set[str]:
    return {s.split("{")[1].split("}")[0] for s in statements}


def _configured(lakehouse: Lakehouse, **refresh: int) -> Lakehouse:
    config = lakehouse.config
    settings = config.refresh.model_copy(update=refresh)
    return Lakehouse(config.model_copy(update={"refresh": settings}))


def _tables(lakehouse: Lakehouse, namespace: str) -> dict[str, str]:
    names = {
        t: lakehouse.quoted(Identifier((namespace,), t))
        for t in ("sales", "stores", "products", "regions")
    }
    mor = ", ".join(f"'write.{op}.mode' = 'merge-on-read'" for op in ("delete", "update"))
    properties = f"TBLPROPERTIES ('format-version' = '2', {mor})"
    sql: Callable[[str], object] = lakehouse.spark.sql
    sql(
        f"CREATE TABLE {names['sales']} (id BIGINT, store_id INT, product STRING, "
        f"amount DECIMAL(12,2), ts TIMESTAMP) USING iceberg {properties}"
    )
    # 40 sales: stores 0..6 (6 has no store row), a NULL store every 9th row, products
    # with no row (plum) and NULL.
    sql(
        f"INSERT INTO {names['sales']} SELECT /*+ COALESCE(1) */ id, "
        "CASE WHEN id % 9 = 0 THEN NULL ELSE CAST(id % 7 AS INT) END, "
        "element_at(array('apple', 'pear', 'plum', NULL), CAST(id % 4 AS INT) + 1), "
        "CAST(id * 1.25 AS DECIMAL(12,2)), "
        "timestamp_seconds(1704067200 + id * 20000) FROM range(40)"
    )
    sql(
        f"CREATE TABLE {names['stores']} (store_id BIGINT, region STRING) USING iceberg "
        f"{properties}"
    )
    # Store 1 twice (its sales count twice under INNER), a NULL key, no store 6.
    sql(
        f"INSERT INTO {names['stores']} VALUES (0, 'r0'), (1, 'r1'), (1, 'r3'), (2, 'r2'), "
        "(3, 'r0'), (4, 'r1'), (5, NULL), (NULL, 'r2')"
    )
    sql(
        f"CREATE TABLE {names['products']} (product STRING, category STRING) USING iceberg "
        f"{properties}"
    )
    sql(f"INSERT INTO {names['products']} VALUES ('apple', 'fruit'), ('pear', 'fruit')")
    sql(
        f"CREATE TABLE {names['regions']} (region STRING, manager STRING) USING iceberg "
        f"{properties}"
    )
    sql(f"INSERT INTO {names['regions']} VALUES ('r0', 'Ann'), ('r1', 'Bo'), ('r2', 'Cy')")
    return names


def test_star_joins_refresh_on_duckdb_as_on_spark(lakehouse: Lakehouse, namespace: str) -> None:
    names = _tables(lakehouse, namespace)
    # No table stays in the cache whole, so every table the delta allows is read
    # restricted to its keys (a table it does not allow is read whole); tables read whole
    # are the default's tests (test_embedded_join.py).
    embedded = _configured(lakehouse, embedded_cache_bytes=1)
    spark = _configured(lakehouse, embedded_max_rows=0)
    mvs = {name: refreshed_mv(lakehouse, namespace, name, sql) for name, sql in VIEWS.items()}
    # `icemv mv explain` says how each change alone reads the other tables.
    joined = explain_joined_reads(CatalogReads(lakehouse), VIEWS["chain"], (namespace,))
    n = namespace
    assert (
        f"a change to {n}.regions alone: {n}.stores where region is among "
        f"{n}.regions.region; {n}.sales where store_id is among {n}.stores.store_id"
    ) in joined, joined
    twins = {
        name: refreshed_mv(lakehouse, namespace, f"{name}_spark", VIEWS[name])
        for name in ("inner_star", "left_star")
    }
    cache = shared_cache()
    restricted: dict[str, int] = {}
    for step, statements in STEPS:
        for statement in statements:
            lakehouse.spark.sql(statement.format(**names))
        before = cache.tables_restricted
        for name, mv in mvs.items():
            if not any(f" {table} " in VIEWS[name] for table in _changed(statements)):
                continue  # already fresh
            result = refresh_by(embedded, mv, "duckdb")
            assert result.engine_reason is None, (step, name, result)
        restricted[step] = cache.tables_restricted - before
        for name, twin in twins.items():
            if "regions" in _changed(statements):
                continue  # no star reads it
            refresh_by(spark, twin, "spark")
            assert (
                storage_and_oracle(lakehouse, twin)[0]
                == storage_and_oracle(lakehouse, mvs[name])[0]
            ), (step, name)
    # Each kind of change restricted some read; a change of both tables in one range
    # reads each other's terms whole, except a keyed delta's.
    assert all(restricted[step] > 0 for step, _ in STEPS), str(restricted)
    # A table past refresh.embedded_join_max_bytes, that fits the cache (so is not read
    # restricted): Spark computes the delta, and says why.
    lakehouse.spark.sql(STEPS[0][1][0].format(**names).replace("(100,", "(107,", 1))
    tight = _configured(lakehouse, embedded_join_max_bytes=1)
    result = refresh_by(tight, mvs["inner_star"], "spark")
    assert "refresh.embedded_join_max_bytes" in (result.engine_reason or ""), result
    actual, _ = storage_and_oracle(lakehouse, mvs["left_rows"])
    # 103's store 99 appeared with the key change (its region r0), 102's NULL store padded.
    assert (103, None, "r0") in actual and (102, "apple", None) in actual
