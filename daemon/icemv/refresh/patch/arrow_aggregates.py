"""An insert-only delta of a GROUP BY view merged into its storage rows, in Arrow.

The same merge as `aggregates.merge_aggregates_patch`, evaluated on the driver: the
appended rows pass the WHERE, give each row its group keys and aggregate arguments (the
pre-aggregation delta), are grouped with `Table.group_by().aggregate()` into the deltas
the merge rules name (aggregate_rules.py), and each touched group's stored row (read
with pyiceberg, filtered by the keys' bounds) is merged with its delta by the rules'
own expressions, compiled by sql/arrow_expr.py over `t` (stored) and `s` (delta). The
stored rows of touched groups are replaced by the merged ones, rewriting only the files
that hold them (found by the keys' bounds, as row_images.py finds row images), in one
driver commit.

Only COUNT, SUM, MIN, MAX and AVG (not over DECIMAL), group keys that are not floating
point (NaN and -0.0 group as Spark groups them, not as Python compares), no HAVING or
derived columns: everything else stays with Spark.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import Table
from pyiceberg.types import IcebergType
from sqlglot import exp

from icemv.errors import ArrowUnsupportedError
from icemv.refresh.commit.driver import conform_to_storage
from icemv.refresh.patch.aggregate_rules import merge_rules
from icemv.refresh.patch.arrow_rows import Stored, check_types, stored_rows, tuples
from icemv.refresh.patch.arrow_select import ArrowSelect, compile_select
from icemv.refresh.patch.model import DriverPatch
from icemv.sql.analysis import AggregateAnalysis
from icemv.sql.arrow_expr import ArrowExpr, Fields, compile_expr
from icemv.sql.names import WEIGHT, argument_column, key_column
from icemv.sql.state import DEVIATIONS, StateColumn

_MERGED = frozenset({"count_star", "count", "sum", "min", "max", "avg", *DEVIATIONS})
# The rules' delta aggregates, as Arrow's hash aggregations (`variance`: population).
_HASH: dict[type[exp.Expr], str] = {
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Count: "count",
    exp.Avg: "mean",
    exp.VariancePop: "variance",
}


@dataclass(frozen=True)
class _Part:
    """One hash aggregation a delta column is computed from."""

    input: ArrowExpr  # over the pre-aggregation rows
    function: str  # Arrow hash aggregation


@dataclass(frozen=True)
class _DeltaColumn:
    alias: str  # the rule's name for it (`s.alias`)
    value: ArrowExpr  # over the grouped parts (`_part_name`)


@dataclass(frozen=True)
class ArrowAggregateDelta:
    select: ArrowSelect
    keys: tuple[ArrowExpr, ...]
    arguments: tuple[tuple[str, ArrowExpr], ...]  # pre-aggregation column -> value
    parts: tuple[_Part, ...]
    deltas: tuple[_DeltaColumn, ...]
    key_outputs: tuple[str, ...]  # storage columns of the group keys, in key order
    values: tuple[ArrowExpr, ...]  # every storage column's merged value, storage order
    extremes: bool  # MIN or MAX: NaN orders differently in Spark
    # Under deletes: the group's rows after the merge (a group left with none goes) and
    # stored state that cannot be trusted (the groups are recomputed: Spark's work).
    rows: ArrowExpr | None = None
    unknown: tuple[ArrowExpr, ...] = ()
    # Deviations read the rows one per unit of weight (aggregate_rules.MergeRules.exploded).
    exploded: bool = False

    def patch(
        self, appended: pa.Table, storage: Table, snapshot_id: int, max_rows: int
    ) -> DriverPatch:
        rows = self.select.filtered(appended)
        if rows.num_rows == 0:
            return DriverPatch(0, 0, storage.schema().as_arrow().empty_table())
        grouped = self._grouped(rows)
        stored = self._stored(grouped, storage, snapshot_id, max_rows)
        merged = conform_to_storage(self._merge(grouped, stored.matched), storage)
        content = pa.concat_tables([*stored.survivors, merged])
        return DriverPatch(merged.num_rows, stored.matched.num_rows, content, stored.replaces)

    def merged(self, appended: pa.Table, stored: pa.Table) -> pa.Table:
        """The new storage row of every group the appended rows touch, merged with its row
        in `stored` (storage rows by storage column; other groups' rows are ignored)."""
        return self._merge(self._grouped(self.select.filtered(appended)), stored)

    def _merge(self, grouped: pa.Table, stored: pa.Table) -> pa.Table:
        """Each delta group beside its stored row (`t.*` NULL for a new group), merged by
        the rules' values."""
        key_outputs = list(self.key_outputs)
        where: dict[tuple[Hashable, ...], int] = {}
        for index, key in enumerate(tuples(stored.select(key_outputs))):
            where.setdefault(key, index)
        keys = grouped.select([key_column(i) for i in range(len(self.keys))])
        positions = pa.array([where.get(key) for key in tuples(keys)], pa.int64())
        aligned = stored.take(positions)
        columns = {f"s.{name}": grouped.column(name) for name in grouped.column_names}
        columns.update({f"t.{name}": aligned.column(name) for name in aligned.column_names})
        joined = pa.table(columns)
        if self.extremes:
            _refuse_nan(joined)
        matched = pc.is_valid(positions)  # the group has a stored row
        for unknown in self.unknown:
            if pc.any(pc.and_(matched, unknown.evaluate(joined))).as_py():
                raise ArrowUnsupportedError("stored state unknown: the groups are recomputed")
        merged = pa.Table.from_arrays(
            [v.evaluate(joined) for v in self.values], names=stored.column_names
        )
        if self.rows is None:
            return merged
        # A group left with no row goes (a new group only comes with rows).
        return merged.filter(pc.greater(self.rows.evaluate(joined), 0))

    def _grouped(self, rows: pa.Table) -> pa.Table:
        """One row per touched group: `s`'s key columns and every rule's delta."""
        pre: dict[str, pa.Array | pa.ChunkedArray] = {
            key_column(i): k.evaluate(rows) for i, k in enumerate(self.keys)
        }
        pre.update({name: value.evaluate(rows) for name, value in self.arguments})
        if WEIGHT in rows.column_names:  # signed change rows (arrow_changes.py)
            pre[WEIGHT] = rows.column(WEIGHT)
        else:  # appended rows: every row +1
            pre[WEIGHT] = pa.repeat(pa.scalar(1, pa.int32()), rows.num_rows)
        pre_delta = pa.table(pre)
        if self.exploded:
            pre_delta = _one_per_unit(pre_delta)
        inputs = pa.table(
            {
                **{key_column(i): pre_delta.column(key_column(i)) for i in range(len(self.keys))},
                **{_part_name(n): p.input.evaluate(pre_delta) for n, p in enumerate(self.parts)},
            }
        )
        if self.extremes:
            _refuse_nan(inputs)
        keys = [key_column(i) for i in range(len(self.keys))]
        grouped = inputs.group_by(keys, use_threads=False).aggregate(
            [(_part_name(n), p.function) for n, p in enumerate(self.parts)]
        )
        parts = pa.table(
            {
                _part_name(n): grouped.column(f"{_part_name(n)}_{p.function}")
                for n, p in enumerate(self.parts)
            }
        )
        columns = {k: grouped.column(k) for k in keys}
        for d in self.deltas:
            columns[d.alias] = d.value.evaluate(parts)
        return pa.table(columns)

    def _stored(self, grouped: pa.Table, storage: Table, snapshot_id: int, max_rows: int) -> Stored:
        """The stored rows of the touched groups, and the files holding them (each is
        replaced by its other rows)."""
        key_outputs = list(self.key_outputs)
        keys = grouped.select([key_column(i) for i in range(len(self.keys))])
        keys = keys.rename_columns(key_outputs)
        wanted = set(tuples(keys))

        def hit(rows: pa.Table) -> pa.Array:
            return pa.array([key in wanted for key in tuples(rows.select(key_outputs))])

        return stored_rows(storage, snapshot_id, keys, max_rows, hit)


def compile_aggregate_delta(
    analysis: AggregateAnalysis,
    source: pa.Schema,
    storage: pa.Schema,
    state: Sequence[StateColumn],
    types: Mapping[str, IcebergType],
    dimensions: Mapping[str, pa.Schema] | None = None,
    with_deletes: bool = False,
) -> ArrowAggregateDelta:
    """The merge over `source` joined with `dimensions` (arrow_select.py); the caller
    checked that the delta is not keyed for the sources that moved. `with_deletes`: the
    change rows carry signed weights (arrow_changes.py)."""
    funcs = {a.func for a in analysis.aggregates}
    if funcs - _MERGED or analysis.having or analysis.derived:
        raise ArrowUnsupportedError(f"aggregates {', '.join(sorted(funcs - _MERGED))} recompute")
    if funcs & {"avg", *DEVIATIONS} and not state:
        raise ArrowUnsupportedError("AVG or a deviation without state columns recomputes")
    select = compile_select(analysis.query, source, dimensions)
    keys = tuple(select.compile(k.expression) for k in analysis.keys)
    for key in keys:
        if pa.types.is_floating(key.type) or pa.types.is_decimal(key.type):
            raise ArrowUnsupportedError(f"a {key.type} group key")
    arguments = tuple(
        (argument_column(i), select.compile(a.argument))
        for i, a in enumerate(analysis.aggregates)
        if a.argument is not None
    )
    for name, argument in arguments:
        if pa.types.is_decimal(argument.type):
            raise ArrowUnsupportedError(f"a DECIMAL aggregate argument ({name})")
    pre_fields: dict[tuple[str, str], tuple[str, pa.DataType]] = {
        ("", key_column(i)): (key_column(i), k.type) for i, k in enumerate(keys)
    }
    pre_fields.update({("", n): (n, a.type) for n, a in arguments})
    pre_fields[("", WEIGHT)] = (WEIGHT, pa.int32())
    outputs = list(storage.names)
    rules = merge_rules(analysis, outputs, state, types)
    parts: list[_Part] = []
    deltas = tuple(
        _delta_column(alias, node, pre_fields, parts, rules.exploded)
        for alias, node in rules.deltas.items()
    )
    s_fields: dict[tuple[str, str], tuple[str, pa.DataType]] = {
        ("s", key_column(i)): (f"s.{key_column(i)}", k.type) for i, k in enumerate(keys)
    }
    s_fields.update({("s", d.alias): (f"s.{d.alias}", d.value.type) for d in deltas})
    fields = {**s_fields, **{("t", f.name): (f"t.{f.name}", f.type) for f in storage}}
    key_outputs = tuple(outputs[k.position] for k in analysis.keys)
    key_of = {name: i for i, name in enumerate(key_outputs)}
    values: list[ArrowExpr] = []
    for name in outputs:
        if name in key_of:
            values.append(compile_expr(exp.column(key_column(key_of[name]), table="s"), fields))
        elif name in rules.values:
            values.append(compile_expr(rules.values[name], fields))
        else:
            raise ArrowUnsupportedError(f"no merge rule for storage column {name}")
    check_types(values, storage)
    extremes = bool(funcs & {"min", "max"})
    rows: ArrowExpr | None = None
    unknown: tuple[ArrowExpr, ...] = ()
    if with_deletes:
        if extremes:
            raise ArrowUnsupportedError("MIN / MAX under deletes recompute their groups")
        if "sum" in funcs and not state:
            raise ArrowUnsupportedError("SUM under deletes without state columns")
        if keys:  # a global aggregate always keeps its one row
            if rules.rows is None:
                raise ArrowUnsupportedError("deletes without COUNT(*) or its state")
            rows = compile_expr(rules.rows, fields)
        unknown = tuple(compile_expr(u, fields) for u in rules.unknown)
    return ArrowAggregateDelta(
        select,
        keys,
        arguments,
        tuple(parts),
        deltas,
        key_outputs,
        tuple(values),
        extremes,
        rows,
        unknown,
        rules.exploded,
    )


def _refuse_nan(table: pa.Table) -> None:
    """Spark orders NaN above every number; Arrow's MIN / MAX skip it: leave it to Spark."""
    for column in table.columns:
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            raise ArrowUnsupportedError("NaN under MIN / MAX")


def _part_name(index: int) -> str:
    return f"__icemv_p{index}"


def _one_per_unit(rows: pa.Table) -> pa.Table:
    """Each row |weight| times, with weight +1 or -1 (the deviations' exploded delta)."""
    weights = rows.column(WEIGHT).to_pylist()
    if all(w in (1, -1) for w in weights):
        return rows
    copies = pa.array([i for i, w in enumerate(weights) for _ in range(abs(w))], pa.int64())
    exploded = rows.take(copies)
    signs = pc.sign(exploded.column(WEIGHT)).cast(pa.int32())
    return exploded.set_column(exploded.schema.get_field_index(WEIGHT), WEIGHT, signs)


def _delta_column(
    alias: str, node: exp.Expr, fields: Fields, parts: list[_Part], exploded: bool
) -> _DeltaColumn:
    """A rule's delta column: each aggregate in `node` becomes a hash aggregation (added
    to `parts`), and what surrounds them (COALESCE, products) is evaluated over those."""
    tree = node.copy()
    if exploded:  # one row per unit of weight: SIGN(weight) is the weight (int, not double)
        tree = tree.transform(
            lambda n: n.this if isinstance(n, exp.Sign) and _is_weight(n.this) else n
        )
    aggregates = [n for n in tree.find_all(exp.AggFunc) if n.find_ancestor(exp.AggFunc) is None]
    part_fields: dict[tuple[str, str], tuple[str, pa.DataType]] = {}
    for aggregate in aggregates:
        part = _part(aggregate, fields)
        name = _part_name(len(parts))
        parts.append(part)
        part_fields[("", name)] = (name, _aggregated(part))
        if aggregate is tree:
            tree = exp.column(name)
        else:
            aggregate.replace(exp.column(name))
    return _DeltaColumn(alias, compile_expr(tree, part_fields))


def _is_weight(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and node.name == WEIGHT


def _part(node: exp.Expr, fields: Fields) -> _Part:
    function = _HASH.get(type(node))
    if function is None:
        raise ArrowUnsupportedError(f"delta aggregate {node.sql(dialect='spark')[:60]}")
    value = compile_expr(node.this, fields)
    if function in ("min", "max") and not (
        pa.types.is_integer(value.type)
        or pa.types.is_float64(value.type)
        or pa.types.is_date32(value.type)
    ):
        raise ArrowUnsupportedError(f"{function.upper()} of {value.type}")
    if function in ("sum", "mean", "variance") and not (
        pa.types.is_integer(value.type) or pa.types.is_float64(value.type)
    ):
        raise ArrowUnsupportedError(f"{function.upper()} of {value.type}")
    return _Part(value, function)


def _aggregated(part: _Part) -> pa.DataType:
    """The type of a hash aggregation's result, as Spark's aggregate types it."""
    if part.function == "count":
        return pa.int64()
    if part.function == "sum":
        return pa.int64() if pa.types.is_integer(part.input.type) else pa.float64()
    if part.function in ("mean", "variance"):
        return pa.float64()
    return part.input.type
