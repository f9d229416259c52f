"""How each aggregate of a view merges with its delta, one rule per aggregate function.

A rule names the columns it needs from the grouped delta (`s`, aggregates over the weighted
pre-aggregation rows) and the new value of each storage column it owns from the stored row
(`t`, NULL for a group the delta creates) and `s`. With hidden state columns
(sql/state.py) AVG, the deviations, a SUM losing its last input, MIN/MAX under deletes
that spare their extreme and a group losing its last row merge exactly; without them (an
MV made before they existed) only COUNT, SUM and insert-only MIN/MAX merge, as before.

MIN and MAX merge inserts as LEAST / GREATEST of the stored value and the inserted rows'
extreme. With state (the group's row count kept), deletes merge too: if every deleted
value is above the stored MIN (below the stored MAX), no row holding the MIN was deleted,
so the MIN of the rows left is the stored one (then LEAST with the inserts); a deleted value
at or past it (ties included, -0.0 and NaN compare as Spark's and DuckDB's ordering do, an
equal value counts), or a stored NULL with a deleted non-NULL value, makes the group a
suspect and the touched groups are recomputed. NULL arguments are not values of either.

Deviations merge with Chan, Golub and LeVeque's pairwise update of (count, mean, M2): the
deleted rows' (n, mean, M2) is taken out of the stored one, then the inserted rows' added.

DECIMAL SUM and AVG merge exactly in the aggregate's own type (sql/decimals.py): the delta
sums each row as it is (`-x` for a deleted one, the rows exploded to one per unit of
weight: `x * weight` would be typed past precision 38 and rounded), stored and delta sums
add without rounding, and a group whose sums overflow (stored NULL with inputs left, a
delta sum NULL with inputs, an addend too wide to add exactly) is recomputed. Spark's AVG
rounds sum / count once to its type; the merge divides, `sum / CAST(count AS DECIMAL(20,
0))`, and casts to AVG's type, which rounds the same when that division keeps at least
AVG's places, unless a group of billions of rows lands exactly half a unit away
(`decimals.half_way` says when and why; such a group is recomputed); otherwise the
touched groups are recomputed (`recompute` says why). The
merged sum and count, read by the quotient (whose DECIMAL division repeats each three
times), and the quotient, read by the value and by the half-way test, are lets
(`MergeRules.lets`, see keyed.KeyedMerge): the same value of the same joined row wherever
it is read, so naming it changes no result.

Floating-point SUM and AVG merge deletes through an error bound (`_icemv_error_c`,
sql/state.py). Every sum the stored value went through, Spark's first sum of the group and
each delta's sum added to it, is one recursive sum of signed terms: whatever the order, it
is within (terms - 1) * u * sum(|terms|) of the exact sum (u = 2^-53; Higham, 4.2). The
stored bound starts at n * 2u * sum(|x|) over the group (what a full refresh or a recomputed
group writes) and each merge adds 2u * ((delta terms + 2) * sum(|delta terms|) + 2 *
|stored sum|): the delta's own sum, and the one addition to the stored sum. A group whose
merged sum the bound does not vouch for is recomputed from the sources: one not finite,
or one whose bound exceeds both 1e-10 of its magnitude and four times the worst case of a
full recompute's own sum of its n values, n * u * |sum| for values of one sign (for
cancelling values that worst case is larger still; 1e16 + 1 - 1e16 has a bound near 4 for
a sum of 1, and recomputes). The others are within 1e-10 relative of the exact sum, or
within four times the error Spark's own recompute may have. A group whose last value goes
restarts at a bound of 0. The merged count and sum, which the bound's test reads again,
and the bound, read by its stored value and its test, are lets as above. Without the
bound (an MV made before it existed) and for the deviations, whose M2 cancels the same
way, deletes recompute the touched groups (`AggregateAnalysis.aggregate_strategy`,
`floating`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyiceberg.types import DecimalType, IcebergType
from sqlglot import exp

from icemv.mv.layout import spark_type
from icemv.refresh.patch.keyed import let
from icemv.refresh.patch.sqltree import case, coalesce, col, if_, num, paren, sum_
from icemv.sql import decimals
from icemv.sql.analysis import AggregateAnalysis, AggregateColumn
from icemv.sql.names import WEIGHT, argument_column
from icemv.sql.state import DEVIATIONS, ROUNDOFF, ROWS, StateColumn, state_name


@dataclass
class MergeRules:
    """The grouped delta's columns and every merged storage value, for one view."""

    deltas: dict[str, exp.Expr] = field(default_factory=dict)  # alias -> aggregate over rows
    values: dict[str, exp.Expr] = field(default_factory=dict)  # storage column -> new value
    # The group's row count after the merge (a group with 0 rows goes); None: not known.
    rows: exp.Expr | None = None
    # Stored state that cannot be trusted (written NULL): such groups are recomputed.
    unknown: list[exp.Expr] = field(default_factory=list)
    # Deviations and DECIMAL sums read the delta one row per unit of weight (`weight`).
    exploded: bool = False
    # Why no merge is exact for this view: its touched groups are recomputed instead.
    recompute: str | None = None
    # Values the others read several times, by name (`let(name)`, see KeyedMerge.lets).
    lets: dict[str, exp.Expr] = field(default_factory=dict)


def unit_weight() -> exp.Expr:
    """The weight of one of the rows a delta row is exploded into: +1 or -1, an INT."""
    return if_(exp.GT(this=col(WEIGHT), expression=num(0)), num(1), num(-1))


def row_weight(exploded: bool, insert_only: bool) -> exp.Expr:
    """The weight the grouped delta reads each of its rows with.

    Insert-only (the view delta removes no row: no source lost rows, not keyed), every
    change row is one appended row of weight 1 (refresh/embedded/reads.py and the Spark
    change reader write it so), and each delta row carries the weight of the change row it
    came from (sql/delta.py: inner joins, filters, projections, UNION ALL): every weight is
    the literal 1, and a delta exploded to one row per unit of weight is the delta itself.
    Written so, the delta's SQL drops the explode and every test of the weight's sign,
    which changes no value and plans faster (a DECIMAL delta of 1,000 rows: 1.9 -> 1.1 ms
    in DuckDB here)."""
    if insert_only:
        return num(1)
    return unit_weight() if exploded else col(WEIGHT)


def _by_sign(weight: exp.Expr, positive: exp.Expr, negative: exp.Expr) -> exp.Expr:
    """`positive` for a row of positive weight, else `negative`; without the test where the
    weight is the literal 1 (`row_weight`)."""
    if weight == num(1):
        return positive
    return if_(exp.GT(this=weight.copy(), expression=num(0)), positive, negative)


def _stored(name: str) -> exp.Column:
    return col(name, "t")


def _delta(alias: str) -> exp.Column:
    return col(alias, "s")


def _zero_if_new(name: str) -> exp.Expr:
    return coalesce(_stored(name), num(0))


def _is_null(expression: exp.Expr) -> exp.Expr:
    return exp.Is(this=expression, expression=exp.null())


def _not_null(expression: exp.Expr) -> exp.Expr:
    return exp.Not(this=_is_null(expression))


def _cast(expression: exp.Expr, sql_type: str) -> exp.Expr:
    return exp.Cast(this=expression, to=exp.DataType.build(sql_type, dialect="spark"))


def _div(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Div(this=paren(left), expression=paren(right))


def _mul(*factors: exp.Expr) -> exp.Expr:
    product = factors[0]
    for factor in factors[1:]:
        product = exp.Mul(this=paren(product), expression=paren(factor))
    return product


def _sub(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Sub(this=paren(left), expression=paren(right))


def _add(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Add(this=paren(left), expression=paren(right))


def _eq(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.EQ(this=left, expression=right)


def merge_rules(
    analysis: AggregateAnalysis,
    outputs: Sequence[str],
    state: Sequence[StateColumn],
    types: Mapping[str, IcebergType],
    insert_only: bool = False,
) -> MergeRules:
    """Rules for every aggregate of `analysis` (its storage columns are `outputs`);
    `insert_only`: for a delta that removes no row (`row_weight`)."""
    exploded = any(
        a.func in DEVIATIONS
        or (a.func in ("sum", "avg") and _decimal(types, outputs[a.position], a, state))
        for a in analysis.aggregates
    )
    rules = MergeRules(exploded=exploded and not insert_only)
    weight = row_weight(exploded, insert_only)
    names = {c.name for c in state}
    for index, aggregate in enumerate(analysis.aggregates):
        output = outputs[aggregate.position]
        argument = col(argument_column(index))
        _rule(rules, aggregate, index, output, argument, weight, names, types)
    if ROWS in names:
        rules.deltas["__icemv_drows"] = sum_(weight.copy())
        rows = _add(_zero_if_new(ROWS), _delta("__icemv_drows"))
        rules.values[ROWS] = rows
        rules.unknown.append(_is_null(_stored(ROWS)))
    if rules.rows is None and ROWS in names:
        rules.rows = rules.values[ROWS]
    return rules


def _decimal(
    types: Mapping[str, IcebergType],
    output: str,
    aggregate: AggregateColumn,
    state: Sequence[StateColumn],
) -> decimals.DecimalType | None:
    """The DECIMAL type a SUM or AVG adds its inputs in (the SUM's column, or AVG's
    hidden sum); None when it sums another type."""
    column = state_name("sum", output) if aggregate.func == "avg" else output
    found = types.get(column)
    if not isinstance(found, DecimalType):
        return None
    return decimals.DecimalType(found.precision, found.scale)


def _rule(
    rules: MergeRules,
    aggregate: AggregateColumn,
    index: int,
    output: str,
    argument: exp.Expr,
    weight: exp.Expr,
    state: set[str],
    types: Mapping[str, IcebergType],
) -> None:
    func = aggregate.func
    delta = f"__icemv_d{index}"
    counted = if_(_not_null(argument.copy()), weight.copy(), num(0))
    if func in ("count_star", "count"):
        rules.deltas[delta] = sum_(weight.copy() if func == "count_star" else counted)
        rules.values[output] = _add(_zero_if_new(output), _delta(delta))
        if func == "count_star":
            rules.rows = rules.values[output]
        return
    if func in ("min", "max"):
        extreme = exp.Min if func == "min" else exp.Max
        inserted = _by_sign(weight, argument.copy(), exp.null())
        rules.deltas[delta] = extreme(this=inserted)
        pick = exp.Least if func == "min" else exp.Greatest
        rules.values[output] = pick(this=_stored(output), expressions=[_delta(delta)])
        # Deletes merge unless one takes a value at (or past) the stored bound (with state;
        # an insert-only delta deletes nothing: `row_weight`).
        if state and weight != num(1):
            removed = f"__icemv_dx{index}"
            deleted = if_(
                exp.LT(this=weight.copy(), expression=num(0)), argument.copy(), exp.null()
            )
            rules.deltas[removed] = extreme(this=deleted)
            at_bound = (exp.LTE if func == "min" else exp.GTE)(
                this=_delta(removed), expression=_stored(output)
            )
            rules.unknown.append(
                paren(
                    exp.and_(
                        _not_null(_delta(removed)), exp.or_(_is_null(_stored(output)), at_bound)
                    )
                )
            )
        return
    count = state_name("count", output)
    stateful = count in state
    if stateful:
        rules.deltas[f"__icemv_dc{index}"] = sum_(counted)
        new_count = _add(_zero_if_new(count), _delta(f"__icemv_dc{index}"))
        rules.values[count] = new_count
        rules.unknown.append(_is_null(_stored(count)))
    total_type = types.get(state_name("sum", output) if func == "avg" else output)
    if func in ("sum", "avg") and isinstance(total_type, DecimalType):
        if not stateful:
            rules.recompute = f"{output}: a DECIMAL sum without its input count (state)"
            return
        _decimal_rule(rules, func, index, output, argument, weight, new_count, types)
        return
    bounded = state_name("error", output) in state
    if func == "sum":
        if bounded:  # a FLOAT's terms in DOUBLE, as bounded
            argument = _cast(argument, "DOUBLE")
        rules.deltas[delta] = sum_(_mul(argument.copy(), weight.copy()))
        if stateful:  # NULL exactly when no non-NULL input is left
            merged: exp.Expr = _add(_zero_if_new(output), coalesce(_delta(delta), num(0)))
            if bounded:  # read again by the bound's test: lets
                new_count = _named(rules, f"__icemv_count{index}", count)
                merged = _let(rules, f"__icemv_sum{index}", merged)
            rules.values[output] = if_(_eq(new_count.copy(), num(0)), exp.null(), merged.copy())
            _error_rule(rules, index, output, argument, weight, new_count, output, merged, state)
        else:
            stored, change = _stored(output), _delta(delta)
            rules.values[output] = case(
                (_is_null(stored.copy()), change.copy()),
                (_is_null(change.copy()), stored.copy()),
                default=_add(stored, change),
            )
        return
    if func == "avg":  # Spark's AVG sums anything but DECIMAL as DOUBLE
        total = state_name("sum", output)
        rules.deltas[delta] = sum_(_mul(_cast(argument.copy(), "DOUBLE"), weight.copy()))
        summed = _add(_zero_if_new(total), coalesce(_delta(delta), num(0)))
        summed = _cast(summed, spark_type(types[total]))
        if bounded:  # read by the mean and again by the bound's test: lets
            new_count = _named(rules, f"__icemv_count{index}", count)
            summed = _let(rules, f"__icemv_sum{index}", summed)
        empty = _eq(new_count.copy(), num(0))
        rules.values[total] = if_(empty.copy(), exp.null(), summed.copy())
        _error_rule(rules, index, output, argument, weight, new_count, total, summed, state)
        mean = _div(summed, _cast(new_count.copy(), "DOUBLE"))
        rules.values[output] = if_(empty, exp.null(), mean)
        return
    if func in DEVIATIONS:
        _deviation_rule(rules, func, index, output, argument, weight, new_count)
        return
    raise ValueError(f"{func} has no merge rule")


# A merged floating-point sum further than this, relative, from the exact sum is recomputed,
RELATIVE_BOUND = 1e-10
# unless it is within this many times the unit roundoff per value (4 u n: four times the
# worst case of a recompute's own sum of n values of one sign).
PER_VALUE_BOUND = 4 * 2.0**-53
# A sum at least this large may have overflowed on the way (to an infinity): recomputed.
FINITE = 1e300


def _error_rule(
    rules: MergeRules,
    index: int,
    output: str,
    argument: exp.Expr,
    weight: exp.Expr,
    new_count: exp.Expr,
    total: str,
    merged: exp.Expr,
    state: set[str],
) -> None:
    """The error bound of a floating-point sum (`total`, merged to `merged`), and the test
    that sends a group whose merged sum it no longer vouches for to be recomputed."""
    error = state_name("error", output)
    if error not in state:
        return
    spread, terms = f"__icemv_da{index}", f"__icemv_dt{index}"
    term = _mul(_cast(argument.copy(), "DOUBLE"), weight.copy())
    rules.deltas[spread] = coalesce(sum_(exp.Abs(this=term)), num(0))
    rules.deltas[terms] = exp.Count(this=argument.copy())
    roundoff = exp.Literal.number(repr(ROUNDOFF))
    grown = _mul(
        roundoff,
        _add(
            _mul(_add(_delta(terms), num(2)), _delta(spread)),
            _mul(num(2), exp.Abs(this=_zero_if_new(total))),
        ),
    )
    bound = _let(rules, f"__icemv_bound{index}", _add(_zero_if_new(error), grown))
    empty = _eq(new_count.copy(), num(0))
    rules.values[error] = if_(empty.copy(), _cast(num(0), "DOUBLE"), bound.copy())
    size = exp.Abs(this=merged.copy())
    tolerance = exp.Greatest(
        this=exp.Literal.number(repr(RELATIVE_BOUND)),
        expressions=[_mul(exp.Literal.number(repr(PER_VALUE_BOUND)), new_count.copy())],
    )
    vouched = exp.and_(
        exp.LTE(this=bound, expression=_mul(tolerance, size)),
        exp.LT(this=size.copy(), expression=exp.Literal.number(repr(FINITE))),
    )
    stored_count = _zero_if_new(state_name("count", output))
    rules.unknown += [
        exp.and_(_is_null(_stored(error)), exp.GT(this=stored_count, expression=num(0))),
        exp.and_(exp.Not(this=empty), exp.Not(this=paren(vouched))),
    ]


def _let(rules: MergeRules, name: str, value: exp.Expr) -> exp.Expr:
    """`value` computed once per joined row, read by name (`MergeRules.lets`)."""
    rules.lets[name] = value
    return let(name)


def _named(rules: MergeRules, name: str, column: str) -> exp.Expr:
    """The merged value of storage `column` as a let, which the column then reads."""
    rules.values[column] = _let(rules, name, rules.values[column])
    return rules.values[column]


def _decimal_rule(
    rules: MergeRules,
    func: str,
    index: int,
    output: str,
    argument: exp.Expr,
    sign: exp.Expr,
    new_count: exp.Expr,
    types: Mapping[str, IcebergType],
) -> None:
    """SUM / AVG of a DECIMAL, merged in its own type without rounding (see the module)."""
    name = state_name("sum", output) if func == "avg" else output
    stored_type = types[name]
    assert isinstance(stored_type, DecimalType)
    total = decimals.DecimalType(stored_type.precision, stored_type.scale)
    delta, inputs = f"__icemv_d{index}", f"__icemv_dn{index}"
    signed = _by_sign(sign, argument.copy(), exp.Neg(this=paren(argument.copy())))
    rules.deltas[delta] = sum_(signed)
    rules.deltas[inputs] = exp.Count(this=argument.copy())
    stored, change = _stored(name), _delta(delta)
    summed = decimals.exact_sum(
        coalesce(stored.copy(), decimals.zero(total)),
        coalesce(change.copy(), decimals.zero(total)),
        total,
    )
    if func == "avg":  # read again by the quotient (below), thrice each: lets
        new_count = _named(rules, f"__icemv_count{index}", state_name("count", output))
        summed = _let(rules, f"__icemv_sum{index}", summed)
    empty = _eq(new_count.copy(), num(0))
    rules.values[name] = if_(empty.copy(), exp.null(), summed.copy())
    rules.unknown += [
        exp.and_(_is_null(stored.copy()), exp.GT(this=_zero_if_new(state_name("count", output)),
                                                  expression=num(0))),
        exp.and_(_is_null(change.copy()), exp.GT(this=_delta(inputs), expression=num(0))),
        decimals.overflows(stored.copy(), total),
        decimals.overflows(change.copy(), total),
    ]  # fmt: skip
    if func == "sum":
        return
    mean_type = types[output]
    assert isinstance(mean_type, DecimalType)
    result = decimals.DecimalType(mean_type.precision, mean_type.scale)
    computed = decimals.divide(total, decimals.COUNT_DECIMAL)
    if computed.scale < result.scale:
        rules.recompute = (
            f"{output}: AVG of {total.sql()} sums divides to {computed.scale} places, "
            f"fewer than its {result.scale}"
        )
        return
    # The quotient is read by the value and three times by its half-way test: a let too.
    quotient = f"__icemv_q{index}"
    rules.lets[quotient] = _div(summed, decimals.cast(new_count.copy(), decimals.COUNT_DECIMAL))
    rules.values[output] = if_(empty, exp.null(), decimals.cast(let(quotient), result))
    half_way = decimals.half_way(let(quotient), computed, result, total, new_count.copy())
    rules.unknown.append(exp.and_(exp.Not(this=empty.copy()), half_way))


def _deviation_rule(
    rules: MergeRules,
    func: str,
    index: int,
    output: str,
    argument: exp.Expr,
    weight: exp.Expr,
    new_count: exp.Expr,
) -> None:
    """(n, mean, M2) of the deleted rows out, of the inserted rows in (rows exploded)."""
    value = _cast(argument.copy(), "DOUBLE")
    sides = {}
    for side, sign in (("i", exp.GT), ("d", exp.LT)):
        if weight == num(1):  # insert-only (`row_weight`): no row is deleted, (0, 0, 0)
            if side == "d":  # as COUNT and the COALESCEd AVG and M2 of no rows type them
                sides[side] = (_cast(num(0), "BIGINT"), _cast(num(0), "DOUBLE"),
                               _cast(num(0), "DOUBLE"))  # fmt: skip
                continue
            picked = value.copy()
        else:
            picked = if_(sign(this=col(WEIGHT), expression=num(0)), value.copy(), exp.null())
        n, mu, m2 = (f"__icemv_{side}{part}{index}" for part in ("n", "mean", "m2"))
        rules.deltas[n] = exp.Count(this=picked.copy())
        rules.deltas[mu] = coalesce(exp.Avg(this=picked.copy()), num(0))
        rules.deltas[m2] = coalesce(
            _mul(exp.VariancePop(this=picked.copy()), exp.Count(this=picked)), num(0)
        )
        sides[side] = (_delta(n), _delta(mu), _delta(m2))
    count, mean_name, m2_name = (state_name(r, output) for r in ("count", "mean", "m2"))
    n0, mu0, m20 = _zero_if_new(count), _zero_if_new(mean_name), _zero_if_new(m2_name)
    rules.unknown += [_is_null(_stored(mean_name)), _is_null(_stored(m2_name))]
    (n_i, mu_i, m2_i), (n_d, mu_d, m2_d) = sides["i"], sides["d"]
    # Take the deleted rows out: a = ab - b.
    n1 = _sub(n0.copy(), n_d.copy())
    mu1 = if_(
        _eq(n1.copy(), num(0)),
        num(0),
        _div(_sub(_mul(n0.copy(), mu0), _mul(n_d.copy(), mu_d.copy())), n1.copy()),
    )
    shift = _sub(mu_d.copy(), mu1.copy())
    m21 = case(
        (_eq(n1.copy(), num(0)), num(0)),
        (_eq(n_d.copy(), num(0)), m20.copy()),
        default=exp.Greatest(this=_sub(_sub(m20, m2_d), _div(
            _mul(shift.copy(), shift, n1.copy(), n_d.copy()), n0.copy())),
            expressions=[num(0)]),
    )  # fmt: skip
    # Then add the inserted rows: ab = a + b.
    n2 = new_count
    delta = _sub(mu_i.copy(), mu1.copy())
    mu2 = if_(
        _eq(n2.copy(), num(0)),
        num(0),
        _add(mu1.copy(), _div(_mul(delta.copy(), n_i.copy()), n2.copy())),
    )
    m22 = if_(_eq(n2.copy(), num(0)), num(0), _add(_add(m21, m2_i), _div(
        _mul(delta.copy(), delta, n1, n_i), n2.copy())))  # fmt: skip
    rules.values[mean_name] = mu2
    rules.values[m2_name] = m22.copy()
    population = func in ("stddev_pop", "var_pop")
    divisor = n2.copy() if population else _sub(n2.copy(), num(1))
    limit = num(0) if population else num(1)
    variance = if_(exp.LTE(this=n2.copy(), expression=limit), exp.null(), _div(m22, divisor))
    stddev = func.startswith("stddev")
    rules.values[output] = exp.Sqrt(this=variance) if stddev else variance
