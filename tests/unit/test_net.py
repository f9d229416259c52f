"""Change rows netted by sql/net.py's tree, run by the embedded engine (DuckDB, in-process):
a rewrite's moved rows cancel on every column, NULLs alike, -0.0 apart from 0.0, NaN one."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.sql.names import WEIGHT
from icemv.sql.net import netted


def _net(rows: list[tuple[object, ...]]) -> set[tuple[object, ...]]:
    table = pa.table({
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "fare": pa.array([r[1] for r in rows], pa.float64()),
        WEIGHT: pa.array([r[2] for r in rows], pa.int32()),
    })  # fmt: skip
    executor = DuckDBExecutor(threads=1, memory_limit="64MB", time_zone="UTC")
    try:
        name = executor.add_rows("changes", table)
        relation = exp.Table(this=exp.to_identifier(name, quoted=True))
        tree = netted(relation, [("id", "value"), ("fare", "float")])
        result = executor.collect(tree, 100)
        assert result is not None and result.schema == table.schema
        return {(r["id"], repr(r["fare"]), r[WEIGHT]) for r in result.to_pylist()}
    finally:
        executor.drop()


def test_moved_rows_cancel_on_every_column() -> None:
    assert _net([
        (1, 2.0, 1), (1, 2.0, -1),  # moved: gone
        (2, None, 1), (2, None, -1),  # NULLs group together
        (3, 0.0, 1), (3, -0.0, -1),  # -0.0 is not 0.0: both stay
        (4, 5.0, -1), (4, 5.0, -1), (4, 5.0, 1),  # copies net to one deletion
        (5, float("nan"), 1), (5, float("nan"), -1),  # NaN is one value
        (6, 1.0, 1),
    ]) == {(3, "0.0", 1), (3, "-0.0", -1), (4, "5.0", -1), (6, "1.0", 1)}  # fmt: skip
