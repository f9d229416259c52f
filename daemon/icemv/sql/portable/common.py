"""What every part of the gate shares: its refusal, its answer, the relations' and
scopes' types, strict casts and the reading of Spark's type names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from icemv.errors import EngineRefusedError
from icemv.sql.decimals import DecimalType
from icemv.sql.functions.model import call
from icemv.sql.spark_types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    SparkType,
    built,
)

Schema = Mapping[str, SparkType]  # a relation's columns, in order


@dataclass(frozen=True)
class Portable:
    sql: str  # DuckDB SQL
    columns: tuple[tuple[str, SparkType], ...]  # the output columns with Spark's types


# Kept per process: a fleet's MVs run a few trees each.


def duckdb_type(spark: SparkType) -> exp.DataType:
    if spark.kind == "timestamp":
        return built("TIMESTAMPTZ", None)
    if spark.kind == "timestamp_ntz":
        return built("TIMESTAMP", None)
    return spark.build()


# Session zones of offset 0 at every instant (tzdb's fixed zones): in them a TIMESTAMP's
# local time is its UTC time.
UTC_ZONES = frozenset({"UTC", "Etc/UTC", "GMT", "Etc/GMT"})


def _utc_local(node: exp.Expr) -> exp.Expr:
    """A TIMESTAMPTZ's local time in a UTC session, as DuckDB's TIMESTAMP of the same
    microseconds (`make_timestamp`): no ICU calendar, which DuckDB binds anew on every
    EXECUTE of a prepared statement that uses it (see `Gate.utc`)."""
    return call("make_timestamp", call("epoch_us", node))


def _utc_instant(node: exp.Expr) -> exp.Expr:
    """The TIMESTAMPTZ whose local time in a UTC session is the TIMESTAMP `node`."""
    return call("make_timestamptz", call("epoch_us", node))


def _cast(node: exp.Expr, to: SparkType) -> exp.Cast:
    """A strict cast in DuckDB: a value that does not fit raises (and Spark computes it)."""
    return exp.Cast(this=node, to=duckdb_type(to))


def _rebuilt(node: exp.Expr, **children: Any) -> exp.Expr:
    """`node` anew with `children` set, its other arguments copied (no deep copy of what
    the gate renders anyway: a node belongs to one tree)."""
    args: dict[str, Any] = {}
    for key, value in node.args.items():
        if key in children:
            args[key] = children[key]
        elif isinstance(value, exp.Expr):
            args[key] = value.copy()
        elif isinstance(value, list):
            args[key] = [v.copy() if isinstance(v, exp.Expr) else v for v in value]
        else:
            args[key] = value
    for key, value in children.items():
        args.setdefault(key, value)
    return type(node)(**args)


def _text(node: exp.Expr) -> str:
    return node.sql(dialect="spark")[:80]


def _refuse(node: exp.Expr, why: str) -> EngineRefusedError:
    return EngineRefusedError(f"{why}: {_text(node)}")


_DATE_LITERAL = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP_LITERAL = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?")
_TRUNC_UNITS = frozenset({"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"})
_PARTS = (exp.Year, exp.Quarter, exp.Month, exp.Day, exp.DayOfMonth, exp.Hour, exp.Minute,
          exp.Second)  # fmt: skip
_SELECT_PARTS = frozenset({"expressions", "from_", "joins", "where", "group", "having",
                           "laterals", "hint", "distinct", "with_", "order",
                           "limit"})  # fmt: skip
_UNION_PARTS = frozenset({"this", "expression", "distinct", "with_"})


class _Scope:
    """The relations a SELECT reads, by alias: each column's Spark type; `parent`: the
    enclosing SELECT's, for a correlated subquery."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.relations: dict[str, dict[str, SparkType]] = {}
        self.parent = parent

    def add(self, alias: str, columns: Mapping[str, SparkType]) -> None:
        self.relations[alias] = dict(columns)

    def column(self, node: exp.Column) -> SparkType:
        if node.table:
            if node.table not in self.relations and self.parent is not None:
                return self.parent.column(node)  # an outer row's column
            found = self.relations.get(node.table, {}).get(node.name)
            if found is None:
                raise _refuse(node, "an unknown column")
            return found
        matches = [r[node.name] for r in self.relations.values() if node.name in r]
        if len(matches) != 1:
            raise _refuse(node, "an unknown or ambiguous column")
        return matches[0]

    def star(self, table: str | None) -> list[tuple[str, SparkType]]:
        picked = [self.relations[table]] if table else list(self.relations.values())
        return [item for relation in picked for item in relation.items()]


def _as_decimal(node: exp.Expr, kind: SparkType) -> DecimalType:
    """An operand of DECIMAL arithmetic as Spark types it: an integer literal by its own
    digits (3 and -3 are DECIMAL(1, 0): Spark reads a minus sign before a number as part of
    the literal, not `-(3)`), an integer column by its type's (INT is DECIMAL(10, 0))."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        node = node.this
    if kind.integral and isinstance(node, exp.Literal) and not node.is_string:
        return DecimalType(max(len(node.this.lstrip("-")), 1), 0)
    return kind.decimal()


_SIMPLE_TYPES = {
    "BOOLEAN": BOOLEAN, "INT": INT, "BIGINT": BIGINT, "DOUBLE": DOUBLE, "STRING": STRING,
    "DATE": DATE, "TIMESTAMP": TIMESTAMP, "TINYINT": SparkType("tinyint"),
    "SMALLINT": SparkType("smallint"), "FLOAT": SparkType("float"),
    "TIMESTAMP_NTZ": TIMESTAMP_NTZ,
}  # fmt: skip


def spark_type_of(data_type: exp.DataType) -> SparkType:
    if set(data_type.args) == {"this"}:  # a bare type: by its kind, as its text would say
        known = _BARE_TYPES.get(data_type.this)
        if known is not None:
            return known
    decimal = _decimal_parameters(data_type)
    if decimal is not None:
        return SparkType("decimal", *decimal)
    return spark_type_of_text(data_type.sql(dialect="spark").upper())


def _decimal_parameters(data_type: exp.DataType) -> tuple[int, int] | None:
    """DECIMAL(p, s) read off the node, as its Spark text would say it (rendering a type
    is a generator pass, ~50 us, and the gate reads dozens per merge tree); None for any
    other shape."""
    if data_type.this != exp.DataType.Type.DECIMAL or set(data_type.args) - {
        "this",
        "expressions",
        "nested",
    }:
        return None
    parameters = data_type.expressions
    if len(parameters) != 2 or not all(isinstance(p, exp.DataTypeParam) for p in parameters):
        return None
    values = [p.this for p in parameters]
    if not all(isinstance(v, exp.Literal) and not v.is_string and str(v.this).isdigit()
               for v in values):  # fmt: skip
        return None
    return int(values[0].this), int(values[1].this)


def _copied_column(node: exp.Column) -> exp.Expr:
    """`node` anew: a column named by quoted or unquoted identifiers is rebuilt (a deep
    copy costs 3x); any other shape is copied."""
    table = node.args.get("table")
    name = node.this
    if set(node.args) - {"this", "table"} or not isinstance(name, exp.Identifier) or (
        table is not None and not isinstance(table, exp.Identifier)
    ) or set(name.args) - {"this", "quoted"} or (
        table is not None and set(table.args) - {"this", "quoted"}
    ):  # fmt: skip
        return node.copy()
    return exp.Column(
        this=exp.Identifier(this=name.this, quoted=name.args.get("quoted")),
        table=None if table is None else exp.Identifier(this=table.this,
                                                        quoted=table.args.get("quoted")),
    )  # fmt: skip


def spark_type_of_text(text: str) -> SparkType:
    if text in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[text]
    match = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", text)
    if match:
        return SparkType("decimal", int(match.group(1)), int(match.group(2)))
    if text == "DECIMAL":
        return SparkType("decimal", 10, 0)
    return SparkType("complex")


# The bare kinds whose Spark text names one of the simple types (rendering a type is a
# generator pass; the gate reads hundreds of them per tree).
_BARE_TYPES = {
    kind: _SIMPLE_TYPES[text]
    for kind in exp.DataType.Type
    if (text := exp.DataType(this=kind).sql(dialect="spark").upper()) in _SIMPLE_TYPES
}


def _safe_cast(source: SparkType, target: SparkType) -> bool:
    """Casts that cannot fail, wrap or round in either engine."""
    if source == target or source.kind == "null":
        return target.kind != "complex"
    if source.integral and target.integral:
        return True  # narrowing wraps in Spark, raises in DuckDB (rendered strict): Spark then
    if source.integral and target.kind == "double":
        return True
    if source.kind == "decimal" and target.kind == "decimal":
        return True  # fewer places round half up in both; too few digits raise in DuckDB
    if source.integral and target.kind == "decimal":
        return True  # exact where the digits fit; where not, DuckDB raises: Spark then
    if source.kind == "decimal" and target.kind == "double":
        # Both the nearest DOUBLE (Spark: BigDecimal.doubleValue; DuckDB 2.0.1, pinned, at
        # every precision: 53,600 random values of DECIMAL(16..38, s) and the values where
        # rounding the unscaled integer first would differ, checked against exact rounding)
        return True
    # A timestamp's date and a date's midnight: in the session time zone (DuckDB's
    # connection is set to it) for TIMESTAMP; for TIMESTAMP_NTZ the local date-time's date,
    # no zone. Neither fails, years 1-9999 in both (tests/test_engine_corpus.py).
    if {source, target} in ({TIMESTAMP, DATE}, {TIMESTAMP_NTZ, DATE}):
        return True
    if source.kind == "decimal" and target == STRING:
        # Spark writes BigDecimal.toString: plain digits, every place of the scale, unless
        # the exponent falls below -6, which a scale of at most 6 never lets it (DuckDB
        # writes the plain digits always)
        return source.scale <= 6
    return target == STRING and (source.integral or source in (DATE, STRING))
