"""An MV's storage columns: the view's, in the view's order, then its hidden state.

The state (sql/state.py) is decided when the MV is created or replaced: icemv's analysis
says which state columns an aggregate view needs, Spark's analysis of the query gives
their types. Later refreshes read the layout back from the storage schema, so an MV made
before state columns existed keeps working with none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.table import Table
from pyiceberg.types import DecimalType, DoubleType, FloatType, IcebergType, LongType

from icemv.errors import ViewSqlError
from icemv.identifiers import Identifier
from icemv.lakehouse import Lakehouse
from icemv.sql.analysis import AggregateAnalysis, IvmAnalysis
from icemv.sql.pinning import pin_tables
from icemv.sql.state import (
    DEVIATIONS,
    STATE_PREFIX,
    StateColumn,
    aggregate_state,
    is_state_column,
    state_name,
    state_query,
)


@dataclass(frozen=True)
class StorageLayout:
    view_columns: tuple[str, ...]
    state_columns: tuple[str, ...]
    types: Mapping[str, IcebergType]  # of every storage column

    @classmethod
    def of(cls, storage: Table) -> StorageLayout:
        fields = storage.schema().fields
        return cls(
            view_columns=tuple(f.name for f in fields if not is_state_column(f.name)),
            state_columns=tuple(f.name for f in fields if is_state_column(f.name)),
            types={f.name: f.field_type for f in fields},
        )

    def state_of(self, analysis: IvmAnalysis) -> tuple[StateColumn, ...]:
        """The state this refresh maintains: the analysis's, if the storage holds exactly it.

        Empty when the MV has no state columns (made before they existed) or holds other
        ones than this icemv would derive: then only state-free strategies apply.
        """
        if not self.state_columns or not isinstance(analysis, AggregateAnalysis):
            return ()
        decimal_sums = {n for n in self.state_columns if isinstance(self.types[n], DecimalType)}
        state = aggregate_state(analysis, decimal_sums, self._bounded())
        return state if tuple(c.name for c in state) == self.state_columns else ()

    def _bounded(self) -> set[str]:
        """The outputs whose floating-point sum keeps an error bound (`_icemv_error_*`)."""
        prefix = state_name("error", "")
        return {n[len(prefix) :] for n in self.state_columns if n.startswith(prefix)}

    def floating_sums(self, analysis: IvmAnalysis) -> bool:
        """Whether the view's SUMs, AVGs (their hidden sums; without state, AVG recomputes
        anyway) or deviations add floating-point values (`aggregate_strategy`'s
        `floating`): a deviation always does, a SUM or AVG when its column is a DOUBLE or
        FLOAT (AVG of integers sums as DOUBLE, as Spark's does), unless its sum keeps an
        error bound (sql/state.py) that merges deletes."""
        if not isinstance(analysis, AggregateAnalysis):
            return False
        bounded = self._bounded() if self.state_of(analysis) else set()
        for aggregate in analysis.aggregates:
            if aggregate.func in DEVIATIONS:
                return True
            if aggregate.func not in ("sum", "avg"):
                continue
            column = self.view_columns[aggregate.position]
            if column in bounded:
                continue
            name = state_name("sum", column) if aggregate.func == "avg" else column
            if isinstance(self.types.get(name), (FloatType, DoubleType)):
                return True
        return False

    def state_placeholders(self) -> list[tuple[str, str]]:
        """(name, Spark SQL type) of each state column, for a NULL filler."""
        return [(name, spark_type(self.types[name])) for name in self.state_columns]


def spark_type(field_type: IcebergType) -> str:
    """The Spark SQL type of a state column (BIGINT, DOUBLE or DECIMAL) or an AVG column."""
    if isinstance(field_type, LongType):
        return "BIGINT"
    if isinstance(field_type, DoubleType):
        return "DOUBLE"
    if isinstance(field_type, DecimalType):
        return f"DECIMAL({field_type.precision}, {field_type.scale})"
    raise ValueError(f"unexpected state column type {field_type}")


def check_view_columns(names: list[str]) -> None:
    reserved = [n for n in names if is_state_column(n)]
    if reserved:
        raise ViewSqlError(
            f"output column names may not start with {STATE_PREFIX!r} (reserved for icemv's "
            f"state columns): {', '.join(reserved)}"
        )


def state_schema(
    lakehouse: Lakehouse, analysis: IvmAnalysis, pins: Mapping[Identifier, int | None]
) -> pa.Schema:
    """The Arrow schema of the state columns an MV with this analysis keeps (maybe none)."""
    if not isinstance(analysis, AggregateAnalysis):
        return pa.schema([])
    # First with every AVG sum in its argument's own type, to learn which are DECIMAL, and
    # the SUMs' and AVGs' types, to learn which sum floating-point values.
    probe = aggregate_state(analysis, decimal_sums={c.name for c in aggregate_state(analysis)})
    if not probe:
        return pa.schema([])
    sums = {c.name for c in probe if c.role == "sum"}
    probed = _spark_types(lakehouse, analysis, probe, pins)
    decimal = {n for n, t in probed.items() if n in sums and pa.types.is_decimal(t)}
    floating = set()
    for aggregate in analysis.aggregates:
        output = analysis.output_columns[aggregate.position]
        summed = state_name("sum", output) if aggregate.func == "avg" else output
        summed_type = probed.get(summed)
        if (
            aggregate.func in ("sum", "avg")
            and summed_type is not None
            and (pa.types.is_floating(summed_type))
        ):
            floating.add(output)
    state = aggregate_state(analysis, decimal, floating)
    types = _spark_types(lakehouse, analysis, state, pins)
    return pa.schema([pa.field(c.name, types[c.name], nullable=True) for c in state])


def _spark_types(
    lakehouse: Lakehouse,
    analysis: AggregateAnalysis,
    state: tuple[StateColumn, ...],
    pins: Mapping[Identifier, int | None],
) -> dict[str, pa.DataType]:
    from pyspark.sql.pandas.types import to_arrow_schema

    query = pin_tables(state_query(analysis, state), lakehouse.catalog_name, pins)
    schema = to_arrow_schema(lakehouse.spark.sql(query.sql(dialect="spark")).schema)
    return {field.name: field.type for field in schema}  # the view's columns too
