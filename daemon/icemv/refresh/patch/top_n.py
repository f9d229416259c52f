"""Top-N views (sql/top_n.py): view rows gained or lost that cannot reach the top n write
nothing.

One query decides (on Spark, or on DuckDB over the storage rows it holds): the stored
rows (tag 0) and the delta's view rows, gained and lost alike (tag 1), sorted by the
view's ORDER BY, delta rows first among equals; if a tag 1 is among the first n, a
changed row reaches the stored top n (or ties its n-th row, or fewer than n rows are
stored) and the view is recomputed (`top-n-reached`). Otherwise the stored rows still
are the answer: an empty patch, the refresh recorded at the new source snapshots.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.errors import FullRefreshRequiredError
from icemv.format.summary import RefreshReason
from icemv.refresh.exec import Executor
from icemv.refresh.patch.model import DriverPatch, PatchTarget
from icemv.refresh.patch.sqltree import aliased, col, num, subquery
from icemv.sql.top_n import TopN

APPENDED = "__icemv_appended"


def reach_query(
    top_n: TopN, appended: exp.Query, names: Sequence[str], storage: Sequence[str], stored: exp.Expr
) -> exp.Select:
    """1 if an appended row reaches the top n, else 0 or NULL.

    `appended`: the view's new rows, columns `names`; `stored`: the storage table (columns
    `storage`, in the view's order) read at the planned snapshot, aliased `s`.
    """
    old = exp.select(
        *[aliased(col(s, "s"), n) for s, n in zip(storage, names, strict=True)],
        aliased(num(0), APPENDED),
    ).from_(stored)
    new = exp.select(*[col(n, "d") for n in names], aliased(num(1), APPENDED)).from_(
        subquery(appended, "d")
    )
    ranked = (
        exp.select(col(APPENDED, "c"))
        .from_(subquery(exp.union(old, new, distinct=False), "c"))
        .order_by(*[o.copy() for o in top_n.order], exp.Ordered(this=col(APPENDED), desc=True))
        .limit(top_n.limit)
    )
    return exp.select(exp.Max(this=col(APPENDED, "top"))).from_(subquery(ranked, "top"))


def unreached_patch(
    views: Executor,
    top_n: TopN,
    appended: exp.Query,
    names: Sequence[str],
    target: PatchTarget,
) -> DriverPatch:
    """An empty patch if no changed view row (`appended`: the weighted delta, either sign)
    reaches the top n; else FullRefreshRequiredError."""
    storage = target.table.schema()
    target = views.stored(target, None, [])  # the top n rows: the whole storage table
    query = reach_query(top_n, appended, names, storage.column_names, target.at_plan("s"))
    rows = views.collect(query, 1)
    assert rows is not None  # an aggregate: one row
    if rows.column(0)[0].as_py() == 1:
        raise FullRefreshRequiredError(
            RefreshReason.TOP_N_REACHED,
            f"a row gained or lost sorts before or ties the stored n-th row ({top_n.describe()})",
        )
    return DriverPatch(0, 0, arrow_schema(storage).empty_table())
