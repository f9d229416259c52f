"""The Spark executor: the delta and merge trees as temp views of the refresh's session.

Temp views of one refresh are dropped (and uncached) when it ends. Everything a tree reads
is in the catalog (sources at their pinned snapshots, the storage table at the planned
one) or a temp view registered here (the change rows read by refresh/changes/reader.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import TYPE_CHECKING

import pyarrow as pa

from icemv.engine.arrow import collect_bounded
from icemv.sql.portable import Tree, built

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from icemv.refresh.patch.model import PatchTarget

NAME = "spark"


class SparkExecutor:
    name = NAME

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._names: list[str] = []

    def register(
        self, purpose: str, query: Tree, cache: bool = False, key: Hashable | None = None
    ) -> str:
        """Register `query` as a new temp view; returns its (internal, unique) name."""
        frame = self.spark.sql(built(query).sql(dialect="spark"))
        return self.register_frame(purpose, frame, cache)

    def register_frame(self, purpose: str, frame: DataFrame, cache: bool = False) -> str:
        name = f"__icemv_{purpose}_{uuid.uuid4().hex[:12]}"
        frame.createOrReplaceTempView(name)
        self._names.append(name)
        if cache:
            self.spark.catalog.cacheTable(name)
        return name

    def cache(self, name: str) -> None:
        self.spark.catalog.cacheTable(name)

    def collect(self, query: Tree, max_rows: int, key: Hashable | None = None) -> pa.Table | None:
        return collect_bounded(self.spark.sql(built(query).sql(dialect="spark")), max_rows)

    def stored(
        self, target: PatchTarget, keys: str | None, key_columns: list[tuple[str, str]]
    ) -> PatchTarget:
        return target  # Spark reads the whole storage table at the planned snapshot

    def reads_whole(self, target: PatchTarget) -> bool:
        return False  # the keys' rows are a relation of their own: MERGE reads them

    def drop(self) -> None:
        for name in self._names:
            self.spark.catalog.dropTempView(name)
        self._names.clear()
