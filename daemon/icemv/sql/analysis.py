"""Is a view incrementally maintainable, and how? A small pass over the sqlglot tree.

The query is first qualified with sqlglot's `qualify` (stars expanded, every column
qualified by its table alias, every source fully named) so the delta rewrite can swap
table references safely, then normalised (sql/normalise.py: CTEs and derived tables
folded in, ORDER BY without LIMIT dropped, DISTINCT and set operations as GROUP BY, NOT IN
as NOT EXISTS). A root ORDER BY ... LIMIT is split off as a top-N (sql/top_n.py). Every
construct the delta rules cannot handle yields a reason code; the MV is then refreshed
fully and the reason says why. Subqueries no key bounds are accepted in the WHERE, with
the tables they read recomputing the view when they change (sql/subquery_filters.py).

Pure: the sources' schemas come from a `SourceResolver`; no catalog I/O here.
"""

from __future__ import annotations

from collections.abc import Hashable
from copy import deepcopy
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from icemv.errors import ViewSqlError
from icemv.identifiers import Identifier
from icemv.sql.constructs import unsupported_constructs
from icemv.sql.exact_case import ExactCase
from icemv.sql.keys import KeyClass, clear_keys, key_class
from icemv.sql.memo import Memo
from icemv.sql.normalise import normalise
from icemv.sql.parse import shared_query, table_references
from icemv.sql.sources import SourceResolver, TableInfo
from icemv.sql.subquery_filters import filter_subquery_sources
from icemv.sql.top_n import TopN, split_top_n

Shape = Literal["rows", "aggregate"]
AggregateFunc = Literal[
    "count_star", "count", "sum", "min", "max", "avg", "count_distinct",
    "stddev_samp", "stddev_pop", "var_samp", "var_pop",
    "sum_distinct", "avg_distinct", "count_if", "bool_and", "bool_or",
    "any_value", "collect_set", "collect_list", "min_by", "max_by", "grouping", "grouping_id",
    "median", "percentile", "percentile_cont", "percentile_disc",
]  # fmt: skip
AggregateStrategy = Literal["merge-aggregates", "recompute-groups"]

_SUPPORTED_AGGREGATES: dict[type[exp.Expr], AggregateFunc] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
    exp.CountIf: "count_if",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.AnyValue: "any_value",
    exp.ArrayUniqueAgg: "collect_set",
    exp.ArrayAgg: "collect_list",
    exp.ArgMin: "min_by",
    exp.ArgMax: "max_by",
    exp.Grouping: "grouping",
    exp.GroupingId: "grouping_id",
    exp.Median: "median",
    exp.Quantile: "percentile",
    exp.PercentileCont: "percentile_cont",
    exp.PercentileDisc: "percentile_disc",
}
# Aggregates no stored value merges: the groups a delta touches are recomputed (a group's
# value depends on its input rows alone, so an untouched group keeps it; MEDIAN and the exact
# PERCENTILEs are deterministic functions of the group's multiset). ANY_VALUE,
# COLLECT_LIST's order and MIN_BY/MAX_BY on ties are nondeterministic in Spark: a recomputed
# group gets a value a full evaluation could give, an untouched group keeps its earlier one
# (its inputs did not change, so that value still is one a full evaluation could give).
_RECOMPUTED = frozenset({
    "count_distinct", "sum_distinct", "avg_distinct", "count_if", "bool_and", "bool_or",
    "any_value", "collect_set", "collect_list", "min_by", "max_by", "grouping", "grouping_id",
    "median", "percentile", "percentile_cont", "percentile_disc",
})  # fmt: skip
# Reasons the affected-keys rule (sql/keys.py) may still cover.
_KEYED = frozenset({"window-function", "outer-join", "semi-join", "subquery", "distinct"})
# Aggregates whose value follows from hidden state columns (sql/state.py), not from the
# stored value alone.
_STATEFUL = frozenset({"avg", "stddev_samp", "stddev_pop", "var_samp", "var_pop"})


@dataclass(frozen=True)
class KeyColumn:
    position: int  # in the output (and storage) columns
    expression: exp.Expr


@dataclass(frozen=True)
class AggregateColumn:
    position: int
    func: AggregateFunc
    argument: exp.Expr | None


@dataclass(frozen=True)
class NotMaintainable:
    """The view is refreshed fully; `reasons` are codes, `details` say where."""

    reasons: tuple[str, ...]
    details: tuple[str, ...] = ()
    # Source tables as the query reads them, as far as they resolved.
    sources: tuple[Identifier, ...] = ()
    # What normalisation rewrote before the analysis (sql/normalise.py).
    rewrites: tuple[str, ...] = ()
    maintainable: ClassVar[bool] = False


@dataclass(frozen=True)
class RowsAnalysis:
    """Filter / project / inner join / UNION ALL: the delta is rows with weights."""

    query: exp.Query  # qualified: every column by alias, every table fully named
    sources: tuple[Identifier, ...]
    output_columns: tuple[str, ...]
    rewrites: tuple[str, ...] = ()
    # Set when the delta comes from the affected keys (sql/keys.py), not from the terms.
    keyed: KeyClass | None = None
    # Sources a change to which recomputes the view (subqueries no key bounds, tables no
    # equality reaches: sql/subquery_filters.py, sql/key_check.py), unless the subqueries
    # reading them keep their values (refresh/plan.py).
    recompute_on: frozenset[Identifier] = frozenset()
    # ORDER BY ... LIMIT n at the root (sql/top_n.py); `query` is then the query without it.
    top_n: TopN | None = None
    # As AggregateAnalysis.memo_key.
    memo_key: Hashable | None = field(default=None, compare=False, repr=False)
    maintainable: ClassVar[bool] = True
    shape: ClassVar[Shape] = "rows"


@dataclass(frozen=True)
class AggregateAnalysis:
    """One GROUP BY (or a global aggregate): the delta is per group."""

    query: exp.Select
    sources: tuple[Identifier, ...]
    keys: tuple[KeyColumn, ...]
    aggregates: tuple[AggregateColumn, ...]
    # Output columns that are neither a key nor a bare aggregate (e.g. sum(x) / count(*)).
    derived: tuple[str, ...]
    having: bool
    output_columns: tuple[str, ...]
    rewrites: tuple[str, ...] = ()
    # Set when the delta of the input rows comes from the affected keys (sql/keys.py).
    keyed: KeyClass | None = None
    # GROUPING SETS / ROLLUP / CUBE: a union of groupings, told apart by a hidden grouping
    # id (sql/state.py); `keys` are every grouping expression, NULL where rolled up.
    grouping_sets: bool = False
    # Sources a change to which recomputes the view, as for RowsAnalysis.
    recompute_on: frozenset[Identifier] = frozenset()
    # What this analysis is a function of (`analyse`'s memo key: the view's SQL, its
    # namespace and catalog, its sources as they resolve); None where it was not kept.
    # What is derived from the analysis alone is kept per process by it: patch trees
    # (refresh/patch/), state columns (sql/state.py), change reads (refresh/plan.py).
    memo_key: Hashable | None = field(default=None, compare=False, repr=False)
    maintainable: ClassVar[bool] = True
    shape: ClassVar[Shape] = "aggregate"

    def aggregate_strategy(
        self, with_deletes: bool, stateful: bool = False, floating: bool = False
    ) -> AggregateStrategy:
        """Merge from the delta when the stored values suffice, else recompute the groups.

        `stateful`: the storage table has the hidden state columns (sql/state.py), so AVG,
        the deviations, a SUM losing its last input and a group losing its last row merge
        exactly, and MIN/MAX under deletes unless a deleted value is the extreme (then the
        patch recomputes); the aggregates of `_RECOMPUTED`, grouping sets, HAVING and
        derived columns still recompute the touched groups. `floating`: a SUM
        or AVG adds floating-point values, or a deviation keeps its (floating-point) M2
        (mv/layout.py says from the storage types): taking deleted rows out of such a sum
        cancels digits (1e16 + 1 - 1e16 is 0; a group left with one value keeps an M2 of
        rounding error where Spark computes 0), so deletes recompute the touched groups.
        """
        funcs = {a.func for a in self.aggregates}
        if self.having or self.derived or self.grouping_sets or funcs & _RECOMPUTED:
            return "recompute-groups"
        if with_deletes and floating:
            return "recompute-groups"
        if stateful:  # MIN/MAX deletes merge unless one takes the extreme (aggregate_rules)
            return "merge-aggregates"
        if funcs & _STATEFUL:
            return "recompute-groups"
        if with_deletes and ("count_star" not in funcs or funcs - {"count_star", "count", "sum"}):
            return "recompute-groups"
        return "merge-aggregates"


IvmAnalysis = NotMaintainable | RowsAnalysis | AggregateAnalysis
MaintainableAnalysis = RowsAnalysis | AggregateAnalysis


_analyses: Memo[IvmAnalysis] = Memo(1024)  # kept per process


def analyse(resolver: SourceResolver, sql: str, default_namespace: tuple[str, ...]) -> IvmAnalysis:
    """Whether (and how) the view is maintained incrementally; sources via `resolver`.

    The answer depends on the SQL, the namespace, the catalog's name and each source as
    it resolves (which table, its columns), not on the sources' snapshots: a refresh of an
    unchanged view over unchanged schemas asks again what it asked last time, and the
    analysis (parse, qualify, normalise, shape: ~5 ms) is done once per process (the last
    512 kept). Every call gets a deep copy of its own (the caller may change it), as
    `parse_query` gives one; a view whose sources do not all resolve is not kept."""
    try:
        shared = shared_query(sql)  # read only: the kept analysis needs no tree of its own
    except ViewSqlError as exc:
        return NotMaintainable(("unparsable",), (str(exc),))
    key = _memo_key(resolver, shared, sql, default_namespace)
    kept = _analyses.get(key) if key is not None else None
    if kept is not None:
        return deepcopy(kept)
    found = _analysed(resolver, shared.copy(), default_namespace)
    if key is not None:
        if isinstance(found, AggregateAnalysis | RowsAnalysis):
            found = replace(found, memo_key=key)
        _analyses.put(key, deepcopy(found))
    return found


def _memo_key(
    resolver: SourceResolver, query: exp.Query, sql: str, default_namespace: tuple[str, ...]
) -> Hashable | None:
    """What the analysis of `query` depends on, None if a source does not resolve."""
    resolved = []
    for table in table_references(query):
        identifier = Identifier((table.db,) if table.db else default_namespace, table.name)
        info = _resolve_table(resolver, identifier)
        if info is None:
            return None
        resolved.append((identifier, replace(info, snapshot_id=None)))
    return (sql, default_namespace, resolver.catalog_name, tuple(resolved))


def _analysed(
    resolver: SourceResolver, query: exp.Query, default_namespace: tuple[str, ...]
) -> IvmAnalysis:
    reasons: list[str] = []
    details: list[str] = []
    sources: list[Identifier] = []
    resolved_tables: list[TableInfo] = []
    tables: dict[str, dict[str, dict[str, str]]] = {}  # namespace -> table -> columns
    catalog = resolver.catalog_name
    for table in table_references(query):
        identifier = Identifier((table.db,) if table.db else default_namespace, table.name)
        resolved = _resolve_table(resolver, identifier)
        if resolved is None:
            if resolver.view(identifier) is not None:
                reasons.append("view-source")
                details.append(f"{identifier} is a plain view: inline its SQL to maintain it")
            else:
                reasons.append("unknown-source")
                details.append(f"{identifier} does not exist")
            continue
        table.set("this", exp.to_identifier(resolved.identifier.name, quoted=True))
        table.set("db", exp.to_identifier(resolved.identifier.namespace_str, quoted=True))
        table.set("catalog", exp.to_identifier(catalog, quoted=True))
        if resolved.identifier not in sources:
            sources.append(resolved.identifier)
            resolved_tables.append(resolved)
        columns = {column: "string" for column in resolved.columns}
        tables.setdefault(resolved.identifier.namespace_str, {})[resolved.identifier.name] = columns
    if reasons:
        return NotMaintainable(tuple(reasons), tuple(details), sources=tuple(sources))
    exact = ExactCase.of(query, resolved_tables)
    if exact is None:
        return NotMaintainable(
            ("unresolvable",), ("source names differ only in case",), sources=tuple(sources)
        )
    try:
        qualified = qualify(
            query,
            schema=MappingSchema({catalog: tables}, dialect="spark"),
            catalog=catalog,
            db=".".join(default_namespace),
            dialect="spark",
            quote_identifiers=True,
            validate_qualify_columns=True,
        )
    except (OptimizeError, SqlglotError) as exc:
        return NotMaintainable(("unresolvable",), (str(exc),), sources=tuple(sources))
    if not isinstance(qualified, exp.Query):
        return NotMaintainable(("unresolvable",), ("not a query after qualification",))
    exact.restore(qualified)
    normalised = normalise(qualified)
    query, top_n = normalised.query, None
    if isinstance(query, exp.Select) and query.args.get("limit"):
        split = split_top_n(query)
        if isinstance(split, str):
            return NotMaintainable(("limit",), (split,), tuple(sources), normalised.rewrites)
        query, top_n = split
    reasons, details = unsupported_constructs(query, _SUPPORTED_AGGREGATES)
    if "grouping-sets" in reasons and _top_grouping_sets_only(query):
        at = reasons.index("grouping-sets")  # the view's own GROUP BY: a union of groupings
        assert isinstance(query, exp.Select)
        repeated = repeated_grouping_set(query.args["group"])
        if repeated is None:
            del reasons[at], details[at]
        else:  # two identical groups of one grouping: the storage cannot tell them apart
            details[at] = f"a grouping set made twice: ({repeated})"
    keyed: KeyClass | None = None
    recompute_on: frozenset[Identifier] = frozenset()
    if reasons and set(reasons) <= _KEYED:
        found = key_class(query)
        filtered = filter_subquery_sources(query) if reasons == ["subquery"] else None
        if isinstance(filtered, frozenset) and (
            not isinstance(found, KeyClass) or filtered < found.recompute_on or top_n is not None
        ):  # linear in the outer tables, recomputed on fewer sources than the keys
            recompute_on, reasons, details = filtered, [], []
            clear_keys(query)
        elif isinstance(found, KeyClass):
            keyed, reasons, recompute_on = found, [], found.recompute_on
        else:
            details.append(f"no affected keys: {found}")
    if reasons:
        return NotMaintainable(
            tuple(reasons), tuple(details), tuple(sources), rewrites=normalised.rewrites
        )
    shaped = _shape(query, tuple(sources), normalised.rewrites, keyed)
    if isinstance(shaped, NotMaintainable):
        return shaped
    if shaped.keyed is not None:  # the key class of the shape (groups as rows) also counts
        recompute_on |= shaped.keyed.recompute_on
    shaped = replace(shaped, recompute_on=recompute_on)
    if top_n is None:
        return shaped
    if not isinstance(shaped, RowsAnalysis) or shaped.keyed is not None:
        why = "top-N over rows an append may remove (an aggregate, an outer join, a window)"
        return NotMaintainable(("limit",), (why,), tuple(sources), normalised.rewrites)
    return replace(shaped, top_n=top_n)


def _grouping_nodes(node: exp.Expr) -> list[exp.Expr]:
    return list(node.find_all(exp.Cube, exp.Rollup, exp.GroupingSets))


def _top_grouping_sets_only(query: exp.Query) -> bool:
    """Every GROUPING SETS / ROLLUP / CUBE is in the GROUP BY of the query's own SELECT."""
    group = query.args.get("group") if isinstance(query, exp.Select) else None
    own = _grouping_nodes(group) if group is not None else []
    return bool(own) and len(_grouping_nodes(query)) == len(own)


def grouping_expressions(group: exp.Group | None) -> tuple[list[exp.Expr], bool]:
    """Every distinct expression a GROUP BY groups by, in order, and whether it has
    grouping sets (GROUPING SETS, ROLLUP, CUBE, or `WITH ROLLUP` / `WITH CUBE`)."""
    if group is None:
        return [], False
    found: list[exp.Expr] = []
    sets = any(group.args.get(arg) for arg in ("grouping_sets", "cube", "rollup"))
    pending: list[exp.Expr] = list(group.expressions)
    for arg in ("grouping_sets", "cube", "rollup"):
        pending += [e for node in group.args.get(arg) or [] for e in node.expressions]
    while pending:
        expression = pending.pop(0)
        if isinstance(expression, exp.Cube | exp.Rollup | exp.GroupingSets | exp.Tuple):
            sets = sets or not isinstance(expression, exp.Tuple)
            pending[:0] = list(expression.expressions)
        elif isinstance(expression, exp.Paren):
            pending.insert(0, expression.this)
        elif not any(expression == seen for seen in found):
            found.append(expression)
    return found, sets


def repeated_grouping_set(group: exp.Group) -> str | None:
    """A grouping set the GROUP BY makes more than once (`GROUPING SETS ((a), (a))`,
    `a, ROLLUP(a)`, `CUBE(a, a)`: Spark makes its groups twice, with the same grouping id),
    as SQL; None if each is made once."""

    def unit(node: exp.Expr) -> frozenset[str]:
        if isinstance(node, exp.Tuple):
            return frozenset(e.sql("spark") for e in node.expressions)
        if isinstance(node, exp.Paren):
            return unit(node.this)
        return frozenset({node.sql("spark")})

    def options(node: exp.Expr, listed: list[exp.Expr]) -> list[frozenset[str]]:
        items = [unit(e) for e in (node.expressions or listed)]
        if isinstance(node, exp.Cube):
            return [
                frozenset().union(*(items[i] for i in range(len(items)) if mask >> i & 1))
                for mask in range(2 ** len(items))
            ]
        if isinstance(node, exp.Rollup):
            return [frozenset().union(*items[:n]) for n in range(len(items) + 1)]
        return items  # GROUPING SETS: each element one set

    plain = list(group.expressions)
    sets: list[frozenset[str]] = [frozenset()]
    suffix = [n for a in ("grouping_sets", "cube", "rollup") for n in group.args.get(a) or []]
    if suffix:  # `GROUP BY a, b WITH ROLLUP` / `... GROUPING SETS (...)`: over the list
        for node in suffix:
            sets = [s | o for s in sets for o in options(node, plain)]
    else:
        for node in plain:
            found = (
                options(node, [])
                if isinstance(node, exp.Cube | exp.Rollup | exp.GroupingSets)
                else [unit(node)]
            )
            sets = [s | o for s in sets for o in found]
    seen: set[frozenset[str]] = set()
    for made in sets:
        if made in seen:
            return ", ".join(sorted(made))
        seen.add(made)
    return None


def _resolve_table(resolver: SourceResolver, identifier: Identifier) -> TableInfo | None:
    """The table the query reads for this name: itself, or an MV's storage table."""
    table = resolver.table(identifier)
    if table is not None:
        return table
    view = resolver.view(identifier)
    if view is None or view.storage_table is None:
        return None
    return resolver.table(view.storage_table)


def _is_aggregate(select: exp.Select) -> bool:
    """GROUP BY, or an aggregate in the output that is not a window's."""
    return bool(select.args.get("group")) or any(
        a.find_ancestor(exp.Window) is None and a.parent_select is select
        for e in select.expressions
        for a in e.find_all(exp.AggFunc)
    )


def selects_of(query: exp.Query) -> list[exp.Select]:
    """The SELECTs of a UNION ALL tree, left to right (the query itself if a SELECT)."""
    if isinstance(query, exp.Union):
        return [*selects_of(query.left), *selects_of(query.right)]
    if not isinstance(query, exp.Select):
        raise TypeError(f"not a SELECT: {query.sql(dialect='spark')[:80]}")
    return [query]


def _shape(
    query: exp.Query,
    sources: tuple[Identifier, ...],
    rewrites: tuple[str, ...],
    keyed: KeyClass | None = None,
) -> IvmAnalysis:
    selects = selects_of(query)
    outputs = tuple(e.alias_or_name for e in selects[0].expressions)
    if not any(_is_aggregate(s) for s in selects):
        return RowsAnalysis(query, sources, outputs, rewrites, keyed)
    if len(selects) > 1:
        return NotMaintainable(
            ("aggregate-in-union",), ("aggregate inside UNION ALL",), sources, rewrites
        )
    select = selects[0]
    group_exprs, grouping_sets = grouping_expressions(select.args.get("group"))
    keys: list[KeyColumn] = []
    aggregates: list[AggregateColumn] = []
    derived: list[str] = []
    for position, projection in enumerate(select.expressions):
        name = projection.alias_or_name
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        bare = inner.unnest()  # `(a + b)`: the GROUP BY's `a + b` (grouping_expressions)
        if any(bare == g for g in group_exprs):
            keys.append(KeyColumn(position, bare))
        elif isinstance(inner, exp.AggFunc):
            aggregates.append(_aggregate(position, inner))
        else:
            # An aggregate in an expression, or an expression of the group's keys (Spark
            # checked the view: `upper(key)` under GROUP BY key): recomputed per group.
            derived.append(name)
    if len(keys) != len(group_exprs):
        grouped = _groups_as_rows(select, outputs)
        if grouped is not None:
            wrapper, found = grouped
            rewrite = "groups as rows (a group key not in the output)"
            return RowsAnalysis(wrapper, sources, outputs, (*rewrites, rewrite), found)
        missing = [g.sql("spark") for g in group_exprs if not any(k.expression == g for k in keys)]
        return NotMaintainable(
            ("group-key-not-in-output",),
            (f"GROUP BY expressions missing from the output: {', '.join(missing)}",),
            sources,
            rewrites,
        )
    return AggregateAnalysis(
        query=select,
        sources=sources,
        keys=tuple(keys),
        aggregates=tuple(aggregates),
        derived=tuple(derived),
        having=select.args.get("having") is not None,
        output_columns=outputs,
        rewrites=rewrites,
        keyed=keyed,
        grouping_sets=grouping_sets,
    )


def _groups_as_rows(
    select: exp.Select, outputs: tuple[str, ...]
) -> tuple[exp.Select, KeyClass] | None:
    """An aggregate whose output lacks a group key has no storage row per group to merge
    into; its rows are still maintained as rows when a group key is a key class of its
    input (sql/keys.py): `SELECT outputs FROM (the aggregate) g` decomposes by that key (an
    inner GROUP BY by the key), and the touched groups' rows are replaced. That wrapper and
    its key class; None if no key class fits."""
    if select.find(exp.Cube, exp.Rollup, exp.GroupingSets) or not select.args.get("group"):
        return None
    inner = select.copy()
    inner.set("order", None)
    alias = "__icemv_groups"
    wrapper = exp.select(
        *(
            exp.alias_(exp.column(name, table=alias, quoted=True), name, quoted=True)
            for name in outputs
        )
    ).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    )
    found = key_class(wrapper)
    return (wrapper, found) if isinstance(found, KeyClass) else None


def _aggregate(position: int, node: exp.AggFunc) -> AggregateColumn:
    func = _SUPPORTED_AGGREGATES[type(node)]
    argument = node.this
    if func == "count":
        constant = isinstance(argument, exp.Literal) and not isinstance(argument, exp.Null)
        if argument is None or isinstance(argument, exp.Star) or constant:
            return AggregateColumn(position, "count_star", None)
        if isinstance(argument, exp.Distinct):
            return AggregateColumn(position, "count_distinct", argument.expressions[0])
    if func in ("sum", "avg") and isinstance(argument, exp.Distinct):
        distinct: AggregateFunc = "sum_distinct" if func == "sum" else "avg_distinct"
        return AggregateColumn(position, distinct, argument.expressions[0])
    return AggregateColumn(position, func, argument)
