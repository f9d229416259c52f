"""Aggregates and grouping keys through the gate."""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from icemv.sql import decimals
from icemv.sql.functions import call
from icemv.sql.portable.base import Base
from icemv.sql.portable.common import _cast, _rebuilt, _refuse, spark_type_of
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
        """AVG: DOUBLE of numbers; of a DECIMAL, what Spark 3.5's Average evaluates,
        `CAST(SUM(x) / CAST(COUNT(x) AS DECIMAL(20, 0)) AS DECIMAL(p + 4, s + 4))` (its
        sum in DECIMAL(p + 10, s), NULL for no input), typed here as that tree: the
        division rounds half up to its own scale and the cast again to AVG's, both as the
        gate renders them for `/` and CAST. In a window: `window` builds that tree of
        windowed aggregates."""
        inner, kind = self.typed(node.this)
        if kind.kind == "decimal" and not isinstance(node.parent, exp.Window):
            argument = kind.decimal()
            count = decimals.cast(exp.Count(this=node.this.copy()), decimals.COUNT_DECIMAL)
            divided = exp.Div(this=exp.Sum(this=node.this.copy()), expression=count)
            return self.typed(decimals.cast(divided, decimals.avg_type(argument)))
        if not (kind.integral or kind.floating):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _rebuilt(node, this=inner), DOUBLE

    def extreme(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if kind.kind in ("complex", "binary"):
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        return _rebuilt(node, this=inner), kind

    def median(self, node: exp.Median) -> tuple[exp.Expr, SparkType]:
        """MEDIAN(x): Spark's `percentile(x, 0.5)` (see `percentile`)."""
        return self._interpolated(node, "MEDIAN", Decimal("0.5"))

    def percentile(self, node: exp.Quantile) -> tuple[exp.Expr, SparkType]:
        """`percentile(x, p)` of integers or DECIMALs, p a literal in [0, 1], as Spark 3.5's
        Percentile computes it, written out step for step: position = (n - 1) * p over the
        n values that are not NULL; lo and hi the values at its floor and ceiling in
        ascending order (DuckDB's list_sort, NULLs last, past the n); lo as DOUBLE where the
        two values are equal, else `(ceil - position) * lo + (position - floor) * hi` of
        them as DOUBLE, each step one IEEE operation on the same operands in both engines.
        DuckDB's own quantile_cont rounds otherwise (`lo + (hi - lo) * f`, or in DECIMAL).
        DOUBLE values (which of -0.0 and 0.0, and NaN's place, not compared), an array of
        p, DISTINCT and windows: refused."""
        fraction = node.args.get("quantile")
        if not (isinstance(fraction, exp.Literal) and fraction.is_number):
            raise _refuse(node, "percentile of a percentage that is not one number")
        return self._interpolated(node, "percentile", Decimal(fraction.this))

    def _interpolated(
        self, node: exp.Expr, name: str, fraction: Decimal
    ) -> tuple[exp.Expr, SparkType]:
        if not 0 <= fraction <= 1:
            raise _refuse(node, f"{name} at {fraction}")
        if isinstance(node.this, exp.Distinct) or isinstance(node.parent, exp.Window):
            raise _refuse(node, f"{name} of DISTINCT values or over a window")
        inner, kind = self.typed(node.this)
        if not (kind.integral or kind.kind == "decimal"):
            raise _refuse(node, f"{name} of {kind.describe()} (integers and DECIMAL only)")
        count = exp.Count(this=inner.copy())
        ordered = call("list_sort", call("list", inner.copy()), exp.Literal.string("ASC"),
                       exp.Literal.string("NULLS LAST"))  # fmt: skip
        percentage = _cast(exp.Literal.string(str(fraction)), DOUBLE)
        position = exp.Paren(this=exp.Mul(
            this=_cast(exp.Sub(this=count.copy(), expression=exp.Literal.number(1)), DOUBLE),
            expression=percentage))  # fmt: skip
        low, high = call("floor", position.copy()), call("ceil", position.copy())

        def at(index: exp.Expr) -> exp.Expr:
            place = _cast(index, BIGINT)
            return call("list_extract", ordered.copy(),
                        exp.Add(this=place, expression=exp.Literal.number(1)))  # fmt: skip

        lo_key, hi_key = at(low.copy()), at(high.copy())  # compared as the values they are
        lo, hi = _cast(lo_key.copy(), DOUBLE), _cast(hi_key.copy(), DOUBLE)
        between = exp.Add(
            this=exp.Mul(this=exp.Paren(this=exp.Sub(this=high, expression=position.copy())),
                         expression=lo.copy()),
            expression=exp.Mul(this=exp.Paren(this=exp.Sub(this=position, expression=low)),
                               expression=hi.copy()),
        )  # fmt: skip
        value = exp.Case(
            ifs=[exp.If(this=exp.EQ(this=count, expression=exp.Literal.number(0)),
                        true=exp.null()),
                 exp.If(this=exp.EQ(this=lo_key, expression=hi_key), true=lo)],
            default=between,
        )  # fmt: skip
        return value, DOUBLE

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


def _windowed_average(window: exp.Window, average: exp.Avg, kind: SparkType) -> exp.Expr:
    """AVG of a DECIMAL over a window as the tree Spark's Average evaluates there, as for
    the aggregate (`average`): `CAST(SUM(x) OVER w / CAST(COUNT(x) OVER w AS DECIMAL(20,
    0)) AS DECIMAL(p + 4, s + 4))`, the sum and the count over the same partition, order
    and (default) frame; a Spark tree the gate then types and renders."""

    def over(aggregate: exp.Expr) -> exp.Expr:
        return _rebuilt(window, this=aggregate)

    count = decimals.cast(over(exp.Count(this=average.this.copy())), decimals.COUNT_DECIMAL)
    divided = exp.Div(this=over(exp.Sum(this=average.this.copy())), expression=count)
    return decimals.cast(divided, decimals.avg_type(kind.decimal()))


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
