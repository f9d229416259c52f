"""Who runs a refresh's delta and merge trees: Spark, or DuckDB on the driver.

Both executors run the same sqlglot trees (sql/delta.py, refresh/patch/), registered by
name and collected as Arrow; `refresh/embedded/route.py` picks one at plan time. What only Spark
does (writing a patch too big for the driver, reading sources the embedded engine does not
hold) asks for Spark through `spark_of`, which the embedded engine refuses with the
reason: the refresh then runs on Spark.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from icemv.errors import EngineRefusedError
from icemv.sql.portable import Tree

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from icemv.refresh.patch.model import PatchTarget


class Executor(Protocol):
    """Runs trees, or builders of them (`Tree`). `key`, where given, names the tree
    exactly: two trees given one key are one tree (what it is a function of, as
    `(purpose, ...)`); the embedded executor keeps its gate answer by the key (and the
    relations' types), so a refresh that builds the trees its MV's last refresh built
    need not build them at all."""

    name: str

    def register(
        self, purpose: str, query: Tree, cache: bool = False, key: Hashable | None = None
    ) -> str:
        """`query` as a relation later trees may name; its (unique) name."""

    def collect(self, query: Tree, max_rows: int, key: Hashable | None = None) -> pa.Table | None:
        """`query`'s rows as Arrow; None if there are more than `max_rows`."""

    def stored(
        self, target: PatchTarget, keys: str | None, key_columns: list[tuple[str, str]]
    ) -> PatchTarget:
        """The storage rows a patch reads: `target` as is (Spark reads the table), or
        the rows of the files whose bounds admit the keys of relation `keys` (`key_columns`:
        storage column, key column; `keys` None: every file), held by the executor."""

    def reads_whole(self, target: PatchTarget) -> bool:
        """Whether `stored` holds the same rows whatever the keys (a storage table of one
        data file is read whole), so a patch may read its keys' rows in the statement
        that computes them."""

    def drop(self) -> None:
        """Forget every relation registered."""


def spark_of(executor: Executor, why: str) -> SparkSession:
    """The Spark session, for what only Spark does; EngineRefusedError(`why`) elsewhere."""
    spark: SparkSession | None = getattr(executor, "spark", None)
    if spark is None:
        raise EngineRefusedError(why)
    return spark
