"""An insert-only delta reads every weight as the literal 1 (aggregate_rules.row_weight):
the grouped delta it merges is the one the general rules compute over the same weight-1
rows, without the explode and the tests of the weight's sign. On DuckDB, no JVM."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyiceberg.types import DecimalType
from sqlglot import exp

from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.patch.aggregates import _MergeTrees
from icemv.refresh.patch.keyed import STATUS, SUSPECT, KeyedMerge
from icemv.refresh.patch.model import PatchTarget
from icemv.sql.analysis import AggregateAnalysis
from icemv.sql.names import WEIGHT, key_column
from tests.unit.merge_trees import vendor_merge

SQL = (
    "SELECT vendor, count(*) AS n, sum(fare) AS s, avg(fare) AS a, stddev_pop(fare) AS sd, "
    "min(fare) AS lo, max(fare) AS hi FROM trips GROUP BY vendor"
)
TYPES = {
    "s": DecimalType(22, 2),
    "_icemv_sum_a": DecimalType(22, 2),
    "a": DecimalType(16, 6),
}
CHANGES = pa.table(
    {
        "vendor": ["x", "x", "y", "y", "y", None],
        "fare": pa.array(
            [Decimal("1.25"), None, Decimal("-3.10"), Decimal("7.00"), Decimal("0.05"), None],
            pa.decimal128(12, 2),
        ),
        WEIGHT: pa.array([1] * 6, pa.int32()),
    }
)


def _trees(with_deletes: bool, relation: str) -> tuple[_MergeTrees, AggregateAnalysis]:
    trees, analysis, _ = vendor_merge(
        SQL, relation, with_deletes, TYPES, decimal_sums={"_icemv_sum_a"}
    )
    return trees, analysis


# One stored group ("x"); the others are new.
STORED = pa.table(
    {
        "vendor": ["x"], "n": pa.array([2], pa.int64()),
        "s": pa.array([Decimal("4.00")], pa.decimal128(22, 2)),
        "a": pa.array([Decimal("2.000000")], pa.decimal128(16, 6)),
        "sd": [1.0], "lo": pa.array([Decimal("1.00")], pa.decimal128(12, 2)),
        "hi": pa.array([Decimal("3.00")], pa.decimal128(12, 2)),
        "_icemv_count_s": pa.array([2], pa.int64()),
        "_icemv_sum_a": pa.array([Decimal("4.00")], pa.decimal128(22, 2)),
        "_icemv_count_a": pa.array([2], pa.int64()), "_icemv_count_sd": pa.array([2], pa.int64()),
        "_icemv_mean_sd": [2.0], "_icemv_m2_sd": [2.0],
    }
)  # fmt: skip


def _rows(table: pa.Table, key: str = key_column(0)) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: str(row[key]))


def test_the_insert_only_merge_is_the_general_one() -> None:
    executor = DuckDBExecutor(1, "256MB", "UTC")
    try:
        relation = executor.add_rows("delta", CHANGES)
        stored = executor.add_rows("stored", STORED)
        target = PatchTarget(None, None, "", 0, 100, held=stored)  # type: ignore[arg-type]
        merged = []
        # Insert-only and general, the grouped delta registered first, and insert-only
        # with the delta read in the merge's own statement (`reads_whole`).
        for with_deletes, inline in ((False, False), (True, False), (False, True)):
            trees, _ = _trees(with_deletes, relation)
            source: str | exp.Query = trees.delta
            if not inline:
                source = executor.register("aggd", trees.delta)
            outputs = STORED.column_names
            spec = KeyedMerge(source, trees.on, outputs, trees.updates, trees.inserts,
                              trees.gone, trees.insert_when, trees.lets)  # fmt: skip
            content = executor.collect(spec.content(target, trees.suspects), 100)
            assert content is not None
            merged.append(_rows(content.select([*outputs, STATUS, SUSPECT]), "vendor"))
        assert merged[0] == merged[1] == merged[2]
        x = merged[0][1]  # None, "x", "y"
        assert (x["vendor"], x["n"], x["s"], x["lo"], x["hi"]) == (
            "x", 4, Decimal("5.25"), Decimal("1.00"), Decimal("3.00"),
        )  # fmt: skip
        assert [r[STATUS] for r in merged[0]] == ["inserted", "updated", "inserted"]
        assert not any(r[SUSPECT] for r in merged[0])
    finally:
        executor.drop()


def test_the_insert_only_delta_is_the_general_one_over_weight_one_rows() -> None:
    executor = DuckDBExecutor(1, "256MB", "UTC")
    try:
        relation = executor.add_rows("delta", CHANGES)
        insert_only, _ = _trees(False, relation)
        general, _ = _trees(True, relation)
        read = [c for e in insert_only.delta.expressions for c in e.find_all(exp.Column)]
        assert read and WEIGHT not in {c.name for c in read}
        assert insert_only.delta.find(exp.Lateral, exp.Unnest, exp.Explode) is None
        assert general.delta.find(exp.Lateral, exp.Unnest, exp.Explode) is not None
        fewer = executor.collect(insert_only.delta, 100)
        more = executor.collect(general.delta, 100)
        assert fewer is not None and more is not None
        # The general delta's columns of deleted rows (MIN/MAX's deleted extreme, the
        # deviation's deleted (n, mean, M2)) say none were: the insert-only rules read
        # none of them.
        dropped = set(more.column_names) - set(fewer.column_names)
        nothing_deleted = {
            "__icemv_dx4": None, "__icemv_dx5": None,
            "__icemv_dn3": 0, "__icemv_dmean3": 0.0, "__icemv_dm23": 0.0,
        }  # fmt: skip
        assert dropped == set(nothing_deleted)
        for row in more.select(sorted(dropped)).to_pylist():
            assert row == nothing_deleted
        assert _rows(fewer) == _rows(more.select(fewer.column_names))
        by_vendor = {r[key_column(0)]: r for r in fewer.to_pylist()}
        assert by_vendor["y"]["__icemv_dcount"] == 3
        assert by_vendor["x"]["__icemv_dc2"] == 1  # the AVG's non-NULL inputs
        assert by_vendor[None]["__icemv_dn1"] == 0  # the SUM's, none
        assert by_vendor["y"]["__icemv_d1"] == Decimal("3.95")
    finally:
        executor.drop()
