"""The correctness oracle: storage == the view SQL evaluated at the recorded snapshots."""

from __future__ import annotations

from collections import Counter
from typing import Any

from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.model import load_materialized_view
from icemv.sql.pinning import pin_sources


def _normalized(row: Any) -> tuple[Any, ...]:
    # Float sums may differ in the last bits with evaluation order.
    return tuple(round(v, 6) if isinstance(v, float) else v for v in row)


def storage_and_oracle(
    lakehouse: Lakehouse, identifier: Identifier
) -> tuple[Counter[Any], Counter[Any]]:
    mv = load_materialized_view(lakehouse, identifier)
    storage = lakehouse.load_table(mv.storage)
    record = latest_refresh(storage)
    assert record is not None, f"{identifier} was never refreshed"
    at = {Identifier(s.namespace, s.name): s.snapshot_id for s in record.state.tables()}
    pinned = pin_sources(CatalogReads(lakehouse), mv.sql, mv.version.default_namespace, at=at)
    assert {s.snapshot_id for s in pinned.sources if s.type == "table"} <= set(at.values())
    spark = lakehouse.spark
    expected = spark.sql(pinned.sql).collect()
    actual = spark.sql(
        f"SELECT * FROM {lakehouse.quoted(mv.storage)} VERSION AS OF {record.snapshot_id}"
    ).collect()
    return Counter(map(_normalized, actual)), Counter(map(_normalized, expected))


def assert_matches_oracle(lakehouse: Lakehouse, identifier: Identifier) -> None:
    actual, expected = storage_and_oracle(lakehouse, identifier)
    assert actual == expected, (
        f"storage differs from the view SQL at the recorded snapshots:\n"
        f"  only in storage: {actual - expected}\n  only in oracle: {expected - actual}"
    )


def spark_writes_only(lakehouse: Lakehouse) -> Lakehouse:
    """The same lakehouse, but every storage patch goes through a Spark write (MERGE)."""
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"driver_commit_max_rows": 0})
    return Lakehouse(config.model_copy(update={"refresh": refresh}))
