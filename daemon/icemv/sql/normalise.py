"""Normalise a qualified view query before its analysis: small passes over one tree.

The delta rules see one flat SELECT (or a UNION ALL of them) over tables. What people
write is often the same query in another form: a dbt chain of CTEs, a derived table in
`FROM`, an `ORDER BY` a table cannot keep, a `SELECT DISTINCT`. Each pass below rewrites
one such form into an equivalent one the rules handle, and says what it did, so
`icemv mv explain` can name it:

1. `drop_unordered_sorts`: `ORDER BY` without `LIMIT`/`OFFSET` is dropped (a table has
   no order); with one it stays, and the view is refreshed fully (`limit`).
2. `inline_ctes`: every CTE reference becomes a derived table holding the CTE's query
   (a CTE used twice reads its sources twice, like a self-join: one delta term each).
3. `distinct_to_group_by`: `SELECT DISTINCT e1, e2 ...` becomes `GROUP BY e1, e2`; a key
   group then carries its row count (the hidden `_icemv_rows` multiplicity), so a deleted
   row removes its output row exactly when no copy is left. A constant output is no key
   (below); a DISTINCT of constants only stays.
   `drop_constant_group_keys`: a constant GROUP BY key (a literal; qualification has
   already turned ordinals into the expressions they name) is dropped when another key
   remains: it groups nothing, and both engines would read an integer there as an ordinal.
4. sqlglot's `merge_subqueries`: a derived table without aggregation merges into the
   query that selects from it.
5. `lift_aggregate_subqueries`: `SELECT <exprs of t> FROM (<aggregate>) t WHERE <cond>`
   becomes the aggregate itself, the outer projections substituted and the outer filter
   moved into `HAVING`.
6. `set_operations_to_group_by` (sql/setops.py, once, after 2): a root `UNION`,
   `INTERSECT` or `EXCEPT` becomes a GROUP BY over the UNION ALL of its sides.
7. `not_in_to_not_exists` (sql/not_in.py, once): `a NOT IN (SELECT x ...)` in a WHERE
   becomes NOT EXISTS conjuncts that keep its NULL semantics.

8. `count_if_to_count` (once): `count_if(c)` becomes `count(CASE WHEN c THEN 1 END)`.
9. `outer_joins_to_inner` (sql/outer_joins.py): an outer join whose NULL-padded rows the
   WHERE (or a later inner join's ON) drops becomes the join it equals (LEFT -> inner,
   FULL -> LEFT, RIGHT or inner).

Passes 3 to 5 and 9 repeat until the tree stops changing (a CTE chain folds one level a turn).
Whatever is left (a derived table joined to another table, a window, ...) keeps its
reason code in `sql/constructs.py`. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.merge_subqueries import merge_subqueries

from icemv.sql.not_in import not_in_to_not_exists
from icemv.sql.outer_joins import outer_joins_to_inner
from icemv.sql.setops import set_operations_to_group_by

MAX_ROUNDS = 16


@dataclass(frozen=True)
class Normalised:
    query: exp.Query
    # What was rewritten, one short phrase each (for `icemv mv explain`).
    rewrites: tuple[str, ...]


def normalise(query: exp.Query) -> Normalised:
    """An equivalent query the delta rules are more likely to maintain; `query` is consumed.

    `query` must be qualified (sqlglot's `qualify`): every column named by its table alias.
    """
    notes: list[str] = []
    query = drop_unordered_sorts(query, notes)
    query = inline_ctes(query, notes)
    query = set_operations_to_group_by(query, notes)
    query = not_in_to_not_exists(query, notes)
    query = count_if_to_count(query, notes)
    for _ in range(MAX_ROUNDS):
        before = query.sql(dialect="spark")
        query = distinct_to_group_by(query, notes)
        query = drop_constant_group_keys(query, notes)
        query = _merged(query, notes)
        query = lift_aggregate_subqueries(query, notes)
        query = outer_joins_to_inner(query, notes)
        if query.sql(dialect="spark") == before:
            break
    return Normalised(query, tuple(dict.fromkeys(notes)))


def drop_unordered_sorts(query: exp.Query, notes: list[str]) -> exp.Query:
    """Drop every `ORDER BY` (and Spark's `SORT BY`) that no `LIMIT`/`OFFSET` depends on."""
    for node in list(query.walk()):
        if isinstance(node, exp.Window) or not isinstance(node, exp.Query | exp.Subquery):
            continue
        if node.args.get("limit") or node.args.get("offset") or node.args.get("fetch"):
            continue
        for key in ("order", "sort"):
            if node.args.get(key) is not None:
                node.set(key, None)
                notes.append("ORDER BY without LIMIT dropped")
    return query


def count_if_to_count(query: exp.Query, notes: list[str]) -> exp.Query:
    """`count_if(c)` as `count(CASE WHEN c THEN 1 END)`: Spark defines it so (a NULL `c`
    counts as false, no row gives 0, both BIGINT), and COUNT merges under deletes where
    count_if was recomputed."""
    for node in list(query.find_all(exp.CountIf)):
        case = exp.Case(ifs=[exp.If(this=node.this.copy(), true=exp.Literal.number(1))])
        node.replace(exp.Count(this=case))
        notes.append("count_if(c) as count(CASE WHEN c THEN 1 END)")
    return query


def inline_ctes(query: exp.Query, notes: list[str]) -> exp.Query:
    """Replace each reference to a CTE by a derived table of its query, then drop the WITH."""
    with_ = query.args.get("with_")
    if not isinstance(with_, exp.With) or with_.args.get("recursive"):
        return query
    for cte in list(with_.expressions):
        name = cte.alias_or_name
        body = cte.this
        for table in list(query.find_all(exp.Table)):
            if table.db or table.name != name or table.find_ancestor(exp.CTE) is cte:
                continue
            alias = table.alias_or_name
            table.replace(
                exp.Subquery(
                    this=body.copy(),
                    alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
                )
            )
        notes.append(f"CTE {name} inlined")
    query.set("with_", None)
    return query


def _merged(query: exp.Query, notes: list[str]) -> exp.Query:
    subqueries = _count(query, exp.Subquery)
    merged = merge_subqueries(query)
    if not isinstance(merged, exp.Query):  # pragma: no cover (the pass keeps the root kind)
        return query
    if _count(merged, exp.Subquery) < subqueries:
        notes.append("derived tables merged")
    return merged


def _count(query: exp.Expr, kind: type[exp.Expr]) -> int:
    return sum(1 for _ in query.find_all(kind))


def lift_aggregate_subqueries(query: exp.Query, notes: list[str]) -> exp.Query:
    """`SELECT f(t.a) FROM (SELECT k, agg AS a ... GROUP BY k) t WHERE p(t.a)` -> one SELECT."""
    for select in list(query.find_all(exp.Select)):
        lifted = _lift(select)
        if lifted is None:
            continue
        if select is query:
            query = lifted
        else:
            select.replace(lifted)
        notes.append("aggregate subquery lifted")
    return query


def _lift(outer: exp.Select) -> exp.Select | None:
    source = outer.args.get("from_")
    inner_ref = source.this if isinstance(source, exp.From) else None
    if not isinstance(inner_ref, exp.Subquery) or not _is_plain_wrapper(outer):
        return None
    inner = inner_ref.this
    if not isinstance(inner, exp.Select) or not _is_aggregate(inner):
        return None
    if inner.find(exp.Window) or inner.args.get("distinct") or inner.args.get("limit"):
        return None
    alias = inner_ref.alias_or_name
    outputs = {
        p.alias_or_name: (p.this if isinstance(p, exp.Alias) else p) for p in inner.expressions
    }
    where = outer.args.get("where")
    substitute = _substitution(alias, outputs, [*outer.expressions, *([where] if where else [])])
    if substitute is None:
        return None
    lifted = inner.copy()
    projections = []
    for projection in outer.expressions:
        value = projection.this if isinstance(projection, exp.Alias) else projection
        projections.append(exp.alias_(substitute(value), projection.alias_or_name, quoted=True))
    lifted.set("expressions", projections)
    if where is not None:
        condition = substitute(where.this)
        having = lifted.args.get("having")
        if having is not None:
            condition = exp.and_(having.this.copy(), condition)
        lifted.set("having", exp.Having(this=condition))
    return lifted


def _is_plain_wrapper(outer: exp.Select) -> bool:
    """A projection and filter over one derived table: nothing that needs the rows as rows."""
    blocking = ("joins", "laterals", "group", "having", "qualify", "distinct", "limit", "offset")
    if any(outer.args.get(key) for key in blocking):
        return False
    return not any(p.find(exp.Window, exp.AggFunc) for p in outer.expressions)


def _is_aggregate(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(e.find(exp.AggFunc) for e in select.expressions)


def _substitution(
    alias: str, outputs: dict[str, exp.Expr], uses: list[exp.Expr]
) -> Callable[[exp.Expr], exp.Expr] | None:
    """Replace `alias.c` by the inner query's expression for `c`; None if one is unknown."""
    for node in uses:
        for column in node.find_all(exp.Column):
            if column.table != alias or column.name not in outputs:
                return None

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.table == alias:
            return outputs[node.name].copy()
        return node

    return lambda node: node.copy().transform(swap)


def distinct_to_group_by(query: exp.Query, notes: list[str]) -> exp.Query:
    """`SELECT DISTINCT e1 AS a, e2 AS b ...` -> `SELECT e1 AS a, e2 AS b ... GROUP BY e1, e2`."""
    for select in query.find_all(exp.Select):
        distinct = select.args.get("distinct")
        if not isinstance(distinct, exp.Distinct) or distinct.args.get("on"):
            continue
        if _is_aggregate(select) or any(p.find(exp.Window) for p in select.expressions):
            continue
        keys = [(p.this if isinstance(p, exp.Alias) else p).copy() for p in select.expressions]
        if all(_constant(key) for key in keys):
            continue
        select.set("distinct", None)
        select.set("group", exp.Group(expressions=keys))
        notes.append("DISTINCT as GROUP BY with a row count")
    return query


def drop_constant_group_keys(query: exp.Query, notes: list[str]) -> exp.Query:
    """`GROUP BY e, 4` -> `GROUP BY e`: a constant groups nothing while another key remains.

    Equivalent only with a key left: `GROUP BY 4` alone gives no row on an empty input,
    where no GROUP BY gives one, so an all-constant GROUP BY stays as written.
    """
    for select in query.find_all(exp.Select):
        group = select.args.get("group")
        if not isinstance(group, exp.Group) or any(
            group.args.get(part) for part in ("grouping_sets", "rollup", "cube", "totals", "all")
        ):
            continue
        kept = [key for key in group.expressions if not _constant(key)]
        if kept and len(kept) < len(group.expressions):
            group.set("expressions", kept)
            notes.append("constant GROUP BY keys dropped")
    return query


def _constant(node: exp.Expr) -> bool:
    """A literal, possibly negated or in parentheses: the same value on every row."""
    while isinstance(node, exp.Neg | exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal | exp.Boolean | exp.Null)
