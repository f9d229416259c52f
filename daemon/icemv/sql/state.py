"""Hidden state columns: what an aggregate MV keeps beside its own columns so that deletes
merge exactly instead of recomputing the touched groups from the sources.

The storage table holds the view's columns in the view's order, then state columns named
with the reserved prefix `_icemv_` (docs/format.md). A reader serving the view selects
the view's columns by name and never sees them. Each state column is an aggregate over
the view's input rows, per group, computed by the full refresh and merged by every
incremental one:

- `SUM(x)` as c: `_icemv_count_c` = COUNT(x), so the SUM turns NULL exactly when no
  non-NULL input is left;
- `AVG(x)` as c: `_icemv_sum_c` = SUM(x) (in DOUBLE unless x is DECIMAL, as Spark's AVG
  sums) and `_icemv_count_c` = COUNT(x);
- a floating-point `SUM(x)` or `AVG(x)` (its sum a DOUBLE) as c, also `_icemv_error_c`: a
  bound on how far the stored sum may be from the exact sum of the group's values
  (refresh/patch/aggregate_rules.py says how it grows and when it sends a group to be
  recomputed), so that deletes merge too;
- `STDDEV*` / `VAR*` (x) as c: `_icemv_count_c`, `_icemv_mean_c`, `_icemv_m2_c` (count,
  mean, sum of squared deviations), merged with Chan et al.'s pairwise formulas;
- without a `COUNT(*)` column: `_icemv_rows` = COUNT(*), so a group goes with its last row;
- with GROUPING SETS / ROLLUP / CUBE: `_icemv_grouping` = GROUPING_ID(), which grouping a
  row belongs to, so a NULL key value and a rolled-up key are different groups.

Without them (an MV created before they existed) AVG, the deviations and deletes under a
SUM recompute the touched groups from the sources, as before.

Pure: which state an MV has is read from its storage schema by the caller.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

from icemv.sql.analysis import AggregateAnalysis, AggregateColumn
from icemv.sql.memo import Memo

STATE_PREFIX = "_icemv_"
ROWS = f"{STATE_PREFIX}rows"
GROUPING = f"{STATE_PREFIX}grouping"
DEVIATIONS = frozenset({"stddev_samp", "stddev_pop", "var_samp", "var_pop"})

StateRole = Literal["rows", "grouping", "count", "sum", "mean", "m2", "error"]
# Twice the unit roundoff of a DOUBLE (2 * 2^-53): a sum of n values in any order is within
# (n - 1) * 2^-53 * sum(|x|) of the exact sum (Higham, "Accuracy and Stability of Numerical
# Algorithms", 4.2); twice that covers the rounding of the bound's own arithmetic.
ROUNDOFF = 2.3e-16


def is_state_column(name: str) -> bool:
    """Whether a storage column is icemv's state, not one of the view's columns."""
    return name.lower().startswith(STATE_PREFIX)


def state_name(role: StateRole, column: str | None = None) -> str:
    if role in ("rows", "grouping"):
        return f"{STATE_PREFIX}{role}"
    return f"{STATE_PREFIX}{role}_{column}"


@dataclass(frozen=True)
class StateColumn:
    name: str
    role: StateRole
    # The view's aggregate it serves (None: the group's row count or grouping id).
    aggregate: AggregateColumn | None
    # Its value over a group's input rows: what a full refresh computes.
    expression: exp.Expr


def roles_of(aggregate: AggregateColumn, bounded: bool = False) -> tuple[StateRole, ...]:
    """`bounded`: a SUM or AVG of floating-point values, whose sum keeps an error bound."""
    if aggregate.func == "sum":
        return ("count", "error") if bounded else ("count",)
    if aggregate.func == "avg":
        return ("sum", "count", "error") if bounded else ("sum", "count")
    if aggregate.func in DEVIATIONS:
        return ("count", "mean", "m2")
    return ()


def _as_double(argument: exp.Expr) -> exp.Expr:
    return exp.Cast(this=argument.copy(), to=exp.DataType.build("double"))


def _value(role: StateRole, argument: exp.Expr, decimal_sum: bool) -> exp.Expr:
    if role == "count":
        return exp.Count(this=argument.copy())
    if role == "sum":  # Spark's AVG sums DECIMAL as DECIMAL and everything else as DOUBLE
        return exp.Sum(this=argument.copy() if decimal_sum else _as_double(argument))
    zero = exp.Literal.number(0)
    if role == "error":  # Spark's own sum of the group: n values, sum |x|, any order
        spread = exp.Sum(this=exp.Abs(this=_as_double(argument)))
        count = exp.Cast(this=exp.Count(this=argument.copy()), to=exp.DataType.build("double"))
        bound = exp.Mul(
            this=exp.Mul(this=count, expression=spread),
            expression=exp.Literal.number(repr(ROUNDOFF)),
        )
        return exp.Coalesce(this=bound, expressions=[exp.Cast(this=zero, to=exp.DataType.build(
            "double"))])  # fmt: skip
    if role == "mean":
        return exp.Coalesce(this=exp.Avg(this=_as_double(argument)), expressions=[zero])
    # m2 = var_pop * n, 0 for an empty group (Spark keeps the same m2 internally).
    m2 = exp.Mul(this=exp.VariancePop(this=_as_double(argument)), expression=exp.Count(
        this=argument.copy()))  # fmt: skip
    return exp.Coalesce(this=m2, expressions=[zero])


def aggregate_state(
    analysis: AggregateAnalysis,
    decimal_sums: Collection[str] = (),
    floating_sums: Collection[str] = (),
) -> tuple[StateColumn, ...]:
    """Every state column an aggregate view keeps, in storage order.

    `decimal_sums`: the `_icemv_sum_*` columns whose argument is DECIMAL (their type in the
    storage table says so; at create, Spark's analysis of the query does). `floating_sums`:
    the output columns of the SUMs and AVGs that sum floating-point values and keep an
    error bound (an MV made before error bounds existed has none: its floating-point
    groups recompute under deletes, as before).

    Kept per process by the analysis's memo key and the two sets (building the values
    parses type names: ~0.7 ms of a small refresh here); the columns and their trees are
    read only, as every user copies what it puts in a tree of its own.
    """
    key = analysis.memo_key
    if key is not None:
        key = (key, frozenset(decimal_sums), frozenset(floating_sums))
        kept = _states.get(key)
        if kept is not None:
            return kept
    state = _state_columns(analysis, decimal_sums, floating_sums)
    if key is not None:
        _states.put(key, state)
    return state


_states: Memo[tuple[StateColumn, ...]] = Memo(1024)


def _state_columns(
    analysis: AggregateAnalysis, decimal_sums: Collection[str], floating_sums: Collection[str]
) -> tuple[StateColumn, ...]:
    columns: list[StateColumn] = []
    if analysis.grouping_sets:
        columns.append(StateColumn(GROUPING, "grouping", None, exp.GroupingId()))
    if not any(a.func == "count_star" for a in analysis.aggregates):
        columns.append(StateColumn(ROWS, "rows", None, exp.Count(this=exp.Star())))
    for aggregate in analysis.aggregates:
        if aggregate.argument is None:
            continue
        output = analysis.output_columns[aggregate.position]
        for role in roles_of(aggregate, output in floating_sums):
            name = state_name(role, output)
            value = _value(role, aggregate.argument, name in decimal_sums)
            columns.append(StateColumn(name, role, aggregate, value))
    return tuple(columns)


def state_query(analysis: AggregateAnalysis, state: Iterable[StateColumn]) -> exp.Select:
    """The view query with the state columns after the view's: what a full refresh writes."""
    query = analysis.query.copy()
    extra = [exp.alias_(column.expression.copy(), column.name, quoted=True) for column in state]
    query.set("expressions", [*query.expressions, *extra])
    return query


def present(state: Iterable[StateColumn], storage_columns: Collection[str]) -> tuple[
        StateColumn, ...]:  # fmt: skip
    """The state columns the storage table actually has (none for an MV made before)."""
    names = set(storage_columns)
    return tuple(column for column in state if column.name in names)
