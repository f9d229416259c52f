"""The generated views' world: three small tables of every type real tables have, and
random rows for them that are NULL-heavy, repetitive (duplicates, shared keys) and edgy
(DECIMAL at its precision, -0.0, timestamps across a DST change, unicode and empty strings).
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from dataclasses import dataclass
from typing import Any

Kind = str  # int, bigint, double, decimal, string, date, timestamp, bool


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    sql_type: str


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def ddl(self) -> str:
        return ", ".join(f"{c.name} {c.sql_type}" for c in self.columns)


def _c(name: str, kind: Kind, sql_type: str) -> Column:
    return Column(name, kind, sql_type)


TABLES = {
    "f": Table(
        "f",
        (
            _c("id", "int", "INT"),
            _c("k", "int", "INT"),
            _c("g", "string", "STRING"),
            _c("n", "bigint", "BIGINT"),
            _c("x", "double", "DOUBLE"),
            _c("amt", "decimal", "DECIMAL(12,2)"),
            _c("rate", "decimal", "DECIMAL(10,6)"),
            _c("day", "date", "DATE"),
            _c("ts", "timestamp", "TIMESTAMP"),
        ),
    ),
    "d": Table(
        "d",
        (
            _c("k", "int", "INT"),
            _c("name", "string", "STRING"),
            _c("w", "decimal", "DECIMAL(9,3)"),
            _c("flag", "bool", "BOOLEAN"),
            _c("day", "date", "DATE"),
        ),
    ),
    "e": Table(
        "e",
        (
            _c("k", "int", "INT"),
            _c("g", "string", "STRING"),
            _c("v", "bigint", "BIGINT"),
            _c("q", "decimal", "DECIMAL(20,10)"),
        ),
    ),
}

D = decimal.Decimal
_VALUES: dict[str, list[Any]] = {
    "id": list(range(1, 13)),
    "k": [1, 2, 3, 4, 5],
    "g": ["a", "b", "c", "", "É"],
    "name": ["one", "two", "x", "Ω", "\u00a0x\u3000"],  # spaces only Spark's TRIM keeps
    "n": [-3, 0, 2, 7, 9007199254740993],
    "v": [-1, 1, 5, 4294967296],
    # 1e16 + 0.5 is 1e16 in a DOUBLE: a sum that loses one of them cancels digits.
    "x": [0.5, -1.25, 2.0, -0.0, 0.1, 1e10, 1e16, -1e16],
    "amt": [D("0.00"), D("12.34"), D("-5.67"), D("0.01"), D("99999999.99"), D("7.77")],
    "rate": [D("0.123456"), D("1.000001"), D("-0.5"), D("3.141593")],
    "w": [D("1.500"), D("-0.001"), D("250.125"), D("0.333")],
    "q": [D("0.0000000001"), D("1234567890.1234567891"), D("-2.5"), D("1.0000000000")],
    "day": [dt.date(2024, 3, 9), dt.date(2024, 3, 10), dt.date(2024, 3, 11), dt.date(2023, 12, 31)],
    "ts": [
        dt.datetime(2024, 3, 10, 1, 30),
        dt.datetime(2024, 3, 10, 3, 30),
        dt.datetime(2024, 3, 10, 23, 59, 59, 999999),
        dt.datetime(2024, 11, 3, 1, 30),
        dt.datetime(1999, 12, 31, 23, 0),
    ],
    "flag": [True, False],
}
NULL_SHARE = 0.2


def value(rng: random.Random, column: Column) -> Any:
    if rng.random() < NULL_SHARE and column.name != "id":
        return None
    return rng.choice(_VALUES[column.name])


def some_value(rng: random.Random, column: Column) -> Any:
    """A value of the column's domain, never NULL."""
    return rng.choice(_VALUES[column.name])


def row(rng: random.Random, table: Table) -> tuple[Any, ...]:
    return tuple(value(rng, c) for c in table.columns)


def rows(rng: random.Random, table: Table, count: int) -> list[tuple[Any, ...]]:
    """`count` rows, some repeated whole (duplicates are rows too)."""
    made: list[tuple[Any, ...]] = []
    for _ in range(count):
        if made and rng.random() < 0.15:
            made.append(rng.choice(made))
        else:
            made.append(row(rng, table))
    return made


def literal(value: Any, column: Column) -> str:
    """A Spark SQL literal of `column`'s type."""
    if value is None:
        return f"CAST(NULL AS {column.sql_type})"
    if column.kind == "string":
        return "'" + str(value).replace("'", "''") + "'"
    if column.kind == "date":
        return f"DATE'{value.isoformat()}'"
    if column.kind == "timestamp":
        return f"TIMESTAMP'{value.isoformat(sep=' ')}'"
    if column.kind == "bool":
        return "true" if value else "false"
    if column.kind == "double":
        return f"CAST('{value!r}' AS DOUBLE)"
    if column.kind == "decimal":
        return f"CAST('{value:f}' AS {column.sql_type})"
    if column.kind == "bigint":
        return f"CAST({value} AS {column.sql_type})"
    return str(value)


def values_sql(table: Table, made: list[tuple[Any, ...]]) -> str:
    return ", ".join(
        "(" + ", ".join(literal(v, c) for v, c in zip(r, table.columns, strict=True)) + ")"
        for r in made
    )
