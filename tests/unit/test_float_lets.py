"""A floating-point SUM's and AVG's merged count, sum and error bound are lets
(aggregate_rules._error_rule): the merge gives the rows it gives with every let written
out in place, over inserts and deletes, a cancelling group sent to be recomputed either
way. On DuckDB, no JVM."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.types import DoubleType
from sqlglot import exp

from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.patch.aggregates import _MergeTrees
from icemv.refresh.patch.keyed import LET, STATUS, SUSPECT, KeyedMerge
from icemv.refresh.patch.model import PatchTarget
from icemv.sql.names import WEIGHT
from icemv.sql.state import ROUNDOFF
from tests.unit.merge_trees import vendor_merge

SQL = "SELECT vendor, count(*) AS n, sum(fare) AS s, avg(fare) AS a FROM trips GROUP BY vendor"

# "x": stored, one row of 1e16 deleted and one of 1 added (cancels: recomputed);
# "y": stored, values added and one deleted; "z": new.
CHANGES = pa.table(
    {
        "vendor": ["x", "x", "y", "y", "y", "z", "z"],
        "fare": [1e16, 1.0, 2.5, -0.25, 4.0, 0.1, None],
        WEIGHT: pa.array([-1, 1, 1, 1, -1, 1, 1], pa.int32()),
    }
)
STORED = pa.table(
    {
        "vendor": ["x", "y", "w"],
        "n": pa.array([2, 3, 1], pa.int64()),
        "s": [1e16 + 2.0, 10.0, 7.0],
        "a": [(1e16 + 2.0) / 2, 10.0 / 3, 7.0],
        "_icemv_count_s": pa.array([2, 3, 1], pa.int64()),
        "_icemv_error_s": [2 * 2.0**-53 * 2 * (1e16 + 2.0), 2 * 2.0**-53 * 3 * 10.0, 0.0],
        "_icemv_sum_a": [1e16 + 2.0, 10.0, 7.0],
        "_icemv_count_a": pa.array([2, 3, 1], pa.int64()),
        "_icemv_error_a": [2 * 2.0**-53 * 2 * (1e16 + 2.0), 2 * 2.0**-53 * 3 * 10.0, 0.0],
    }
)


def _trees(relation: str) -> _MergeTrees:
    types = {name: DoubleType() for name in ("s", "a", "_icemv_sum_a")}
    trees, _, outputs = vendor_merge(SQL, relation, True, types, floating_sums={"s", "a"})
    assert outputs == STORED.column_names
    return trees


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: str(row["vendor"]))


def _merged(executor: DuckDBExecutor, trees: _MergeTrees, inline: bool) -> list[dict[str, Any]]:
    target = PatchTarget(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        "",
        0,
        100,
        held=executor.add_rows("stored", STORED),
    )
    outputs = STORED.column_names
    spec = KeyedMerge(trees.delta, trees.on, outputs, trees.updates, trees.inserts,
                      trees.gone, trees.insert_when, trees.lets)  # fmt: skip
    suspects = trees.suspects
    if inline:  # every let written out where it is read, as a MERGE writes them
        suspects = spec.inlined(trees.suspects)
        spec = KeyedMerge(
            trees.delta,
            trees.on,
            outputs,
            {column: spec.inlined(value) for column, value in trees.updates.items()},
            [spec.inlined(value, stored=False) for value in trees.inserts],
            spec.inlined(trees.gone),
            spec.inlined(trees.insert_when, stored=False),
        )
    content = spec.content(target, suspects)
    lets = [c for c in content.find_all(exp.Column) if c.table == LET]
    assert not lets  # read by name from the SELECT under them, or written out
    rows = executor.collect(content, 100)
    assert rows is not None
    return _rows(rows.select([*outputs, STATUS, SUSPECT]))


def test_the_merge_with_lets_is_the_merge_written_out() -> None:
    executor = DuckDBExecutor(1, "256MB", "UTC")
    try:
        trees = _trees(executor.add_rows("delta", CHANGES))
        for index in (1, 2):  # the SUM's and the AVG's
            named = {f"__icemv_count{index}", f"__icemv_sum{index}", f"__icemv_bound{index}"}
            assert named <= set(trees.lets)
        with_lets = _merged(executor, trees, inline=False)
        written_out = _merged(executor, trees, inline=True)
    finally:
        executor.drop()
    assert with_lets == written_out
    rows = {r["vendor"]: r for r in with_lets}
    assert rows["x"][SUSPECT]  # 1e16 + 2 - 1e16 + 1: the bound does not vouch for 3.0
    assert not any(rows[v][SUSPECT] for v in ("w", "y", "z"))
    assert (rows["y"]["n"], rows["y"]["s"], rows["y"]["a"]) == (4, 8.25, 8.25 / 4)
    assert rows["y"]["_icemv_count_s"] == 4 and rows["y"]["_icemv_count_a"] == 4
    # the stored bound plus 2u ((terms + 2) * sum|terms| + 2 |stored sum|)
    grown = ROUNDOFF * ((3 + 2) * (2.5 + 0.25 + 4.0) + 2 * 10.0)
    for error in ("_icemv_error_s", "_icemv_error_a"):
        stored_bound = STORED.column(error)[1].as_py()
        assert rows["y"][error] == pytest.approx(stored_bound + grown, rel=1e-9, abs=0)
    assert (rows["z"]["n"], rows["z"]["s"], rows["z"]["a"]) == (2, 0.1, 0.1)
    kept = {k: v for k, v in rows["w"].items() if k not in (STATUS, SUSPECT)}
    assert kept == STORED.slice(2).to_pylist()[0]
    assert [rows[v][STATUS] for v in ("w", "x", "y", "z")] == [
        "kept", "updated", "updated", "inserted",
    ]  # fmt: skip
