"""Spark rows to Arrow on the driver, bounded.

`DataFrame._collect_as_arrow()` is private to classic PySpark 3.5 (Spark 4 has a public
`toArrow()`; Spark Connect has neither under that name): this is its only caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def collect_bounded(df: DataFrame, max_rows: int) -> pa.Table | None:
    """The rows of `df` as Arrow, or None if there are more than `max_rows`.

    One Spark job either way: the limit runs inside it, so an oversized result is never
    shipped to the driver.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = df.limit(max_rows + 1)._collect_as_arrow()
    if sum(batch.num_rows for batch in batches) > max_rows:
        return None
    if not batches:
        return to_arrow_schema(df.schema).empty_table()
    return pa.Table.from_batches(batches)
