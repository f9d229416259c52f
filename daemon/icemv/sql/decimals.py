"""Spark 3.5's DECIMAL result types, and sums merged in them without losing a digit.

Spark types `+`, `*` and `/` of DECIMAL(p1, s1) and DECIMAL(p2, s2) by fixed rules, and
past precision 38 (with `spark.sql.decimalOperations.allowPrecisionLoss`, the default)
keeps the integer digits and drops scale, down to 6 places, rounding HALF_UP:

    add:       scale max(s1, s2),     precision max(p1 - s1, p2 - s2) + scale + 1
    multiply:  scale s1 + s2,         precision p1 + p2 + 1
    divide:    scale max(6, s1+p2+1), precision p1 - s1 + s2 + scale
    SUM(p, s): DECIMAL(min(38, p + 10), s)      AVG(p, s): DECIMAL(min(38, p + 4), min(38, s + 4))

SUM itself adds exactly and returns NULL when the total does not fit its type. A merge
`stored + delta` of two DECIMAL(38, s) sums is typed DECIMAL(38, s - 1) for s > 6: one
digit lost per refresh. `exact_sum` adds both as DECIMAL(37, s) instead, whose sum is
DECIMAL(38, s), exactly; a value too large for 37 digits casts to NULL, which
`overflows` reports, so such a group is recomputed rather than rounded. Below precision
38 the plain sum is exact. Pure: sqlglot trees only.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Context

from sqlglot import exp

MAX_PRECISION = 38
MIN_ADJUSTED_SCALE = 6
# Python's default context keeps 28 digits and raises InvalidOperation when rounding a
# value to a scale needs more (a DECIMAL(38, 6) value has up to 38): Python computations
# on DECIMAL values (their bounds, literals rounded to a type) use this one.
WIDE_CONTEXT = Context(prec=2 * MAX_PRECISION + 4)


@dataclass(frozen=True)
class DecimalType:
    precision: int
    scale: int

    def sql(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"

    def build(self) -> exp.DataType:
        return exp.DataType.build(self.sql(), dialect="spark")


def bounded(precision: int, scale: int) -> DecimalType:
    return DecimalType(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def adjusted(precision: int, scale: int) -> DecimalType:
    """Spark's `adjustPrecisionScale`: past 38 digits keep the integer part, cut scale."""
    if precision <= MAX_PRECISION:
        return DecimalType(precision, scale)
    integer_digits = precision - scale
    kept = max(MAX_PRECISION - integer_digits, min(scale, MIN_ADJUSTED_SCALE))
    return DecimalType(MAX_PRECISION, kept)


def add(a: DecimalType, b: DecimalType) -> DecimalType:
    scale = max(a.scale, b.scale)
    return adjusted(max(a.precision - a.scale, b.precision - b.scale) + scale + 1, scale)


def multiply(a: DecimalType, b: DecimalType) -> DecimalType:
    return adjusted(a.precision + b.precision + 1, a.scale + b.scale)


def divide(a: DecimalType, b: DecimalType) -> DecimalType:
    scale = max(MIN_ADJUSTED_SCALE, a.scale + b.precision + 1)
    return adjusted(a.precision - a.scale + b.scale + scale, scale)


def sum_type(argument: DecimalType) -> DecimalType:
    return bounded(argument.precision + 10, argument.scale)


def avg_type(argument: DecimalType) -> DecimalType:
    return bounded(argument.precision + 4, argument.scale + 4)


# The type Spark's AVG (and the AVG merge) divides a sum by its count in.
COUNT_DECIMAL = DecimalType(20, 0)


def cast(expression: exp.Expr, to: DecimalType) -> exp.Cast:
    return exp.Cast(this=expression, to=to.build())


def zero(of: DecimalType) -> exp.Cast:
    """0 in the sum's own type (a bare 0 would widen COALESCE to 10 integer digits)."""
    return cast(exp.Literal.number(0), of)


def _narrow(total: DecimalType) -> DecimalType | None:
    """The type both addends take so that their sum fits `total` exactly; None: as is."""
    if add(total, total).scale == total.scale:
        return None
    return DecimalType(MAX_PRECISION - 1, total.scale)


def exact_sum(left: exp.Expr, right: exp.Expr, total: DecimalType) -> exp.Expr:
    """`left + right`, both of type `total`, in `total` without rounding (NULL when the
    sum does not fit it, as Spark's SUM)."""
    narrow = _narrow(total)
    if narrow is not None:
        left, right = cast(left, narrow), cast(right, narrow)
    return cast(exp.Add(this=exp.Paren(this=left), expression=exp.Paren(this=right)), total)


def overflows(value: exp.Expr, total: DecimalType) -> exp.Expr:
    """Whether `exact_sum` would lose `value` (an addend too large to narrow); FALSE when
    the sum is exact for every value of `total`."""
    narrow = _narrow(total)
    if narrow is None:
        return exp.false()
    return exp.and_(
        exp.Not(this=exp.Is(this=value.copy(), expression=exp.null())),
        exp.Is(this=cast(value.copy(), narrow), expression=exp.null()),
    )


def half_way(
    quotient: exp.Expr,
    computed: DecimalType,
    result: DecimalType,
    total: DecimalType,
    count: exp.Expr,
) -> exp.Expr:
    """Whether casting `quotient` (the sum of type `total` over `count` rows, rounded
    HALF_UP to `computed.scale` places) to `result`'s fewer places could round
    differently from Spark's AVG (FALSE when nothing is rounded twice).

    Spark divides to 38 places or more, then rounds HALF_UP to the result's scale r; the
    cast rounds HALF_UP too (DuckDB rounds a DECIMAL half away from zero). Both agree but
    where the quotient, rounded to c = `computed.scale` places, lands exactly half-way
    between two values of scale r while the exact quotient x does not. With s the sum's
    scale and n the count, x = S / (10^s n) for an integer S, and a half-way value is
    h = H / 10^(r+1) for an integer H, so x - h = (S 10^(r+1) - H 10^s n) / (10^(s+r+1) n):
    x != h means |x - h| >= 1 / (10^(s+r+1) n). Rounding to c places moves x by at most
    10^-c / 2, so it reaches h from x != h only if n >= 2 * 10^(c-s-r-1). (x == h has r+1
    <= c places: the quotient is x itself, which both round once, alike.) So only groups
    of at least that many rows whose quotient's digits past r are exactly 5000... are
    suspects: none for a DECIMAL(12, 2) AVG of fewer than 2 * 10^9 rows."""
    if computed.scale <= result.scale:
        return exp.false()
    exponent = computed.scale - total.scale - result.scale - 1
    if exponent > 18:  # 2 * 10^19 rows: more than a BIGINT count holds
        return exp.false()
    one_more = DecimalType(MAX_PRECISION, result.scale + 1)
    shorter = cast(quotient.copy(), one_more)
    last_digit_five = exp.RegexpLike(
        this=exp.Cast(this=shorter.copy(), to=exp.DataType.build("STRING")),
        expression=exp.Literal.string("5(E[-+]?[0-9]+)?$"),
    )
    digits = exp.and_(exp.EQ(this=quotient.copy(), expression=shorter), last_digit_five)
    if exponent <= 0:
        return digits
    many = exp.GTE(this=count, expression=exp.Literal.number(2 * 10**exponent))
    return exp.and_(many, digits)
