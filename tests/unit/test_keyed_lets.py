"""KeyedMerge.lets: a value read several times is computed once per joined row by the
driver rewrite, and written out in place for MERGE; both mean the same rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from sqlglot import exp

from icemv.refresh.embedded.executor import DuckDBExecutor
from icemv.refresh.patch.keyed import LET, KeyedMerge, let, without_stored
from icemv.refresh.patch.model import PatchTarget
from icemv.refresh.patch.sqltree import coalesce, col, null_safe_eq, num, paren

STORED = pa.table(
    {"k": ["a", "b", "c"], "total": [10, 20, 30], "n": [1, 2, 3], "twice": [20, 40, 60]}
)
DELTA = pa.table({"k": ["a", "c", "d"], "d": [5, -30, 7], "dn": [1, -3, 1]})


def _spec(source: str, lets: bool, nested: bool = False) -> KeyedMerge:
    """total + d, read by two columns and the delete and suspect conditions (`nested`:
    `twice` a let of its own, reading the sum's)."""
    summed = exp.Add(
        this=coalesce(col("total", "t"), num(0)), expression=coalesce(col("d", "s"), num(0))
    )
    count = exp.Add(this=coalesce(col("n", "t"), num(0)), expression=col("dn", "s"))
    value = let("sum") if lets else summed
    twice = exp.Mul(this=paren(value.copy()), expression=num(2))
    updates = {
        "total": value.copy(),
        "n": count.copy(),
        "twice": let("twice") if nested else twice,
    }
    spec = KeyedMerge(
        source,
        null_safe_eq(col("k", "t"), col("k", "s")),
        ["k", "total", "n", "twice"],
        updates,
        [col("k", "s"), *[without_stored(v) for v in updates.values()]],
        exp.EQ(this=count.copy(), expression=num(0)),
        exp.GT(this=col("dn", "s"), expression=num(0)),
        ({"sum": summed, "twice": twice} if nested else {"sum": summed}) if lets else {},
    )
    return spec


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: str(row["k"]))


def _layered_and_inlined(
    nested: bool, suspect: exp.Expr
) -> tuple[exp.Query, list[dict[str, Any]], list[dict[str, Any]]]:
    """The content query with lets, and its rows beside those of the lets written out."""
    executor = DuckDBExecutor(1, "256MB", "UTC")
    try:
        stored = executor.add_rows("stored", STORED)
        source = executor.add_rows("source", DELTA)
        target = PatchTarget(None, None, "", 0, 100, held=stored)  # type: ignore[arg-type]
        with_lets = _spec(source, lets=True, nested=nested)
        query = with_lets.content(target, suspect)
        assert not [c for c in query.find_all(exp.Column) if c.table == LET]
        layered = executor.collect(query, 100)
        inlined = executor.collect(
            _spec(source, lets=False).content(target, with_lets.inlined(suspect)), 100
        )
        assert layered is not None and inlined is not None
        return query, _rows(layered), _rows(inlined)
    finally:
        executor.drop()


def test_the_rewrite_computes_lets_below_and_gives_the_inlined_rows() -> None:
    suspect = exp.GT(this=let("sum"), expression=num(12))
    query, layered, inlined = _layered_and_inlined(False, suspect)
    assert query.find(exp.Subquery) is not None
    assert layered == inlined
    assert {r["k"]: r["__icemv_status"] for r in layered} == {
        "a": "updated", "b": "kept", "c": "deleted", "d": "inserted",
    }  # fmt: skip
    assert {r["k"]: r["twice"] for r in layered}["d"] == 14  # no stored row
    assert [r["k"] for r in layered if r["__icemv_suspect"]] == ["a"]


def test_a_let_reading_a_let_is_computed_a_level_above_it() -> None:
    suspect = exp.GT(this=let("twice"), expression=num(24))
    query, layered, inlined = _layered_and_inlined(True, suspect)
    assert len(list(query.find_all(exp.Subquery))) >= 4  # j over j over the join
    assert layered == inlined
    assert {r["k"]: r["twice"] for r in layered} == {"a": 30, "b": 40, "d": 14, "c": 0}
    assert [r["k"] for r in layered if r["__icemv_suspect"]] == ["a"]
    nested = _spec("source", lets=True, nested=True)
    merged = nested.inlined(nested.updates["twice"])
    assert not [c for c in merged.find_all(exp.Column) if c.table == LET]
    assert nested.inlined(nested.inserts[3], stored=False).sql() == (
        '(((COALESCE(NULL, 0) + COALESCE("s"."d", 0))) * 2)'
    )


def test_merge_writes_lets_out_and_an_insert_has_no_stored_row() -> None:
    spec = _spec("source", lets=True)
    update = spec.inlined(spec.updates["twice"])
    assert not [c for c in update.find_all(exp.Column) if c.table == LET]
    assert {c.table for c in update.find_all(exp.Column)} == {"t", "s"}
    insert = spec.inlined(spec.inserts[3], stored=False)
    assert {c.table for c in insert.find_all(exp.Column)} == {"s"}
    assert insert.sql() == '((COALESCE(NULL, 0) + COALESCE("s"."d", 0))) * 2'
