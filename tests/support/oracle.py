"""The correctness oracle: storage == the view SQL evaluated at the recorded snapshots."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from icemv.identifiers import Identifier, quote_part
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.layout import StorageLayout
from icemv.mv.model import load_materialized_view
from icemv.sql.pinning import pin_sources


def _normalized_value(value: Any) -> Any:
    # Float sums may differ in the last bits with evaluation order.
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, list):  # COLLECT_LIST's order is Spark's: compare as a multiset
        items = [_normalized_value(v) for v in value]
        return tuple(sorted(items, key=lambda v: (v is None, repr(v))))
    return value


def _normalized(row: Any) -> tuple[Any, ...]:
    return tuple(_normalized_value(v) for v in row)


def as_multiset(rows: Iterable[Any]) -> Counter[Any]:
    """Rows as the oracle compares them: a multiset, floats rounded (`_normalized`)."""
    return Counter(map(_normalized, rows))


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
    # A reader of the view reads the storage table by the view's columns (state aside).
    columns = ", ".join(quote_part(c) for c in StorageLayout.of(storage).view_columns)
    actual = spark.sql(
        f"SELECT {columns} FROM {lakehouse.quoted(mv.storage)} VERSION AS OF {record.snapshot_id}"
    ).collect()
    return as_multiset(actual), as_multiset(expected)


def _close(left: tuple[Any, ...], right: tuple[Any, ...]) -> bool:
    """Equal, floats (rounded to 6 decimals) within one unit of the 6th decimal or a
    relative 1e-9: merged sums and deviations are computed in another order than a full
    evaluation, and rounding can fall either side of a digit."""
    if len(left) != len(right):
        return False
    for a, b in zip(left, right, strict=True):
        if isinstance(a, float) and isinstance(b, float):
            if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1.5e-6):
                return False
        elif a != b:
            return False
    return True


def _tolerant_difference(
    actual: Counter[Any], expected: Counter[Any]
) -> tuple[Counter[Any], Counter[Any]]:
    """What is left of each side once rows equal up to float tolerance are paired off."""
    only_actual, only_expected = actual - expected, expected - actual
    for row in list(only_actual.elements()):
        match = next((other for other in only_expected if _close(row, other)), None)
        if match is not None:
            only_actual[row] -= 1
            only_expected[match] -= 1
            only_expected = +only_expected
    return +only_actual, only_expected


def oracle_difference(lakehouse: Lakehouse, identifier: Identifier) -> str | None:
    """What differs between the storage table and the view SQL at the recorded snapshots,
    or None when they are equal (floats within tolerance, everything else exactly)."""
    only_actual, only_expected = _tolerant_difference(*storage_and_oracle(lakehouse, identifier))
    if not only_actual and not only_expected:
        return None
    return f"only in storage: {only_actual}\n  only in oracle: {only_expected}"


def assert_matches_oracle(lakehouse: Lakehouse, identifier: Identifier) -> None:
    difference = oracle_difference(lakehouse, identifier)
    assert difference is None, (
        f"storage differs from the view SQL at the recorded snapshots:\n  {difference}"
    )


def spark_writes_only(lakehouse: Lakehouse) -> Lakehouse:
    """The same lakehouse, but every storage patch goes through a Spark write (MERGE)."""
    config = lakehouse.config
    refresh = config.refresh.model_copy(update={"driver_commit_max_rows": 0})
    return Lakehouse(config.model_copy(update={"refresh": refresh}))
