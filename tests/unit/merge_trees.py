"""The merge trees of a one-source aggregate view over `trips (vendor, fare)`, grouped
by vendor, every aggregate's argument `fare`: its grouped delta read from a relation of
change rows (vendor, fare, weight) an executor holds."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pyiceberg.types import IcebergType
from sqlglot import exp

from icemv.refresh.patch.aggregates import _merge_trees, _MergeInputs, _MergeTrees
from icemv.sql.analysis import AggregateAnalysis, analyse
from icemv.sql.names import WEIGHT, argument_column, key_column
from icemv.sql.state import aggregate_state
from tests.unit.sources import Sources


def vendor_merge(
    sql: str,
    relation: str,
    with_deletes: bool,
    types: Mapping[str, IcebergType],
    decimal_sums: Collection[str] = (),
    floating_sums: Collection[str] = (),
) -> tuple[_MergeTrees, AggregateAnalysis, list[str]]:
    """The trees, the analysis and the storage columns (outputs, then state)."""
    analysis = analyse(Sources(tables={"nyc.trips": ("vendor", "fare")}), sql, ("nyc",))
    assert isinstance(analysis, AggregateAnalysis)
    state = aggregate_state(analysis, decimal_sums, floating_sums)
    outputs = [*analysis.output_columns, *(c.name for c in state)]
    arguments = [
        exp.alias_(exp.column("fare", quoted=True), argument_column(i), quoted=True)
        for i in range(len(analysis.aggregates))
    ]
    pre_delta = exp.select(
        exp.alias_(exp.column("vendor", quoted=True), key_column(0), quoted=True),
        *arguments,
        exp.column(WEIGHT, quoted=True),
    ).from_(exp.Table(this=exp.to_identifier(relation, quoted=True)))
    trees = _merge_trees(_MergeInputs(analysis, pre_delta, outputs, with_deletes, state, types))
    assert isinstance(trees, _MergeTrees), trees
    return trees, analysis, outputs
