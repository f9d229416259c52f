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
    """The DECIMAL's digits as an integer, value * 10^scale, exactly (HUGEINT holds 38
    digits). Where DuckDB's DECIMAL product could pass 38 digits, through the value's
    text, which DuckDB writes with every place of its scale ('-0.0000000001')."""
    if kind.precision + kind.scale + 1 <= decimals.MAX_PRECISION:
        shift = exp.Cast(this=exp.Literal.number(10**kind.scale),
                         to=built(f"DECIMAL({kind.scale + 1}, 0)", None))  # fmt: skip
        return exp.Cast(this=exp.Mul(this=exp.Paren(this=value), expression=shift),
                        to=built("HUGEINT", None))  # fmt: skip
    text = exp.Cast(this=exp.Cast(this=value, to=built(f"DECIMAL({kind.precision}, "
                                                        f"{kind.scale})", None)),
                    to=built("VARCHAR", None))  # fmt: skip
    digits = exp.Anonymous(this="replace", expressions=[
        text, exp.Literal.string("."), exp.Literal.string("")])  # fmt: skip
    return exp.Cast(this=digits, to=built("HUGEINT", None))


# HUGEINT holds every integer of 38 digits; the remainder's double (2r < 2d) one of 37.
_DIGITS = decimals.MAX_PRECISION
_STEPS = 3  # long-division steps after the first (each repeats the remainder's tree twice)


def _decimal_division(
    left: exp.Expr,
    right: exp.Expr,
    a: DecimalType,
    b: DecimalType,
    result: DecimalType,
    node: exp.Expr,
) -> exp.Expr:
    """a / b as Spark computes it: the exact quotient rounded half up (away from zero) to
    the result's scale, NULL for a zero divisor, by long division on the digits in
    HUGEINT. With A and B the digits, the quotient in the result's places is
    A * 10^k / B, k = result scale - a's scale + b's scale (never negative: Spark keeps
    at least 38 - p1 places). On magnitudes, d = |B|: q and r from A * 10^c // d and
    % d, c as many of the k places as A * 10^c holds in 38 digits; then for the places
    left, in steps of as many as r * 10^c holds, q = q * 10^c + (r * 10^c) // d,
    r = (r * 10^c) % d; finally q + 1 where 2r >= d, signed as A * B. Each step is exact
    (d at most 37 digits); a quotient past 38 digits raises (falls back to Spark, whose
    value is NULL or rounded into its type)."""
    shift = result.scale - a.scale + b.scale
    first = min(shift, _DIGITS - a.precision)
    step = _DIGITS - b.precision
    left_over = shift - first
    if shift < 0 or step < 1 or (left_over and -(-left_over // step) > _STEPS):
        raise _refuse(node, "a DECIMAL division too wide for exact integer arithmetic")
    numerator, denominator = _unscaled(left, a), _unscaled(right, b)
    sign = exp.Mul(
        this=exp.Sign(this=numerator.copy()), expression=exp.Sign(this=denominator.copy())
    )
    divisor = exp.Nullif(this=exp.Abs(this=denominator), expression=exp.Literal.number(0))
    dividend: exp.Expr = exp.Abs(this=numerator)
    if first:
        dividend = exp.Mul(this=dividend, expression=_pow10(first))
    quotient: exp.Expr = exp.IntDiv(this=dividend, expression=divisor.copy())
    remainder: exp.Expr = exp.Mod(this=dividend.copy(), expression=divisor.copy())
    while left_over:
        places = min(step, left_over)
        left_over -= places
        scaled = exp.Mul(this=exp.Paren(this=remainder), expression=_pow10(places))
        quotient = exp.Add(
            this=exp.Mul(this=exp.Paren(this=quotient), expression=_pow10(places)),
            expression=exp.IntDiv(this=scaled, expression=divisor.copy()),
        )
        remainder = exp.Mod(this=scaled.copy(), expression=divisor.copy())
    half = exp.GTE(this=exp.Mul(this=exp.Literal.number(2), expression=exp.Paren(this=remainder)),
                   expression=divisor)  # fmt: skip
    up = exp.Case(ifs=[exp.If(this=half, true=exp.Literal.number(1))],
                  default=exp.Literal.number(0))  # fmt: skip
    magnitude = exp.Paren(this=exp.Add(this=quotient, expression=up))
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
