"""Aggregates and grouping keys through the gate."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from sqlglot import exp

from icemv.sql import decimals
from icemv.sql.functions import call, raising_where
from icemv.sql.portable.base import Base
from icemv.sql.portable.common import _cast, _rebuilt, _refuse, spark_type_of
from icemv.sql.portable.division import _decimal_division
from icemv.sql.spark_types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    STRING,
    TINYINT,
    SparkType,
    built,
    decimal_type,
)


class Aggregates(Base):
    def count(self, node: exp.Count) -> tuple[exp.Expr, SparkType]:
        argument = node.this
        if argument is None or isinstance(argument, exp.Star):
            return node.copy(), BIGINT
        if isinstance(argument, exp.Distinct):
            values, kinds = self.each(argument.expressions)
            if any(k.floating or k.kind == "complex" for k in kinds):
                raise _refuse(node, "COUNT(DISTINCT) of floating-point values")
            return exp.Count(this=exp.Distinct(expressions=values)), BIGINT
        inner, _ = self.typed(argument)
        return exp.Count(this=inner), BIGINT

    def count_if(self, node: exp.CountIf) -> tuple[exp.Expr, SparkType]:
        # DuckDB's count_if of a constant NULL is NULL (Spark: 0): NULL counts as false.
        counted = exp.Coalesce(this=self.boolean(node.this), expressions=[exp.false()])
        return _cast(exp.CountIf(this=counted), BIGINT), BIGINT

    def sum(self, node: exp.Sum) -> tuple[exp.Expr, SparkType]:
        """SUM, typed as Spark types it; SUM(DISTINCT x) the same over x's distinct values
        (not of floating-point values: which of -0.0 and 0.0, or of two NaNs, is kept
        differs, as for DISTINCT)."""
        argument = node.this
        distinct = isinstance(argument, exp.Distinct)
        if distinct:
            if len(argument.expressions) != 1:
                raise _refuse(node, "SUM(DISTINCT) of several values")
            argument = argument.expressions[0]
        inner, kind = self.typed(argument)
        if distinct and kind.floating:
            raise _refuse(node, "SUM(DISTINCT) of floating-point values")
        summed = exp.Sum(this=exp.Distinct(expressions=[inner]) if distinct else inner)
        if kind.integral:
            return _cast(summed, BIGINT), BIGINT
        if kind.floating or kind.kind == "null":
            return summed, DOUBLE
        if kind.kind == "decimal":
            result = decimal_type(decimals.sum_type(kind.decimal()))
            return _cast(summed, result), result
        raise _refuse(node, f"SUM of {kind.describe()}")

    def average(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        """AVG: DOUBLE of numbers; of a DECIMAL see `decimal_average`."""
        inner, kind = self.typed(node.this)
        if kind.kind == "decimal" and not isinstance(node.parent, exp.Window):
            return self.decimal_average(node, kind, lambda aggregate: aggregate)
        if not (kind.integral or kind.floating):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _rebuilt(node, this=inner), DOUBLE

    def decimal_average(
        self, node: exp.Expr, kind: SparkType, over: Callable[[exp.Expr], exp.Expr]
    ) -> tuple[exp.Expr, SparkType]:
        """AVG of a DECIMAL(p, s) as Spark 3.5's Average evaluates it: its sum in
        DECIMAL(p + 10, s) (SUM's type, as the gate types SUM) divided by the count as
        DECIMAL(20, 0), the quotient rounded half up once to DECIMAL(p + 4, s + 4)
        (DecimalDivideWithOverflowCheck of a quotient Decimal's `/` truncates at 39
        places: the same as rounding the exact quotient), NULL for no values. Not the
        tree `CAST(SUM(x) / CAST(COUNT(x) AS DECIMAL(20, 0)) AS ...)`, which rounds twice
        (first to the division's type, 10 places for a sum of 38 digits). `over` puts
        each aggregate over the window the AVG is over (or leaves it bare); `kind` is the
        argument's type."""
        argument = node.this
        summed, total = self.typed(over(exp.Sum(this=argument.copy())))
        count = decimals.cast(over(exp.Count(this=argument.copy())), decimals.COUNT_DECIMAL)
        counted, _ = self.typed(count)
        result = decimals.avg_type(kind.decimal())
        quotient = _decimal_division(
            summed, counted, total.decimal(), decimals.COUNT_DECIMAL, result, node
        )
        return quotient, decimal_type(result)

    def extreme(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if kind.kind in ("complex", "binary"):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _rebuilt(node, this=inner), kind

    def median(self, node: exp.Median) -> tuple[exp.Expr, SparkType]:
        """MEDIAN(x): Spark's `percentile(x, 0.5)` (see `percentile`)."""
        return self._percentile(node, node.this, "MEDIAN", Decimal("0.5"))

    def percentile(self, node: exp.Quantile) -> tuple[exp.Expr, SparkType]:
        """`percentile(x, p)` of integers or DECIMALs, p a literal in [0, 1], as Spark 3.5's
        Percentile computes it, written out step for step: position = (n - 1) * p over the
        n values that are not NULL; lo and hi the values at its floor and ceiling in
        ascending order (DuckDB's list_sort, NULLs last, past the n); lo as DOUBLE where the
        two values are equal, else `(ceil - position) * lo + (position - floor) * hi` of
        them as DOUBLE, each step one IEEE operation on the same operands in both engines.
        DuckDB's own quantile_cont rounds otherwise (`lo + (hi - lo) * f`, or in DECIMAL).
        Floating-point values as `_signed_zeros` says. An array of p, DISTINCT and
        windows: refused."""
        return self._percentile(node, node.this, "percentile", _fraction(node, "quantile"))

    def within_group(self, node: exp.WithinGroup) -> tuple[exp.Expr, SparkType]:
        """`percentile_cont(p) WITHIN GROUP (ORDER BY x [DESC])`: Spark 3.5 replaces it by
        `percentile(x, p)` over the values in that order (see `percentile`).
        `percentile_disc(p) WITHIN GROUP (ORDER BY x [DESC])`, Spark 3.5's PercentileDisc
        (not the legacy calculation): with n the values that are not NULL, the value at
        1-based place `max(ceil(CAST(n AS DOUBLE) * p), 1)` in that order (the first whose
        cumulative count reaches the position), as DOUBLE; the product and its ceiling
        are one IEEE operation each in both engines. Same refusals as `percentile`."""
        function, order = node.this, node.expression
        keys = order.expressions if isinstance(order, exp.Order) else []
        if not isinstance(function, exp.PercentileCont | exp.PercentileDisc) or len(keys) != 1:
            raise _refuse(node, "WITHIN GROUP other than one percentile over one key")
        name = "percentile_disc" if isinstance(function, exp.PercentileDisc) else "percentile_cont"
        descending = bool(keys[0].args.get("desc"))
        return self._percentile(node, keys[0].this, name, _fraction(function, "this"),
                                descending=descending)  # fmt: skip

    def _percentile(
        self, node: exp.Expr, argument: exp.Expr, name: str, fraction: Decimal, *,
        descending: bool = False,
    ) -> tuple[exp.Expr, SparkType]:  # fmt: skip
        if not 0 <= fraction <= 1:
            raise _refuse(node, f"{name} at {fraction}")
        if isinstance(argument, exp.Distinct) or isinstance(node.parent, exp.Window):
            raise _refuse(node, f"{name} of DISTINCT values or over a window")
        inner, kind = self.typed(argument)
        if not (kind.integral or kind.floating or kind.kind == "decimal"):
            raise _refuse(node, f"{name} of {kind.describe()}")
        count = exp.Count(this=inner.copy())
        ordered = call("list_sort", call("list", inner.copy()),
                       exp.Literal.string("DESC" if descending else "ASC"),
                       exp.Literal.string("NULLS LAST"))  # fmt: skip
        percentage = _cast(exp.Literal.string(str(fraction)), DOUBLE)

        def at(index: exp.Expr, offset: int) -> exp.Expr:
            place = _cast(index, BIGINT)
            return call("list_extract", ordered.copy(),
                        exp.Add(this=place, expression=exp.Literal.number(offset)))  # fmt: skip

        empty = exp.If(this=exp.EQ(this=count.copy(), expression=exp.Literal.number(0)),
                       true=exp.null())  # fmt: skip
        if name == "percentile_disc":
            product = exp.Mul(this=_cast(count.copy(), DOUBLE), expression=percentage)
            place = exp.Greatest(this=call("ceil", product), expressions=[exp.Literal.number(1)])
            value = exp.Case(ifs=[empty], default=_cast(at(place, 0), DOUBLE))
            return _signed_zeros(inner, kind, value), DOUBLE
        position = exp.Paren(this=exp.Mul(
            this=_cast(exp.Sub(this=count, expression=exp.Literal.number(1)), DOUBLE),
            expression=percentage))  # fmt: skip
        low, high = call("floor", position.copy()), call("ceil", position.copy())
        lo_key, hi_key = at(low.copy(), 1), at(high.copy(), 1)  # compared as they are
        lo, hi = _cast(lo_key.copy(), DOUBLE), _cast(hi_key.copy(), DOUBLE)
        between = exp.Add(
            this=exp.Mul(this=exp.Paren(this=exp.Sub(this=high, expression=position.copy())),
                         expression=lo.copy()),
            expression=exp.Mul(this=exp.Paren(this=exp.Sub(this=position, expression=low)),
                               expression=hi.copy()),
        )  # fmt: skip
        same = exp.If(this=exp.EQ(this=lo_key, expression=hi_key), true=lo)
        return _signed_zeros(inner, kind, exp.Case(ifs=[empty, same], default=between)), DOUBLE

    def logical_aggregate(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        return _rebuilt(node, this=self.boolean(node.this)), BOOLEAN

    def any_value(self, node: exp.AnyValue) -> tuple[exp.Expr, SparkType]:
        """ANY_VALUE(x): some value of the group, NULL included (Spark's First without
        ignoring NULLs; DuckDB's ANY_VALUE skips NULLs, its FIRST does not). Which value
        is not defined in either engine: a view is deterministic only where the group
        decides it, and then both give it."""
        if any(value for key, value in node.args.items() if key != "this"):
            raise _refuse(node, "ANY_VALUE with options")
        inner, kind = self.typed(node.this)
        if kind.kind == "complex":
            raise _refuse(node, f"ANY_VALUE of {kind.describe()}")
        return exp.First(this=inner), kind

    def grouping(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        """GROUPING(x) (TINYINT in Spark, BIGINT in DuckDB: cast) and GROUPING_ID() (BIGINT
        in both; without arguments the bits of every grouping expression, the first the
        highest, in both: with arguments Spark wants exactly those, in that order)."""
        if not self.grouping_sets:
            raise _refuse(node, f"{type(node).__name__} without grouping sets")
        rendered = [group_key(self, a) for a in node.expressions]
        if isinstance(node, exp.Grouping):
            if len(rendered) != 1:
                raise _refuse(node, "GROUPING() of other than one expression")
            return _cast(exp.Grouping(expressions=rendered), TINYINT), TINYINT
        return exp.GroupingId(expressions=rendered), BIGINT


def group_key(expr: Base, key: exp.Expr) -> exp.Expr:
    """One GROUP BY expression: not floating point (but its text) nor complex."""
    text = _text_key(expr, key)
    if text is not None:
        return text
    rendered, kind = expr.typed(key)
    if kind.floating or kind.kind == "complex":
        raise _refuse(key, "a floating-point or complex GROUP BY key")
    return rendered


def grouping_set(expr: Base, node: exp.Expr, nested: bool) -> exp.Expr:
    """An element of CUBE / ROLLUP (a key) or of GROUPING SETS (`nested`: a key, or a
    set of keys: `(a, b)`, `(a)`, `()`). Spark and DuckDB make the same groups, in the
    same grouping-set order, their keys NULL where rolled up (tests/test_engine_corpus.py)."""
    if nested and isinstance(node, exp.Tuple):
        return exp.Tuple(expressions=[group_key(expr, e) for e in node.expressions])
    if nested and isinstance(node, exp.Paren):
        return exp.Paren(this=group_key(expr, node.this))
    if isinstance(node, exp.Cube | exp.Rollup | exp.GroupingSets | exp.Tuple):
        raise _refuse(node, "nested grouping sets (Spark only)")
    return group_key(expr, node)


def _text_key(expr: Base, key: exp.Expr) -> exp.Expr | None:
    """A GROUP BY key that is a floating-point value's text (sql/net.py's identity):
    each engine's text tells the same values apart (-0.0 from 0.0, NaN one), and the text
    is never output, so the engines' different spellings do not matter."""
    if not (isinstance(key, exp.Cast) and spark_type_of(key.to) == STRING):
        return None
    rendered, kind = expr.typed(key.this)
    if not kind.floating:
        return None
    return exp.Cast(this=rendered, to=built("VARCHAR", None))


def _fraction(node: exp.Expr, arg: str) -> Decimal:
    fraction = node.args.get(arg)
    if not (isinstance(fraction, exp.Literal) and fraction.is_number):
        raise _refuse(node, "a percentile at a percentage that is not one number")
    return Decimal(fraction.this)


def _signed_zeros(value: exp.Expr, kind: SparkType, computed: exp.Expr) -> exp.Expr:
    """A percentile of floating-point values: Spark counts each distinct boxed value
    (-0.0 and 0.0 apart, every NaN one) and sorts them by its SQL order, in which -0.0
    and 0.0 tie (NaN above all, as in DuckDB's list_sort): with both zeros in a group,
    which comes first, and whether the two keys are "equal", are Spark's hash map's; so
    DuckDB raises there (Spark computes the refresh). With one zero sign at most, equal
    values are the same bits and the order is the same total order in both."""
    if not kind.floating:
        return computed
    zero = exp.EQ(this=value.copy(), expression=exp.Literal.number(0))
    negative = exp.LogicalOr(this=exp.and_(zero.copy(), call("signbit", value.copy())))
    positive = exp.LogicalOr(this=exp.and_(zero, exp.Not(this=call("signbit", value.copy()))))
    both = exp.and_(negative, positive)
    return raising_where(both, "a percentile over both -0.0 and 0.0", computed)
