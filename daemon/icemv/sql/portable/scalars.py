"""Scalar functions the gate types by hand (those of the table: base.py)."""

from __future__ import annotations

from sqlglot import exp

from icemv.sql.functions import rounded_type
from icemv.sql.portable.base import Base
from icemv.sql.portable.common import (
    _TRUNC_UNITS,
    _cast,
    _rebuilt,
    _refuse,
    _utc_instant,
    _utc_local,
)
from icemv.sql.spark_types import (
    DATE,
    INT,
    NULL,
    STRING,
    TIMESTAMP,
    SparkType,
)


class Scalars(Base):
    def unary_same(self, node: exp.Func) -> tuple[exp.Expr, SparkType]:
        """abs(x): the argument's type, numbers only (of the smallest value: Spark wraps,
        DuckDB raises, and Spark computes it)."""
        inner, kind = self.typed(node.this)
        if not (kind.numeric or kind.kind == "null"):
            raise _refuse(node, f"abs of {kind.describe()}")
        return _rebuilt(node, this=inner), kind

    def trim(self, node: exp.Trim) -> tuple[exp.Expr, SparkType]:
        """Spark trims only the ASCII space (or the characters named), DuckDB's bare TRIM
        every Unicode space too (U+00A0, U+3000): the characters are always named."""
        inner, kind = self.typed(node.this)
        if kind not in (STRING, NULL):
            raise _refuse(node, f"TRIM of {kind.describe()}")
        characters = node.args.get("expression")
        if characters is None:
            characters = exp.Literal.string(" ")
        elif not (isinstance(characters, exp.Literal) and characters.is_string):
            raise _refuse(node, "TRIM of characters other than a string literal")
        position = node.args.get("position")
        trimmed = exp.Trim(this=inner, expression=characters.copy(), position=position)
        return trimmed, STRING

    def substring(self, node: exp.Substring) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        start, length = node.args.get("start"), node.args.get("length")
        literal = [p for p in (start, length) if p is not None]
        if kind not in (STRING, NULL) or not all(
            isinstance(p, exp.Literal) and not p.is_string and int(p.this) >= 0 for p in literal
        ) or (start is not None and int(start.this) < 1):  # fmt: skip
            raise _refuse(node, "SUBSTR other than of a string from literal positions >= 1")
        return _rebuilt(node, this=inner), STRING

    def concat(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
        values, kinds = self.each(parts)
        if any(k not in (STRING, NULL) for k in kinds):
            raise _refuse(node, "CONCAT of non-strings (Spark's implicit casts)")
        joined = values[0]
        for value in values[1:]:
            joined = exp.DPipe(this=joined, expression=value, safe=False)
        return _cast(exp.Paren(this=joined), STRING), STRING

    def extremum(self, node: exp.Func) -> tuple[exp.Expr, SparkType]:
        values, kinds = self.each([node.this, *node.expressions])
        kind = self.joint(node, kinds)
        # Spark's GREATEST / LEAST skip NULLs (however the node was built).
        copy = _rebuilt(node, this=values[0], expressions=values[1:], ignore_nulls=True)
        return (_cast(copy, kind) if kind.kind == "decimal" else copy), kind

    def round(self, node: exp.Round) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        digits = node.args.get("decimals")
        places = 0 if digits is None else digits
        if not (isinstance(places, int) or (isinstance(places, exp.Literal) and
                                            not places.is_string)):  # fmt: skip
            raise _refuse(node, "ROUND to a non-literal scale")
        scale = places if isinstance(places, int) else int(places.this)
        if kind.kind != "decimal" or scale < 0:
            raise _refuse(node, f"ROUND of {kind.describe()}")
        result = rounded_type(kind, scale)
        return _cast(_rebuilt(node, this=inner), result), result

    def as_timestamp(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        """sqlglot's wrapper of date_format's value: a TIMESTAMP as is, a DATE at midnight
        in the session zone (Spark's cast); strings are parsed by Spark only."""
        inner, kind = self.typed(node.this)
        if kind not in (DATE, TIMESTAMP, NULL):
            raise _refuse(node, f"a TIMESTAMP of {kind.describe()}")
        return (_cast(inner, TIMESTAMP) if kind == DATE else inner), TIMESTAMP

    def to_date(self, node: exp.Expr) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        if node.args.get("format") or kind not in (DATE, TIMESTAMP, NULL):
            raise _refuse(node, f"a DATE of {kind.describe()}")
        return _cast(inner, DATE), DATE

    def date_part(self, node: exp.Func) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        time_only = isinstance(node, exp.Hour | exp.Minute | exp.Second)
        allowed = (TIMESTAMP, NULL) if time_only else (DATE, TIMESTAMP, NULL)
        if kind not in allowed:
            raise _refuse(node, f"{type(node).__name__} of {kind.describe()}")
        if kind == TIMESTAMP and self.gate.utc:
            inner = _utc_local(inner)
        return _cast(_rebuilt(node, this=inner), INT), INT

    def date_add(self, node: exp.TsOrDsAdd) -> tuple[exp.Expr, SparkType]:
        (day, count), (a, b) = self.each([node.this, node.expression])
        unit = node.args.get("unit")
        if a not in (DATE, NULL) or not (b.integral or b.kind == "null") or (
            unit is not None and unit.name.upper() != "DAY"
        ):  # fmt: skip
            raise _refuse(node, f"date_add of {a.describe()} and {b.describe()}")
        return _cast(_rebuilt(node, this=day, expression=count), DATE), DATE

    def trunc(self, node: exp.TimestampTrunc) -> tuple[exp.Expr, SparkType]:
        inner, kind = self.typed(node.this)
        unit = node.args.get("unit")
        name = unit.name.upper() if unit is not None else ""
        if kind not in (TIMESTAMP, NULL) or name not in _TRUNC_UNITS:
            raise _refuse(node, f"date_trunc('{name}') of {kind.describe()}")
        if kind == TIMESTAMP and self.gate.utc:
            return _utc_instant(_rebuilt(node, this=_utc_local(inner))), TIMESTAMP
        return _cast(_rebuilt(node, this=inner), TIMESTAMP), TIMESTAMP
