"""Spark's CAST of a string literal to a number, computed once at plan time.

A string cast in a tree is refused by the portability gate (Spark's non-ANSI CAST gives
NULL where DuckDB raises, trims and truncates where DuckDB rounds), but a *literal* cast
has one value, which this module computes as Spark 3.5 does and hands back as a literal
of the target type that DuckDB reads exactly. Only the plain forms are taken; anything
else (whitespace, hex, a `d`/`f` suffix, an exponent in a DECIMAL) is None: refused.

- DOUBLE: a decimal numeral with an optional exponent is parsed to the nearest double
  (Java's `Double.parseDouble` and Python's `float` both round correctly, so they agree
  bit for bit, -0.0 and overflow to infinity included); Java's `NaN` and `Infinity` with
  an optional sign, and then Spark's fallbacks in any case (`inf`, `+inf`, `infinity`,
  `+infinity`, `-inf`, `-infinity`, `nan`), are the special values.
- DECIMAL(p, s): a plain numeral rounds half up to scale s (Spark's `changePrecision`);
  more than p - s integer digits is NULL.
- TINYINT .. BIGINT: an integer numeral; out of the type's range is NULL.

The engine-comparison corpus (tests/test_engine_corpus.py) checks each form against Spark.
Pure: values only.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from icemv.sql.decimals import WIDE_CONTEXT
from icemv.sql.spark_types import SparkType

_FLOAT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_DECIMAL = re.compile(r"[+-]?\d+(\.\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
_JAVA_SPECIAL = re.compile(r"[+-]?(NaN|Infinity)")
_SPARK_SPECIAL = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf,
                  "+infinity": math.inf, "-inf": -math.inf, "-infinity": -math.inf,
                  "nan": math.nan}  # fmt: skip
_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}

# What a cast computed: the value's text for a DuckDB cast of a string literal (exact), or
# None for SQL NULL.
Computed = tuple[str | None]


def cast_string_literal(text: str, target: SparkType) -> Computed | None:
    """`CAST('text' AS target)` as Spark computes it, or None when not computed here."""
    if target.kind == "double":
        return _double(text)
    if target.kind == "decimal":
        return _decimal(text, target.precision, target.scale)
    if target.integral:
        return _integer(text, _BITS[target.kind])
    return None


def _double(text: str) -> Computed | None:
    if _FLOAT.fullmatch(text) or _JAVA_SPECIAL.fullmatch(text):
        value = float(text)
    elif text.lower() in _SPARK_SPECIAL:
        value = _SPARK_SPECIAL[text.lower()]
    else:
        return None
    if math.isnan(value):
        return ("NaN",)
    if math.isinf(value):
        return ("Infinity" if value > 0 else "-Infinity",)
    return (repr(value),)


def _decimal(text: str, precision: int, scale: int) -> Computed | None:
    if not _DECIMAL.fullmatch(text):
        return None
    try:
        rounded = Decimal(text).quantize(
            Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=WIDE_CONTEXT
        )
    except InvalidOperation:  # more digits than any DECIMAL holds: past the precision
        return (None,)
    whole = abs(int(rounded))
    if whole and len(str(whole)) > precision - scale:
        return (None,)
    return (format(rounded, "f"),)


def _integer(text: str, bits: int) -> Computed | None:
    if not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        return (None,)
    return (str(value),)
