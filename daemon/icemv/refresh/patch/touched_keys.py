"""K, the keys a keyed delta's changes touch, evaluated once per refresh (sql/delta.py).

Inline, K is a CTE that Spark evaluates at every reference: each restricted source read
(two per table occurrence: new and old snapshots) would read the change rows again, and
the restricted reads themselves scan every file of the source. Here K is a cached temp
view, computed by one Spark job that also brings it to the driver when it is small
(`KEYS_ON_DRIVER` values); its bounds then become literals (`key BETWEEN lo AND hi`, and
`key IN (...)` up to `IN_LIST_MAX` values, `OR key IS NULL` when K holds NULL) that
Iceberg prunes files and row groups with. The exact null-safe semi join with K stays.

Literals are used only where they compare exactly as the key does: integral, string,
date and decimal keys, on a table column of the same type family. Floating point (NaN,
-0.0), timestamps and nested types are matched by the semi join alone.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from pyiceberg.schema import Schema
from pyiceberg.types import (
    DateType,
    DecimalType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
)
from sqlglot import exp

from icemv.engine.arrow import collect_bounded
from icemv.identifiers import Identifier
from icemv.refresh.exec.spark import SparkExecutor
from icemv.refresh.patch.sqltree import col, render, view
from icemv.sql.delta import IN_LIST_MAX, DeltaInputs, KeyBounds, TouchedKeys, touched_keys_query
from icemv.sql.keys import KEY_META
from icemv.sql.names import KEY

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

# K up to this many rows (duplicates included) is collected for its literal bounds.
KEYS_ON_DRIVER = 100_000


def touched_keys(
    views: SparkExecutor,
    query: exp.Query,
    inputs: DeltaInputs,
    source_schema: Callable[[Identifier], Schema | None],
) -> TouchedKeys | None:
    """K of `query` (its tables tagged with key columns) over `inputs`' delta views;
    `source_schema` gives a source table's schema from the refresh's own loads."""
    keys_query = touched_keys_query(query, inputs)
    if keys_query is None:
        return None
    name = views.register("keys", keys_query, cache=True)
    spark = views.spark
    family = _family(spark.table(name).schema[KEY].dataType)
    if family is None:  # no literal compares exactly: the semi join alone
        return TouchedKeys(name)
    collected = collect_bounded(spark.table(name), KEYS_ON_DRIVER)
    if collected is not None:
        bounds = key_bounds(family, collected.column(0).to_pylist())
    else:  # large K: its bounds by one more job over the cached view
        key = col(KEY)
        stats = spark.sql(
            render(
                exp.select(
                    exp.Min(this=key.copy()),
                    exp.Max(this=key.copy()),
                    exp.CountIf(this=exp.Is(this=key.copy(), expression=exp.null())),
                ).from_(view(name))
            )
        ).first()
        assert stats is not None  # an aggregate without GROUP BY always has one row
        values = [stats[0], stats[1]] + ([None] if stats[2] else [])
        bounds = key_bounds(family, values, in_list=False)
    bounded = frozenset(
        (source, column)
        for source, column in _occurrences(query)
        if iceberg_family(_column_type(source_schema(source), column)) == family
    )
    return TouchedKeys(name, bounds, bounded, broadcast=collected is not None)


def key_bounds(family: str, values: Sequence[object], in_list: bool = True) -> KeyBounds:
    """The literal bounds of `values` (Python values of a `family` key; None is NULL)."""
    present = sorted({v for v in values if v is not None})  # type: ignore[type-var]
    has_null = any(v is None for v in values)
    if not present:
        return KeyBounds(None, None, (), has_null)
    listed = tuple(_literal(family, v) for v in present) if len(present) <= IN_LIST_MAX else ()
    return KeyBounds(
        _literal(family, present[0]),
        _literal(family, present[-1]),
        listed if in_list else (),
        has_null,
    )


def _literal(family: str, value: object) -> exp.Expr:
    if family == "integral" and isinstance(value, int) and not isinstance(value, bool):
        return exp.Literal.number(value)
    if family == "decimal" and isinstance(value, Decimal):
        return exp.Literal.number(format(value, "f"))
    if family == "string" and isinstance(value, str):
        return exp.Literal.string(value)
    if family == "date" and isinstance(value, datetime.date):
        return exp.Cast(this=exp.Literal.string(value.isoformat()), to=exp.DataType.build("DATE"))
    raise TypeError(f"a {family} key has the value {value!r}")


def _family(data_type: DataType | None) -> str | None:
    """The type family whose values compare exactly as literals, or None."""
    from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

    if isinstance(data_type, IntegralType):
        return "integral"
    if isinstance(data_type, DecimalType):
        return "decimal"
    if isinstance(data_type, StringType):
        return "string"
    if isinstance(data_type, DateType):
        return "date"
    return None


def _occurrences(query: exp.Query) -> set[tuple[Identifier, str]]:
    return {
        (Identifier((table.db,), table.name), str(table.meta[KEY_META]))
        for table in query.find_all(exp.Table)
        if KEY_META in table.meta  # a table read whole is not restricted
    }


def iceberg_family(field_type: IcebergType | None) -> str | None:
    """`_family` of a source column's Iceberg type (as Spark reads it)."""
    if isinstance(field_type, IntegerType | LongType):
        return "integral"
    if isinstance(field_type, DecimalType):
        return "decimal"
    if isinstance(field_type, StringType):
        return "string"
    if isinstance(field_type, DateType):
        return "date"
    return None


def field_named(schema: Schema, column: str) -> NestedField | None:
    """The top-level field `column` names in a source schema, matched as Spark resolves
    names (exactly, else case-insensitively when that is unambiguous); None: not found."""
    fields = schema.fields
    exact = [f for f in fields if f.name == column]
    folded = [f for f in fields if f.name.lower() == column.lower()]
    found = exact or folded
    return found[0] if len(found) == 1 or exact else None


def _column_type(schema: Schema | None, column: str) -> IcebergType | None:
    field = field_named(schema, column) if schema is not None else None
    return field.field_type if field is not None else None
