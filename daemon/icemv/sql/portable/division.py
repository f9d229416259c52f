"""DECIMAL division as integer arithmetic, and the last-digit test of a half-way
value, rendered for DuckDB."""

from __future__ import annotations

from sqlglot import exp

from icemv.sql import decimals
from icemv.sql.decimals import DecimalType
from icemv.sql.functions import HALF_WAY_PATTERN
from icemv.sql.portable.base import Base
from icemv.sql.portable.common import _cast, _refuse, spark_type_of
from icemv.sql.spark_types import (
    BOOLEAN,
    SparkType,
    built,
    decimal_type,
)


def _pow10(n: int) -> exp.Expr:
    return exp.Cast(this=exp.Literal.number(10**n), to=built("HUGEINT", None))


def _unscaled(value: exp.Expr, kind: DecimalType) -> exp.Expr:
    """The DECIMAL's digits as an integer: value * 10^scale, exactly (HUGEINT)."""
    shift = exp.Cast(this=exp.Literal.number(10**kind.scale),
                     to=built(f"DECIMAL({kind.scale + 1}, 0)", None))  # fmt: skip
    return exp.Cast(this=exp.Mul(this=exp.Paren(this=value), expression=shift),
                    to=built("HUGEINT", None))  # fmt: skip


def _decimal_division(
    left: exp.Expr,
    right: exp.Expr,
    a: DecimalType,
    b: DecimalType,
    result: DecimalType,
    node: exp.Expr,
) -> exp.Expr:
    """a / b as Spark computes it: the exact quotient rounded half up (away from zero) to
    the result's scale, NULL for a zero divisor, by integer arithmetic on the digits."""
    if a.precision + a.scale + 1 > decimals.MAX_PRECISION or b.precision + b.scale + 1 > 38:
        raise _refuse(node, "a DECIMAL division too wide for exact integer arithmetic")
    shift = result.scale - a.scale + b.scale
    numerator, denominator = _unscaled(left, a), _unscaled(right, b)
    if shift >= 0:
        numerator = exp.Mul(this=numerator, expression=_pow10(shift))
    else:
        denominator = exp.Mul(this=denominator, expression=_pow10(-shift))
    denominator = exp.Nullif(this=denominator, expression=exp.Literal.number(0))
    two = exp.Literal.number(2)
    magnitude = exp.IntDiv(
        this=exp.Paren(this=exp.Add(
            this=exp.Mul(this=two, expression=exp.Abs(this=numerator)),
            expression=exp.Abs(this=denominator.copy()))),
        expression=exp.Paren(this=exp.Mul(this=two.copy(),
                                          expression=exp.Abs(this=denominator.copy()))),
    )  # fmt: skip
    sign = exp.Mul(this=exp.Sign(this=numerator.copy()), expression=exp.Sign(this=denominator))
    digits = exp.Cast(this=exp.Mul(this=magnitude, expression=sign),
                      to=built("DECIMAL(38, 0)", None))  # fmt: skip
    unit = built(f"DECIMAL({result.scale + 1}, {result.scale})", None)
    scale = exp.Cast(this=exp.Literal.string(f"1e-{result.scale}"), to=unit)
    value = exp.Mul(this=digits, expression=scale) if result.scale else digits
    return _cast(exp.Paren(this=value), decimal_type(result))


def _half_way(gate: Base, node: exp.RegexpLike) -> tuple[exp.Expr, SparkType]:
    """Only the last-digit test of sql/decimals.half_way: `CAST(CAST(q AS DECIMAL(38, k))
    AS STRING) RLIKE '5(E...)?$'` (Spark prints tiny decimals in E notation), rendered
    for DuckDB on the digits: the digit in place k is 5."""
    inner = node.this
    pattern = node.expression
    if not (
        isinstance(pattern, exp.Literal) and pattern.this == HALF_WAY_PATTERN
        and isinstance(inner, exp.Cast) and isinstance(inner.this, exp.Cast)
    ):  # fmt: skip
        raise _refuse(node, "a regular expression (Spark only)")
    decimal = spark_type_of(inner.this.to)
    rendered, _ = gate.typed(inner.this)
    if decimal.kind != "decimal":
        raise _refuse(node, "a regular expression (Spark only)")
    digits = _unscaled(rendered, decimal.decimal())
    last = exp.Mod(this=digits, expression=exp.Literal.number(10))
    five = [exp.Literal.number(5), exp.Neg(this=exp.Literal.number(5))]
    return exp.In(this=exp.Paren(this=last), expressions=five), BOOLEAN
