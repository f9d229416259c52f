"""Is a view incrementally maintainable, and how? A small pass over the sqlglot tree.

The query is first normalised with sqlglot's `qualify` (stars expanded, every column
qualified by its table alias, every source fully named) so the delta rewrite can swap
table references safely. Every construct the delta rules cannot handle yields a reason
code; the MV is then refreshed fully and the reason says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pyiceberg.exceptions import NoSuchTableError
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from icemv.catalog.lakehouse import Lakehouse
from icemv.errors import NoSuchViewError, ViewSqlError
from icemv.identifiers import Identifier
from icemv.sql.parse import parse_query, table_references

Shape = Literal["rows", "aggregate"]
AggregateFunc = Literal["count_star", "count", "sum", "min", "max", "avg", "count_distinct"]
AggregateStrategy = Literal["merge-aggregates", "recompute-groups"]

NON_DETERMINISTIC = {
    "rand", "random", "randn", "uuid", "now", "current_timestamp", "current_date",
    "current_time", "localtimestamp", "unix_timestamp", "monotonically_increasing_id",
    "spark_partition_id", "input_file_name", "shuffle", "current_user", "rand_str",
}  # fmt: skip
_NON_DETERMINISTIC_NODES: tuple[type[exp.Expr], ...] = (
    exp.Rand,
    exp.Randn,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
)
_SUPPORTED_AGGREGATES: dict[type[exp.Expr], AggregateFunc] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
}
WEIGHT = "__icemv_w"


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
class IvmAnalysis:
    reasons: tuple[str, ...]
    details: tuple[str, ...] = ()
    shape: Shape | None = None
    query: exp.Query | None = None
    # Source tables as the query reads them (an MV source means its storage table).
    sources: tuple[Identifier, ...] = ()
    keys: tuple[KeyColumn, ...] = ()
    aggregates: tuple[AggregateColumn, ...] = ()
    # Output columns that are neither a key nor a bare aggregate (e.g. sum(x) / count(*)).
    derived: tuple[str, ...] = ()
    having: bool = False
    output_columns: tuple[str, ...] = field(default_factory=tuple)

    @property
    def maintainable(self) -> bool:
        return not self.reasons

    def aggregate_strategy(self, with_deletes: bool) -> AggregateStrategy:
        """Merge from the delta when the stored values suffice, else recompute the groups."""
        funcs = {a.func for a in self.aggregates}
        if self.having or self.derived or funcs & {"avg", "count_distinct"}:
            return "recompute-groups"
        if with_deletes and ("count_star" not in funcs or funcs - {"count_star", "count", "sum"}):
            return "recompute-groups"
        return "merge-aggregates"


def analyse(lakehouse: Lakehouse, sql: str, default_namespace: tuple[str, ...]) -> IvmAnalysis:
    try:
        query = parse_query(sql)
    except ViewSqlError as exc:
        return IvmAnalysis(("unparsable",), (str(exc),))
    reasons: list[str] = []
    details: list[str] = []
    sources: list[Identifier] = []
    schema: dict[str, object] = {}
    catalog = lakehouse.catalog_name
    for table in table_references(query):
        identifier = Identifier((table.db,) if table.db else default_namespace, table.name)
        resolved = _resolve_table(lakehouse, identifier)
        if resolved is None:
            if lakehouse.views.exists(identifier):
                reasons.append("view-source")
                details.append(f"{identifier} is a plain view: inline its SQL to maintain it")
            else:
                reasons.append("unknown-source")
                details.append(f"{identifier} does not exist")
            continue
        source, columns = resolved
        table.set("this", exp.to_identifier(source.name))
        table.set("db", exp.to_identifier(source.namespace_str))
        table.set("catalog", exp.to_identifier(catalog))
        if source not in sources:
            sources.append(source)
        namespaces = schema.setdefault(catalog, {})
        assert isinstance(namespaces, dict)
        namespaces.setdefault(source.namespace_str, {})[source.name] = columns
    if reasons:
        return IvmAnalysis(tuple(reasons), tuple(details), sources=tuple(sources))
    try:
        qualified = qualify(
            query,
            schema=MappingSchema(schema, dialect="spark"),
            catalog=catalog,
            db=".".join(default_namespace),
            dialect="spark",
            quote_identifiers=True,
            validate_qualify_columns=True,
        )
    except (OptimizeError, SqlglotError) as exc:
        return IvmAnalysis(("unresolvable",), (str(exc),), sources=tuple(sources))
    assert isinstance(qualified, exp.Query)
    reasons, details = _unsupported_constructs(qualified)
    if reasons:
        return IvmAnalysis(tuple(reasons), tuple(details), sources=tuple(sources))
    return _shape(qualified, tuple(sources))


def _resolve_table(
    lakehouse: Lakehouse, identifier: Identifier
) -> tuple[Identifier, dict[str, str]] | None:
    """The table the query reads for this name: itself, or an MV's storage table."""
    target = identifier
    try:
        table = lakehouse.load_table(identifier)
    except NoSuchTableError:
        try:
            storage = lakehouse.views.load(identifier).metadata.current_version.storage_table
        except NoSuchViewError:
            return None
        if storage is None:
            return None
        target = storage
        table = lakehouse.load_table(storage)
    return target, {f.name: "string" for f in table.schema().fields}


def _unsupported_constructs(query: exp.Query) -> tuple[list[str], list[str]]:
    found: dict[str, str] = {}

    def flag(reason: str, node: exp.Expr) -> None:
        found.setdefault(reason, node.sql(dialect="spark")[:120])

    for node in query.walk():
        if isinstance(node, exp.Window):
            flag("window-function", node)
        elif isinstance(node, exp.Limit | exp.Offset):
            flag("limit", node)
        elif isinstance(node, exp.Order) and not isinstance(node.parent, exp.Window):
            flag("order-by", node)
        elif (
            isinstance(node, exp.Subquery | exp.Exists)
            or (
                isinstance(node, exp.Select)
                and node is not query
                and not isinstance(node.parent, exp.Union)
            )
            or isinstance(node, exp.With)
        ):
            flag("subquery", node)
        elif isinstance(node, exp.Join):
            side, kind = (node.side or "").upper(), (node.kind or "").upper()
            if side in ("LEFT", "RIGHT", "FULL") or kind == "OUTER":
                flag("outer-join", node)
            elif kind in ("SEMI", "ANTI"):
                flag("semi-join", node)
        elif isinstance(node, exp.Distinct) and isinstance(node.parent, exp.Select):
            flag("distinct", node)
        elif (isinstance(node, exp.Union) and node.args.get("distinct")) or isinstance(
            node, exp.Intersect | exp.Except
        ):
            flag("set-operation", node)
        elif isinstance(node, exp.Lateral | exp.Explode | exp.Posexplode | exp.Unnest):
            flag("generator", node)
        elif isinstance(node, exp.Cube | exp.Rollup | exp.GroupingSets):
            flag("grouping-sets", node)
        elif isinstance(node, _NON_DETERMINISTIC_NODES) or (
            isinstance(node, exp.Anonymous) and str(node.this).lower() in NON_DETERMINISTIC
        ):
            flag("non-deterministic-function", node)
        elif isinstance(node, exp.AggFunc):
            if type(node) not in _SUPPORTED_AGGREGATES:
                flag(f"unsupported-aggregate-{node.key}", node)
            elif isinstance(node.this, exp.Distinct) and not isinstance(node, exp.Count):
                flag(f"distinct-aggregate-{node.key}", node)
            elif node.find_ancestor(exp.AggFunc) is not None:
                flag("nested-aggregate", node)
    return list(found), [f"{reason}: {text}" for reason, text in found.items()]


def _selects(query: exp.Query) -> list[exp.Select]:
    if isinstance(query, exp.Union):
        return [*_selects(query.left), *_selects(query.right)]
    assert isinstance(query, exp.Select)
    return [query]


def _is_aggregate(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(e.find(exp.AggFunc) for e in select.expressions)


def _shape(query: exp.Query, sources: tuple[Identifier, ...]) -> IvmAnalysis:
    selects = _selects(query)
    outputs = tuple(e.alias_or_name for e in selects[0].expressions)
    if not any(_is_aggregate(s) for s in selects):
        return IvmAnalysis((), shape="rows", query=query, sources=sources, output_columns=outputs)
    if len(selects) > 1:
        return IvmAnalysis(
            ("aggregate-in-union",), ("aggregate inside UNION ALL",), sources=sources
        )
    select = selects[0]
    group = select.args.get("group")
    group_exprs = list(group.expressions) if group else []
    keys: list[KeyColumn] = []
    aggregates: list[AggregateColumn] = []
    derived: list[str] = []
    for position, projection in enumerate(select.expressions):
        name = projection.alias_or_name
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if any(inner == g for g in group_exprs):
            keys.append(KeyColumn(position, inner))
        elif isinstance(inner, exp.AggFunc):
            aggregates.append(_aggregate(position, inner))
        elif inner.find(exp.AggFunc) is not None:
            derived.append(name)
        else:
            return IvmAnalysis(
                ("unresolvable",), (f"{name} is neither grouped nor aggregated",), sources=sources
            )
    if len(keys) != len(group_exprs):
        missing = [g.sql("spark") for g in group_exprs if not any(k.expression == g for k in keys)]
        return IvmAnalysis(
            ("group-key-not-in-output",),
            (f"GROUP BY expressions missing from the output: {', '.join(missing)}",),
            sources=sources,
        )
    return IvmAnalysis(
        (),
        shape="aggregate",
        query=query,
        sources=sources,
        keys=tuple(keys),
        aggregates=tuple(aggregates),
        derived=tuple(derived),
        having=select.args.get("having") is not None,
        output_columns=outputs,
    )


def _aggregate(position: int, node: exp.AggFunc) -> AggregateColumn:
    func = _SUPPORTED_AGGREGATES[type(node)]
    argument = node.this
    if func == "count":
        constant = isinstance(argument, exp.Literal) and not isinstance(argument, exp.Null)
        if argument is None or isinstance(argument, exp.Star) or constant:
            return AggregateColumn(position, "count_star", None)
        if isinstance(argument, exp.Distinct):
            return AggregateColumn(position, "count_distinct", argument.expressions[0])
    return AggregateColumn(position, func, argument)
