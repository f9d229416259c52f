"""`icemv mv verify`: does the storage table equal the view's SQL at the recorded snapshots?

What readers see (the storage table's current snapshot, the view's columns) is compared with
the view's SQL evaluated by Spark at the source snapshots the latest refresh record names.
Both sides are cut into `slices` by a hash of the row's key (an aggregate's group keys, else
the whole row), and each slice is summarised as (rows, sum of row hashes) in one aggregation
per side, so a large MV is compared without moving its rows; `sample` checks a share of
the slices (the daemon's scheduled audit, within a budget). Only the rows of slices that
differ are fetched, at most `max_rows` per side, and paired once more with a tolerance for
floating-point values (sums merged in another order than a full evaluation's differ in the
last bits) and lists compared as multisets (COLLECT_LIST's order is Spark's). What is left
is the difference.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from icemv.errors import IcemvError
from icemv.identifiers import Identifier
from icemv.lakehouse import CatalogReads, Lakehouse
from icemv.mv.history import latest_refresh
from icemv.mv.layout import StorageLayout
from icemv.mv.model import load_materialized_view
from icemv.sql.analysis import AggregateAnalysis, analyse
from icemv.sql.parse import parse_query
from icemv.sql.pinning import pin_sources, table_at

DEFAULT_SLICES = 64
DEFAULT_MAX_ROWS = 10_000
# Floating-point values are hashed rounded to this many places, and compared within it.
FLOAT_PLACES = 6
_SAMPLE_ROWS = 5  # differing rows a report keeps per side


class VerifyError(IcemvError):
    """The MV cannot be verified (never refreshed, storage missing)."""


@dataclass(frozen=True)
class VerifyReport:
    mv: Identifier
    storage_snapshot_id: int
    slices: int
    checked: tuple[int, ...]  # the slices compared
    storage_rows: int  # in the checked slices
    view_rows: int
    differing_slices: tuple[int, ...]
    only_in_storage: int  # rows, after pairing within tolerance (-1: too many to fetch)
    only_in_view: int
    samples_storage: tuple[tuple[Any, ...], ...]
    samples_view: tuple[tuple[Any, ...], ...]
    seconds: float

    @property
    def clean(self) -> bool:
        return not self.differing_slices

    def summary(self) -> str:
        """One bounded line: what was checked and what differed."""
        checked = f"{len(self.checked)} of {self.slices} slices"
        if self.clean:
            return f"consistent: {checked}, {self.storage_rows} rows"
        if self.only_in_storage < 0:
            extra = "more rows than the fetch limit"
        else:
            extra = (
                f"{self.only_in_storage} rows only in storage, {self.only_in_view} only in the view"
            )
        return f"differs: {len(self.differing_slices)} of {checked}; {extra}"


def verify_mv(
    lakehouse: Lakehouse,
    identifier: Identifier,
    slices: int = DEFAULT_SLICES,
    sample: float = 1.0,
    max_rows: int = DEFAULT_MAX_ROWS,
    seed: int | None = None,
) -> VerifyReport:
    started = time.monotonic()
    if slices < 1 or not 0 < sample <= 1:
        raise VerifyError("slices must be at least 1 and sample within (0, 1]")
    reads = CatalogReads(lakehouse)
    mv = load_materialized_view(lakehouse, identifier, reads)
    storage = reads.load_table(mv.storage)
    record = latest_refresh(storage)
    current = storage.current_snapshot()
    if record is None or current is None:
        raise VerifyError(f"{identifier} was never refreshed: nothing to verify")
    at = {Identifier(s.namespace, s.name): s.snapshot_id for s in record.state.tables()}
    namespace = mv.version.default_namespace or identifier.namespace
    pinned = pin_sources(reads, mv.sql, namespace, at=at)
    columns = list(StorageLayout.of(storage).view_columns)
    stored = exp.select(*[_col(c) for c in columns]).from_(
        table_at(lakehouse.catalog_name, mv.storage, current.snapshot_id, "s")
    )
    view = exp.select(*[_col(c) for c in columns]).from_(
        exp.Subquery(this=parse_query(pinned.sql), alias=exp.TableAlias(this=_ident("v")))
    )
    analysis = analyse(reads, mv.sql, namespace)
    keys = columns
    if isinstance(analysis, AggregateAnalysis) and analysis.keys:
        keys = [analysis.output_columns[k.position] for k in analysis.keys]
    spark = lakehouse.spark
    types = dict(spark.sql(view.sql(dialect="spark")).dtypes)
    chosen = _chosen(slices, sample, seed)
    sides = [_sliced(q, columns, keys, types, slices, chosen) for q in (stored, view)]
    summaries = [
        {row[0]: (row[1], row[2]) for row in spark.sql(_summary(side)).collect()} for side in sides
    ]
    differing = tuple(
        s for s in chosen if summaries[0].get(s, (0, 0)) != summaries[1].get(s, (0, 0))
    )
    storage_rows = sum(n for n, _ in summaries[0].values())
    view_rows = sum(n for n, _ in summaries[1].values())
    only_storage = only_view = 0
    samples: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
    if differing:
        fetched = [_rows(spark, side, differing, max_rows) for side in sides]
        if fetched[0] is None or fetched[1] is None:
            only_storage = only_view = -1
        else:
            left, right = _unpaired(fetched[0], fetched[1])
            only_storage, only_view = len(left), len(right)
            samples = (left[:_SAMPLE_ROWS], right[:_SAMPLE_ROWS])
            if not left and not right:  # the slices differed by float digits only
                differing = ()
    return VerifyReport(
        mv=identifier,
        storage_snapshot_id=current.snapshot_id,
        slices=slices,
        checked=tuple(chosen),
        storage_rows=storage_rows,
        view_rows=view_rows,
        differing_slices=differing,
        only_in_storage=only_storage,
        only_in_view=only_view,
        samples_storage=tuple(samples[0]),
        samples_view=tuple(samples[1]),
        seconds=time.monotonic() - started,
    )


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=_ident(name), table=_ident(table) if table else None)


def _chosen(slices: int, sample: float, seed: int | None) -> list[int]:
    count = max(1, math.ceil(slices * sample))
    if count >= slices:
        return list(range(slices))
    return sorted(random.Random(seed).sample(range(slices), count))


def _hashable(name: str, spark_type: str) -> exp.Expr:
    """A column as it enters the row hash: floating point rounded (see FLOAT_PLACES)."""
    column = _col(name, "q")
    if spark_type in ("double", "float"):
        return exp.Round(this=column, decimals=exp.Literal.number(FLOAT_PLACES))
    return column


def _sliced(
    query: exp.Select,
    columns: Sequence[str],
    keys: Sequence[str],
    types: dict[str, str],
    slices: int,
    chosen: Sequence[int],
) -> exp.Select:
    """The rows with their slice (by the keys' hash) and their row hash, chosen slices only."""
    row_hash = exp.Anonymous(
        this="xxhash64", expressions=[_hashable(c, types.get(c, "")) for c in columns]
    )
    key_hash = exp.Anonymous(
        this="xxhash64", expressions=[_hashable(c, types.get(c, "")) for c in keys]
    )
    slice_of = exp.Anonymous(this="pmod", expressions=[key_hash, exp.Literal.number(slices)])
    inner = exp.select(
        exp.Column(this=exp.Star(), table=_ident("q")),
        exp.alias_(slice_of, "__slice", quoted=True),
        exp.alias_(row_hash, "__hash", quoted=True),
    ).from_(exp.Subquery(this=query, alias=exp.TableAlias(this=_ident("q"))))
    outer = exp.select(exp.Star()).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=_ident("h")))
    )
    if len(chosen) < slices:
        outer = outer.where(
            exp.In(this=_col("__slice"), expressions=[exp.Literal.number(s) for s in chosen])
        )
    return outer


def _summary(side: exp.Select) -> str:
    """Per slice: rows and the (wrapping) sum of their hashes: equal multisets, equal sums."""
    return (
        exp.select(_col("__slice"), exp.Count(this=exp.Star()), exp.Sum(this=_col("__hash")))
        .from_(exp.Subquery(this=side, alias=exp.TableAlias(this=_ident("r"))))
        .group_by(_col("__slice"))
        .sql(dialect="spark")
    )


def _rows(
    spark: Any, side: exp.Select, slices: Sequence[int], max_rows: int
) -> list[tuple[Any, ...]] | None:
    """The rows of these slices (without slice and hash); None when more than `max_rows`."""
    query = (
        exp.select(exp.Star())
        .from_(exp.Subquery(this=side, alias=exp.TableAlias(this=_ident("r"))))
        .where(exp.In(this=_col("__slice"), expressions=[exp.Literal.number(s) for s in slices]))
        .limit(max_rows + 1)
    )
    rows = [tuple(row)[:-2] for row in spark.sql(query.sql(dialect="spark")).collect()]
    return None if len(rows) > max_rows else rows


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else round(value, FLOAT_PLACES)
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        return tuple(sorted(items, key=lambda v: (v is None, repr(v))))
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _normal(v)) for k, v in value.items()))
    if hasattr(value, "asDict"):  # a struct (pyspark Row)
        return tuple(_normal(v) for v in value)
    return value


def _close(left: tuple[Any, ...], right: tuple[Any, ...]) -> bool:
    for a, b in zip(left, right, strict=True):
        if isinstance(a, float) and isinstance(b, float):
            if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1.5 * 10**-FLOAT_PLACES):
                return False
        elif a != b:
            return False
    return True


def _unpaired(
    storage: list[tuple[Any, ...]], view: list[tuple[Any, ...]]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Rows of each side no row of the other equals (floats within tolerance)."""
    left = Counter(tuple(_normal(v) for v in row) for row in storage)
    right = Counter(tuple(_normal(v) for v in row) for row in view)
    only_left, only_right = left - right, right - left
    for row in list(only_left.elements()):
        match = next((other for other in only_right if _close(row, other)), None)
        if match is not None:
            only_left[row] -= 1
            only_right[match] -= 1
            only_right = +only_right
    return list((+only_left).elements()), list(only_right.elements())


def verify_report_json(report: VerifyReport) -> dict[str, Any]:
    """The report as `icemv mv verify --format json` prints it."""
    return {
        "mv": report.mv.dotted,
        "clean": report.clean,
        "summary": report.summary(),
        "storage-snapshot-id": report.storage_snapshot_id,
        "slices": report.slices,
        "checked-slices": list(report.checked),
        "differing-slices": list(report.differing_slices),
        "storage-rows": report.storage_rows,
        "view-rows": report.view_rows,
        "only-in-storage": report.only_in_storage,
        "only-in-view": report.only_in_view,
        "sample-only-in-storage": [list(r) for r in report.samples_storage],
        "sample-only-in-view": [list(r) for r in report.samples_view],
        "seconds": round(report.seconds, 3),
    }
