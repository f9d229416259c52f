"""Patch a rows-shaped MV (filter / project / join / UNION ALL) with its weighted delta.

Storage rows have no identity: a row image with net weight -k means "drop k of its
copies, any k", and +k "add k copies". Insert-only deltas are appended. Otherwise the
net weights go to the driver when small (`row_images.py` rewrites only the files that
hold deleted images), else to a Spark MERGE that deletes every copy of a touched image
and re-inserts the survivors (copy counts read from storage at the planned snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from icemv.errors import FullRefreshRequiredError
from icemv.format.summary import RefreshReason
from icemv.refresh.exec import Executor, spark_of
from icemv.refresh.patch.model import DriverPatch, PatchTarget, SparkPatch, StoragePatch
from icemv.refresh.patch.row_images import identity_columns, rewrite_row_images
from icemv.refresh.patch.sqltree import (
    aliased,
    coalesce,
    col,
    columns,
    explode_copies,
    if_,
    join,
    merge_into,
    null_safe_match,
    num,
    render,
    subquery,
    sum_,
    text,
    view,
    when_matched_delete,
    when_not_matched_insert,
)
from icemv.sql.names import WEIGHT
from icemv.sql.net import netted

NET = WEIGHT  # net copies of a row image in the delta (sql/net.py)
HELD = "__icemv_c"  # copies of it the storage table holds
KIND = "__icemv_kind"  # 'd': delete every copy, 'i': insert one copy
COPIES = "__icemv_copies"
COPY = "__icemv_n"


def rows_patch(
    views: Executor,
    delta: exp.Query,
    outputs: Sequence[str],
    target: PatchTarget,
    insert_only: bool,
) -> StoragePatch:
    appended = exp.select(*columns(outputs)).from_(subquery(delta))
    if insert_only:  # every weight is +1: the delta rows are the rows to append
        if target.driver_max_rows:
            rows = views.collect(appended, target.driver_max_rows)
            if rows is not None:
                return DriverPatch(rows.num_rows, 0, rows)
        frame = spark_of(views, "more appended rows than the driver commits").sql(render(appended))

        def append_all(target: str) -> None:
            frame.writeTo(target).append()

        return SparkPatch(None, 0, append_all)
    identities = identity_columns(target.table.schema(), outputs)
    net = views.register("net", netted(subquery(delta), identities), cache=True)
    if target.driver_max_rows:
        net_rows = views.collect(exp.select(exp.Star()).from_(view(net)), target.driver_max_rows)
        if net_rows is not None:
            rewrite = rewrite_row_images(
                target.table, target.snapshot_id, net_rows, target.driver_max_rows
            )
            if rewrite is not None:
                return DriverPatch(
                    rewrite.inserted, rewrite.deleted, rewrite.rows, rewrite.replaces
                )
    spark = spark_of(views, "the patch holds more rows than the driver commits")
    positive = exp.GT(this=col(NET), expression=num(0))
    negative = exp.LT(this=col(NET), expression=num(0))
    stats = spark.sql(
        render(
            exp.select(
                coalesce(sum_(if_(positive, col(NET), num(0))), num(0)),
                coalesce(sum_(if_(negative, exp.Neg(this=col(NET)), num(0))), num(0)),
            ).from_(view(net))
        )
    ).first()
    if stats is None:  # an aggregate without GROUP BY always has one row
        raise RuntimeError("the patch statistics query returned no row")
    inserted, deleted = int(stats[0]), int(stats[1])
    if deleted == 0:
        rows = spark.sql(
            render(
                exp.select(*columns(outputs))
                .from_(view(net))
                .lateral(explode_copies(col(NET), COPY))
            )
        )

        def append(target: str) -> None:
            rows.writeTo(target).append()

        return SparkPatch(inserted, deleted, append)
    same = [(c, c) for c in outputs]
    held = (
        exp.select(*columns(outputs, "s"), aliased(exp.Count(this=exp.Star()), HELD))
        .from_(target.at_plan("s"))
        .join(
            join(
                view(net, "m"),
                exp.and_(
                    null_safe_match("s", "m", same),
                    exp.LT(this=col(NET, "m"), expression=num(0)),
                ),
                "LEFT",
                "SEMI",
            )
        )
        .group_by(*columns(outputs, "s"))
    )
    negatives = views.register(
        "neg",
        exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("n", quoted=True)))
        .select(aliased(coalesce(col(HELD, "c"), num(0)), HELD))
        .from_(view(net, "n"))
        .join(join(subquery(held, "c"), null_safe_match("n", "c", same), "LEFT"))
        .where(exp.LT(this=col(NET, "n"), expression=num(0))),
        cache=True,
    )
    left = exp.Add(this=col(HELD), expression=col(NET))
    short = spark.sql(
        render(
            exp.select(exp.Count(this=exp.Star()))
            .from_(view(negatives))
            .where(exp.LT(this=left, expression=num(0)))
        )
    ).first()
    if short is not None and short[0]:
        raise FullRefreshRequiredError(
            RefreshReason.STORAGE_INCONSISTENT,
            "the delta deletes rows the storage table does not hold",
        )
    deletes = exp.select(
        *columns(outputs), aliased(text("d"), KIND), aliased(num(1), COPIES)
    ).from_(view(negatives))
    survivors = (
        exp.select(*columns(outputs), text("i"), left.copy())
        .from_(view(negatives))
        .where(exp.GT(this=left.copy(), expression=num(0)))
    )
    additions = (
        exp.select(*columns(outputs), text("i"), col(NET)).from_(view(net)).where(positive.copy())
    )
    merged = exp.union(exp.union(deletes, survivors, distinct=False), additions, distinct=False)
    source = views.register(
        "src",
        exp.select(*columns(outputs), col(KIND))
        .from_(subquery(merged))
        .lateral(explode_copies(col(COPIES), COPY)),
    )
    on = exp.and_(
        null_safe_match("t", "s", same), exp.EQ(this=col(KIND, "s"), expression=text("d"))
    )
    whens = [
        when_matched_delete(),
        when_not_matched_insert(
            exp.EQ(this=col(KIND, "s"), expression=text("i")), outputs, columns(outputs, "s")
        ),
    ]

    def merge(target: str) -> None:
        spark.sql(render(merge_into(target, view(source, "s"), on, whens)))

    return SparkPatch(inserted, deleted, merge)
