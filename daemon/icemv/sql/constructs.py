"""SQL constructs the delta rules cannot maintain, each with its reason code.

A pure walk over the qualified tree: every construct found yields a code (`window-function`,
`outer-join`, ...) and the first 120 characters of where it is, for `icemv mv explain`.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from icemv.sql.setops import union_source

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
# Where an ORDER BY belongs to a function, not to the query: a window, PERCENTILE_CONT /
# PERCENTILE_DISC ... WITHIN GROUP (ORDER BY x).
_ORDERED_BY = (exp.Window, exp.WithinGroup)
# Aggregates that may take DISTINCT (their touched groups are recomputed).
_DISTINCT_AGGREGATES = (exp.Count, exp.Sum, exp.Avg)


# Generators whose rows follow from one input row each: the delta rules treat them like a
# projection (explode, posexplode and inline, OUTER or not, in a LATERAL VIEW or a SELECT).
_ROW_GENERATORS = (exp.Explode, exp.Posexplode, exp.Inline)


def row_generator(node: exp.Expr) -> bool:
    """A `LATERAL VIEW [OUTER] explode/posexplode/inline(...)` over the row's own columns."""
    return (
        isinstance(node, exp.Lateral)
        and bool(node.args.get("view"))
        and isinstance(node.this, _ROW_GENERATORS)
        and node.this.find(exp.Query) is None
    )


def unsupported_constructs(
    query: exp.Query, aggregates: Collection[type[exp.Expr]]
) -> tuple[list[str], list[str]]:
    """Reason codes and where; `aggregates`: the aggregate functions the delta rules handle
    (their analysis lives in `sql/analysis.py`)."""
    found: dict[str, str] = {}
    # The UNION ALL a set operation was normalised into (sql/setops.py) has a delta rule.
    sides = union_source(query) if isinstance(query, exp.Select) else None

    def flag(reason: str, node: exp.Expr) -> None:
        found.setdefault(reason, node.sql(dialect="spark")[:120])

    for node in query.walk():
        if isinstance(node, exp.Window):
            flag("window-function", node)
        elif isinstance(node, exp.Limit | exp.Offset):
            flag("limit", node)
        elif isinstance(node, exp.Order) and not isinstance(node.parent, _ORDERED_BY):
            flag("order-by", node)
        elif node is sides:
            continue
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
        elif isinstance(node, exp.Intersect | exp.Except) and not node.args.get("distinct"):
            flag("set-operation-all", node)
        elif (isinstance(node, exp.Union) and node.args.get("distinct")) or isinstance(
            node, exp.Intersect | exp.Except
        ):
            flag("set-operation", node)
        elif isinstance(node, exp.Lateral | exp.Unnest) and not row_generator(node):
            flag("generator", node)
        elif isinstance(node, exp.Cube | exp.Rollup | exp.GroupingSets):
            flag("grouping-sets", node)
        elif isinstance(node, _NON_DETERMINISTIC_NODES) or (
            isinstance(node, exp.Anonymous) and str(node.this).lower() in NON_DETERMINISTIC
        ):
            flag("non-deterministic-function", node)
        elif isinstance(node, exp.AggFunc) and not isinstance(node.parent, exp.Window):
            if type(node) not in aggregates:
                flag(f"unsupported-aggregate-{node.key}", node)
            elif isinstance(node.this, exp.Distinct) and not isinstance(node, _DISTINCT_AGGREGATES):
                flag(f"distinct-aggregate-{node.key}", node)
            elif node.find_ancestor(exp.AggFunc) is not None:
                flag("nested-aggregate", node)
    return list(found), [f"{reason}: {text}" for reason, text in found.items()]
