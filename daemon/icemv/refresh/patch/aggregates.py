"""Patch an aggregate MV (one storage row per group) from the delta of its input rows.

Two strategies (`IvmAnalysis.aggregate_strategy` chooses):
  - merge-aggregates: stored aggregate + the delta's aggregate (COUNT, SUM, and MIN/MAX
    for inserts only), matched by group keys;
  - recompute-groups: the groups the delta touches are recomputed from the view query
    at the new source snapshots (AVG, COUNT DISTINCT, HAVING, derived columns, or MIN/MAX
    with deletes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from icemv.errors import FullRefreshRequiredError
from icemv.refresh.patch.keyed import KeyedMerge, rewrite_from_driver, spark_merge
from icemv.refresh.patch.model import PatchTarget, StoragePatch, TempViews
from icemv.refresh.patch.sqltree import (
    aliased,
    all_of,
    any_of,
    case,
    coalesce,
    col,
    if_,
    null_safe_eq,
    num,
    paren,
    subquery,
    sum_,
    view,
)
from icemv.spec.summary import RefreshReason
from icemv.sql.analysis import AggregateAnalysis, AggregateColumn
from icemv.sql.names import WEIGHT, argument_column, key_column

DELTA_COUNT = "__icemv_dcount"  # net rows entering a group
PRESENT = "__icemv_present"  # the group exists at the new snapshots


def _delta_name(index: int) -> str:
    return f"__icemv_d{index}"


def _gone_name(index: int) -> str:
    return f"__icemv_gone{index}"


def _delta_expression(aggregate: AggregateColumn, index: int) -> exp.Expr:
    """The aggregate of the delta rows of one group, weights applied."""
    argument, weight = col(argument_column(index)), col(WEIGHT)
    if aggregate.func == "count_star":
        return sum_(weight)
    if aggregate.func == "count":
        present = exp.Not(this=exp.Is(this=argument, expression=exp.null()))
        return sum_(if_(present, weight, num(0)))
    if aggregate.func == "sum":
        return sum_(exp.Mul(this=argument, expression=weight))
    if aggregate.func == "min":
        return exp.Min(this=argument)
    if aggregate.func == "max":
        return exp.Max(this=argument)
    raise ValueError(f"{aggregate.func} is not merged from deltas")


def _merged_value(aggregate: AggregateColumn, old: exp.Expr, delta: exp.Expr) -> exp.Expr:
    """The stored value `old` combined with the delta's `delta`."""
    if aggregate.func in ("count_star", "count"):
        return exp.Add(this=old, expression=delta)
    if aggregate.func == "sum":
        return case(
            (exp.Is(this=old.copy(), expression=exp.null()), delta.copy()),
            (exp.Is(this=delta.copy(), expression=exp.null()), old.copy()),
            default=exp.Add(this=old, expression=delta),
        )
    if aggregate.func == "min":
        return exp.Least(this=old, expressions=[delta])
    return exp.Greatest(this=old, expressions=[delta])


def _may_be_null_now(aggregate: AggregateColumn, index: int, outputs: Sequence[str]) -> exp.Expr:
    """The merged SUM is ~0 after non-NULL inputs were deleted: maybe none is left."""
    old = col(outputs[aggregate.position], "t")
    delta = col(_delta_name(index), "s")
    merged = _merged_value(aggregate, old.copy(), delta.copy())
    scale = exp.Add(
        this=exp.Abs(this=coalesce(old, num(0))), expression=exp.Abs(this=coalesce(delta, num(0)))
    )
    return paren(
        exp.and_(
            exp.GT(this=col(_gone_name(index), "s"), expression=num(0)),
            exp.LTE(
                this=exp.Abs(this=merged),
                expression=exp.Mul(this=exp.Literal.number("1e-9"), expression=paren(scale)),
            ),
        )
    )


def _group_keys(analysis: AggregateAnalysis, outputs: Sequence[str]) -> list[tuple[str, str]]:
    """(storage column, delta column) of each group key."""
    return [(outputs[k.position], key_column(i)) for i, k in enumerate(analysis.keys)]


def _match(keys: Sequence[tuple[str, str]], left: str, right: str) -> exp.Expr:
    """Storage-side key columns of `left` null-safely equal delta-side ones of `right`."""
    return all_of([null_safe_eq(col(out, left), col(alias, right)) for out, alias in keys])


def merge_aggregates_patch(
    views: TempViews,
    analysis: AggregateAnalysis,
    pre_delta: exp.Query,
    outputs: Sequence[str],
    target: PatchTarget,
    with_deletes: bool,
    recompute: Callable[[], StoragePatch],
) -> StoragePatch:
    """Stored aggregates plus the delta's. A SUM whose inputs may all have been deleted
    must turn NULL, which stored values cannot tell: such groups (merged sum ~ 0 after
    deletions) send the whole patch to `recompute`, which reads those groups' base rows.
    """
    keys = _group_keys(analysis, outputs)
    aggregates = analysis.aggregates
    projections: list[exp.Expr] = [col(alias) for _, alias in keys]
    projections.append(aliased(sum_(col(WEIGHT)), DELTA_COUNT))
    projections += [
        aliased(_delta_expression(a, i), _delta_name(i)) for i, a in enumerate(aggregates)
    ]
    sums = [i for i, a in enumerate(aggregates) if a.func == "sum"]
    if with_deletes:
        for i in sums:
            removed = exp.and_(
                exp.Not(this=exp.Is(this=col(argument_column(i)), expression=exp.null())),
                exp.LT(this=col(WEIGHT), expression=num(0)),
            )
            projections.append(aliased(sum_(if_(removed, num(1), num(0))), _gone_name(i)))
    delta = exp.select(*projections).from_(subquery(pre_delta))
    if keys:
        delta = delta.group_by(*[col(alias) for _, alias in keys])
    source = views.register("aggd", delta)
    gone: exp.Expr = exp.false()
    if with_deletes and keys:  # a global aggregate always keeps its one row
        count_index = next((i for i, a in enumerate(aggregates) if a.func == "count_star"), None)
        if count_index is None:
            raise ValueError("merge-aggregates with deletes needs COUNT(*)")
        counted = col(outputs[aggregates[count_index].position], "t")
        gone = paren(
            exp.EQ(
                this=paren(exp.Add(this=counted, expression=col(_delta_name(count_index), "s"))),
                expression=num(0),
            )
        )
    updates = {
        outputs[a.position]: _merged_value(
            a, col(outputs[a.position], "t"), col(_delta_name(i), "s")
        )
        for i, a in enumerate(aggregates)
    }
    inserts: list[exp.Expr] = []
    for position, name in enumerate(outputs):
        key = next((alias for out, alias in keys if out == name), None)
        agg = next((i for i, a in enumerate(aggregates) if a.position == position), None)
        inserts.append(col(key, "s") if key else col(_delta_name(agg or 0), "s"))
    insert_when = exp.GT(this=col(DELTA_COUNT, "s"), expression=num(0))
    spec = KeyedMerge(source, _match(keys, "t", "s"), outputs, updates, inserts, gone, insert_when)
    suspects: exp.Expr = exp.false()
    if with_deletes and sums:
        suspects = any_of([_may_be_null_now(aggregates[i], i, outputs) for i in sums])
    rewrite = rewrite_from_driver(views, spec, target, suspects)
    if rewrite is not None:
        return recompute() if rewrite.suspect else rewrite.patch
    if not with_deletes:  # no suspects; Iceberg's summary of the commit has the counts
        return spark_merge(views, spec, None)
    views.cache(source)  # read by the statistics and the MERGE
    counts = spec.counts(views.spark, target, suspects)
    return recompute() if counts.suspect else spark_merge(views, spec, counts)


def recompute_groups_patch(
    views: TempViews,
    analysis: AggregateAnalysis,
    pre_delta: exp.Query,
    new_query: exp.Query,
    outputs: Sequence[str],
    target: PatchTarget,
) -> StoragePatch:
    """Replace every group the delta touches by its rows in the view at the new snapshots."""
    keys = _group_keys(analysis, outputs)
    if not keys:
        raise FullRefreshRequiredError(
            RefreshReason.NO_GROUP_KEYS, "a global aggregate is recomputed whole"
        )
    affected = views.register(
        "keys",
        exp.select(*[col(alias) for _, alias in keys]).distinct().from_(subquery(pre_delta)),
        cache=True,
    )
    key_outputs = {out for out, _ in keys}
    others = [c for c in outputs if c not in key_outputs]
    regrouped = (
        exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("n", quoted=True)))
        .select(aliased(exp.true(), PRESENT))
        .from_(subquery(new_query, "n"))
        .join(view(affected, "k2"), on=_match(keys, "n", "k2"), join_type="LEFT SEMI")
    )
    source = views.register(
        "groups",
        exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("k", quoted=True)))
        .select(*[col(c, "g") for c in others], col(PRESENT, "g"))
        .from_(view(affected, "k"))
        .join(subquery(regrouped, "g"), on=_match(keys, "g", "k"), join_type="LEFT"),
    )
    alias_of = dict(keys)
    spec = KeyedMerge(
        source,
        _match(keys, "t", "s"),
        outputs,
        {c: col(c, "s") for c in others},
        [col(alias_of[c], "s") if c in key_outputs else col(c, "s") for c in outputs],
        exp.Is(this=col(PRESENT, "s"), expression=exp.null()),
        col(PRESENT, "s"),
    )
    rewrite = rewrite_from_driver(views, spec, target)
    if rewrite is not None:
        return rewrite.patch
    views.cache(source)  # read by the statistics and the MERGE
    return spark_merge(views, spec, spec.counts(views.spark, target))
