"""Patch an aggregate MV (one storage row per group) from the delta of its input rows.

Two strategies (`AggregateAnalysis.aggregate_strategy` chooses):
  - merge-aggregates: stored aggregates (and hidden state) + the delta's, matched by group
    keys, one rule per aggregate function (aggregate_rules.py);
  - recompute-groups: the groups the delta touches are recomputed from the view query
    (with its state columns) at the new source snapshots: COUNT DISTINCT, HAVING, derived
    columns, MIN/MAX under deletes, floating-point SUM/AVG and the deviations under
    deletes, and without state AVG and the deviations.

Why exact: a group's value depends only on its own input rows. Merging is exact when each
rule's stored value plus the delta's equals the aggregate over the new rows (integer and
DECIMAL addition are exact; floating-point subtraction is not, hence recompute under
deletes). Recomputing is exact because the touched groups are exactly the group keys of
the delta rows, each re-evaluated whole by the view query at the new snapshots, and an
untouched group's inputs did not change. With the embedded engine the storage rows of
the touched groups are held from the files whose column bounds admit their keys (every
row of those groups is in them), and only those files are rewritten. The merge trees an
MV's refresh builds are kept for its next ones (`_kept`), keyed by everything they are
built from (the analysis by its own memo key, the delta's tree by `tree_key`, the
storage's outputs, state and types, whether rows are deleted): a kept tree is the tree
the refresh would build, so keeping them changes no result.

GROUPING SETS / ROLLUP / CUBE are a union of groupings: a storage row is one group of one
grouping, named by its key values (NULL where rolled up) and the hidden grouping id
(sql/state.py). The groups a delta touches are the view's own grouping sets evaluated over
the touched key tuples, and those are recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from pyiceberg.types import IcebergType
from sqlglot import exp

from icemv.errors import FullRefreshRequiredError
from icemv.format.summary import RefreshReason
from icemv.refresh.exec import Executor, spark_of
from icemv.refresh.patch.aggregate_rules import merge_rules, row_weight
from icemv.refresh.patch.keyed import KeyedMerge, rewrite_from_driver, spark_merge, without_stored
from icemv.refresh.patch.model import PatchTarget, StoragePatch
from icemv.refresh.patch.sqltree import (
    aliased,
    all_of,
    any_of,
    coalesce,
    col,
    explode_copies,
    if_,
    join,
    null_safe_eq,
    num,
    paren,
    subquery,
    sum_,
    view,
)
from icemv.sql.analysis import AggregateAnalysis
from icemv.sql.memo import Memo
from icemv.sql.names import WEIGHT, argument_column, key_column
from icemv.sql.portable import tree_key
from icemv.sql.state import GROUPING, StateColumn

DELTA_COUNT = "__icemv_dcount"  # net rows entering a group
PRESENT = "__icemv_present"  # the group exists at the new snapshots


def _gone_name(index: int) -> str:
    return f"__icemv_gone{index}"


def _may_be_null_now(merged: exp.Expr, stored: exp.Expr, index: int) -> exp.Expr:
    """Without state: a merged SUM ~0 after non-NULL inputs were deleted may have none left."""
    delta = col(f"__icemv_d{index}", "s")
    scale = exp.Add(
        this=exp.Abs(this=coalesce(stored, num(0))),
        expression=exp.Abs(this=coalesce(delta, num(0))),
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


@dataclass(frozen=True)
class _MergeTrees:
    """The trees of an aggregate's merge but the names of the relations they read: a
    function of the analysis, the pre-aggregation delta's tree, the storage's outputs,
    state and types, and whether the delta deletes (kept per process by them: `_kept`).
    Read only: every user copies what it changes (KeyedMerge copies where it uses)."""

    keys: list[tuple[str, str]]
    delta: exp.Select
    on: exp.Expr
    updates: dict[str, exp.Expr]
    inserts: list[exp.Expr]
    gone: exp.Expr
    insert_when: exp.Expr
    lets: Mapping[str, exp.Expr]
    suspects: exp.Expr


# An MV's merge trees by what they are a function of (`_MergeInputs.key`): a refresh of an MV whose
# view, sources' schemas and storage are unchanged builds none (3-10 ms of a small
# refresh's CPU here), and the embedded executor runs the DuckDB SQL it kept for them.
# A string: why the rules recompute the touched groups instead.
_kept: Memo[_MergeTrees | str] = Memo(1024)


@dataclass(frozen=True)
class _MergeInputs:
    """What an aggregate's merge trees are built from."""

    analysis: AggregateAnalysis
    pre_delta: exp.Query
    outputs: Sequence[str]
    with_deletes: bool
    state: Sequence[StateColumn]
    types: Mapping[str, IcebergType]

    def key(self) -> Hashable | None:
        """What `_merge_trees` is a function of, exactly; None: not known (not kept)."""
        if self.analysis.memo_key is None:
            return None
        states = tuple((c.name, c.role, tree_key(c.expression)) for c in self.state)
        key = (self.analysis.memo_key, tree_key(self.pre_delta), tuple(self.outputs),
               self.with_deletes, states, tuple(sorted(self.types.items())))  # fmt: skip
        try:
            hash(key)
        except TypeError:
            return None
        return key


def _merge_trees(inputs: _MergeInputs) -> _MergeTrees | str:
    analysis, pre_delta, outputs = inputs.analysis, inputs.pre_delta, inputs.outputs
    with_deletes, state, types = inputs.with_deletes, inputs.state, inputs.types
    keys = _group_keys(analysis, outputs)
    rules = merge_rules(analysis, outputs, state, types, insert_only=not with_deletes)
    if rules.recompute is not None:
        return rules.recompute
    weight = row_weight(rules.exploded, insert_only=not with_deletes)
    projections: list[exp.Expr] = [col(alias) for _, alias in keys]
    projections.append(aliased(sum_(weight.copy()), DELTA_COUNT))
    projections += [aliased(expression, alias) for alias, expression in rules.deltas.items()]
    sums = [i for i, a in enumerate(analysis.aggregates) if a.func == "sum"] if not state else []
    if with_deletes:
        for i in sums:
            removed = exp.and_(
                exp.Not(this=exp.Is(this=col(argument_column(i)), expression=exp.null())),
                exp.LT(this=col(WEIGHT), expression=num(0)),
            )
            projections.append(aliased(sum_(if_(removed, num(1), num(0))), _gone_name(i)))
    delta = exp.select(*projections).from_(subquery(pre_delta.copy()), copy=False)
    if rules.exploded:  # one row per unit of weight, for the deviations' (n, mean, M2)
        delta = delta.lateral(explode_copies(exp.Abs(this=col(WEIGHT)), "__icemv_copy"), copy=False)
    if keys:
        delta = delta.group_by(*[col(alias) for _, alias in keys], copy=False)
    else:  # a global aggregate over no change rows is one all-NULL row: no row instead
        delta = delta.having(exp.GT(this=exp.Count(this=exp.Star()), expression=num(0)), copy=False)
    gone: exp.Expr = exp.false()
    if with_deletes and keys:  # a global aggregate always keeps its one row
        if rules.rows is None:
            raise ValueError("merge-aggregates with deletes needs COUNT(*) or its state")
        gone = paren(exp.EQ(this=paren(rules.rows.copy()), expression=num(0)))
    key_outputs = {out: alias for out, alias in keys}
    updates = {name: value for name, value in rules.values.items() if name not in key_outputs}
    inserts: list[exp.Expr] = [
        col(key_outputs[name], "s") if name in key_outputs else without_stored(rules.values[name])
        for name in outputs
    ]
    suspects: exp.Expr = exp.false()
    if state:
        suspects = any_of([condition.copy() for condition in rules.unknown])
    elif with_deletes and sums:
        suspects = any_of([
            _may_be_null_now(
                rules.values[outputs[analysis.aggregates[i].position]].copy(),
                col(outputs[analysis.aggregates[i].position], "t"),
                i,
            )
            for i in sums
        ])  # fmt: skip
    insert_when = exp.GT(this=col(DELTA_COUNT, "s"), expression=num(0))
    on = _match(keys, "t", "s")
    return _MergeTrees(keys, delta, on, updates, inserts, gone, insert_when, rules.lets,
                       suspects)  # fmt: skip


def merge_aggregates_patch(
    views: Executor,
    analysis: AggregateAnalysis,
    pre_delta: exp.Query,
    outputs: Sequence[str],
    target: PatchTarget,
    with_deletes: bool,
    recompute: Callable[[], StoragePatch],
    state: Sequence[StateColumn] = (),
    types: Mapping[str, IcebergType] | None = None,
) -> StoragePatch:
    """Stored aggregates (and state) plus the delta's, by the rules of aggregate_rules.py.

    Groups whose merge cannot be trusted send the whole patch to `recompute`, which reads
    those groups' base rows: without state, a SUM whose inputs may all have been deleted
    (merged sum ~ 0 after deletions; it must turn NULL, which stored values cannot tell);
    with state, stored state that is unknown (NULL).
    """
    inputs = _MergeInputs(analysis, pre_delta, outputs, with_deletes, state, types or {})
    key = inputs.key()
    trees = _kept.get(key) if key is not None else None
    if trees is None:
        trees = _merge_trees(inputs)
        if key is not None:
            _kept.put(key, trees)
    if isinstance(trees, str):
        return recompute()
    source: str | exp.Query
    if views.reads_whole(target):  # the storage's rows whatever the keys: one statement
        source, target = trees.delta, views.stored(target, None, [])
    else:  # the keys first, then the rows of the files they may be in
        source = views.register("aggd", trees.delta, key=None if key is None else ("aggd", key))
        target = views.stored(target, source, trees.keys)
    spec = KeyedMerge(source, trees.on, outputs, trees.updates, trees.inserts, trees.gone,
                      trees.insert_when, trees.lets)  # fmt: skip
    rewrite = rewrite_from_driver(views, spec, target, trees.suspects, key)
    if rewrite is not None:
        return recompute() if rewrite.suspect else rewrite.patch
    spark = spark_of(views, "the storage table is larger than the driver commits")
    if not with_deletes and not state:  # no suspects; Iceberg's summary has the counts
        return spark_merge(spark, spec, None)
    spark.catalog.cacheTable(spec.named_source())  # read by the statistics and the MERGE
    counts = spec.counts(spark, target, trees.suspects)
    return recompute() if counts.suspect else spark_merge(spark, spec, counts)


def touched_groupings(
    analysis: AggregateAnalysis, touched: exp.Query, outputs: Sequence[str]
) -> exp.Query:
    """The groups of every grouping set that the touched key tuples fall in: the view's own
    GROUP BY (each key expression as its delta column) over them, with their grouping id."""
    if GROUPING not in outputs:
        raise FullRefreshRequiredError(
            RefreshReason.STATE_UNKNOWN,
            "grouping sets need the hidden grouping id column: replace the MV to add it",
        )
    columns = [(k.expression, key_column(i)) for i, k in enumerate(analysis.keys)]

    def as_delta_column(node: exp.Expr) -> exp.Expr:
        name = next((c for e, c in columns if node == e), None)
        return col(name) if name is not None else node

    group = analysis.query.args["group"].copy().transform(as_delta_column)
    grouped = exp.select(*[col(c) for _, c in columns])
    grouped = grouped.select(aliased(exp.GroupingId(), GROUPING)).from_(subquery(touched, "d"))
    grouped.set("group", group)
    return grouped


def recompute_groups_patch(
    views: Executor,
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
    touched: exp.Query = (
        exp.select(*[col(alias) for _, alias in keys]).distinct().from_(subquery(pre_delta))
    )
    if analysis.grouping_sets:
        touched = touched_groupings(analysis, touched, outputs)
        keys.append((GROUPING, GROUPING))
    affected = views.register("keys", touched, cache=True)
    target = views.stored(target, affected, keys)
    key_outputs = {out for out, _ in keys}
    others = [c for c in outputs if c not in key_outputs]
    regrouped = (
        exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("n", quoted=True)))
        .select(aliased(exp.true(), PRESENT))
        .from_(subquery(new_query, "n"), copy=False)
        .join(join(view(affected, "k2"), _match(keys, "n", "k2"), "LEFT", "SEMI"), copy=False)
    )
    source = views.register(
        "groups",
        exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("k", quoted=True)))
        .select(*[col(c, "g") for c in others], col(PRESENT, "g"))
        .from_(view(affected, "k"), copy=False)
        .join(join(subquery(regrouped, "g"), _match(keys, "g", "k"), "LEFT"), copy=False),
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
    spark = spark_of(views, "the touched groups' rewrite is too large for the driver")
    spark.catalog.cacheTable(source)  # read by the statistics and the MERGE
    return spark_merge(spark, spec, spec.counts(spark, target))
