"""Outer joins whose padded rows a filter drops are inner joins (outer-join simplification).

A `LEFT JOIN r` yields its inner rows and, for each left row without a match, one row
whose columns of `r` are all NULL (a padded row). When the query's WHERE, or the ON of a
later inner join, holds a predicate that cannot be TRUE while some column of `r` is NULL
(it "rejects NULLs" of `r`), every padded row is dropped, and so is every row a later
join makes of it; the join then yields what `JOIN r` yields. Likewise a `RIGHT JOIN` pads
every table before it (the left side), and a `FULL JOIN` both: rejecting the NULLs of its
right side makes it a `RIGHT JOIN`, of its left side a `LEFT JOIN`, of both an inner join
(Galindo-Legaria & Rosenthal, "Outerjoin simplification and reordering for query
optimization", TODS 1997). Spark's optimizer makes the same rewrite (EliminateOuterJoin).

Why dropping the padding keeps the result. Take a LEFT join J (the others are alike) and a
conjunct P of the WHERE that rejects NULLs of J's right side. Every row J pads has those
columns NULL, and no later join changes a column already there, so each row built from it
fails P. A later inner or LEFT join extends rows one by one: a padded row's extensions are
its own, and they go. A later RIGHT or FULL join pads a right row that no left row matches;
without J's padded rows a right row may lose its only match and gain such a row, but that
row has every column of the left side NULL, J's right side among them, and P drops it too.
The WHERE applies after every join, so nothing else sees the difference. A later inner
join's ON is a filter on the rows that reach it in the same way.

What rejects NULLs, conservatively (`never_true`): a conjunct that does; a disjunction
whose every branch does; `x IS NOT NULL`; `x IN (...)`, `x BETWEEN ..`, `x LIKE ..` and
comparisons (not `<=>`) where x is NULL whenever the columns are (`null_when`): a column of
those tables, the NULL literal, or a strict operation (arithmetic, CAST, a few strict
functions) of one. NOT of such a NULL is NULL. Anything else (CASE, COALESCE, IF, a
subquery, a function not listed) is assumed to make a value of NULL. Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp

# Operations whose result is NULL when any operand is (Spark, ANSI off or on).
_STRICT: tuple[type[exp.Expr], ...] = (
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.IntDiv,
    exp.Neg,
    exp.Cast,
    exp.Paren,
    exp.Upper,
    exp.Lower,
    exp.Length,
    exp.Abs,
    exp.Trim,
    exp.Like,
)


def outer_joins_to_inner(query: exp.Query, notes: list[str]) -> exp.Query:
    """Make every outer join whose padded rows a filter drops the join it equals."""
    for select in list(query.find_all(exp.Select)):
        notes += [f"{join}: a filter drops its NULL-padded rows" for join in _simplified(select)]
    return query


def _simplified(select: exp.Select) -> list[str]:
    from_ = select.args.get("from_")
    joins: list[exp.Join] = select.args.get("joins") or []
    if from_ is None or not joins:
        return []
    aliases = [_aliases(from_.this)] + [_aliases(join.this) for join in joins]
    where = select.args.get("where")
    done: list[str] = []
    for index, join in enumerate(joins, start=1):
        side, kind = join.side.upper(), join.kind.upper()
        if side not in ("LEFT", "RIGHT", "FULL") or kind not in ("", "OUTER"):
            continue
        filters = [where.this] if where is not None else []
        filters += [j.args["on"] for j in joins[index:] if _inner(j) and j.args.get("on")]
        left = frozenset().union(*aliases[:index]) if all(aliases[:index]) else frozenset()
        right = aliases[index]
        drops_right = bool(right) and any(never_true(f, right) for f in filters)
        drops_left = bool(left) and any(never_true(f, left) for f in filters)
        was = f"{side} JOIN {join.this.alias_or_name}"
        if (side == "LEFT" and drops_right) or (side == "RIGHT" and drops_left):
            new_side = ""
        elif side == "FULL" and (drops_left or drops_right):
            new_side = "" if drops_left and drops_right else "LEFT" if drops_left else "RIGHT"
        else:
            continue
        join.set("side", new_side or None)
        join.set("kind", None)
        done.append(f"{was} as {new_side + ' ' if new_side else ''}JOIN")
    return done


def _inner(join: exp.Join) -> bool:
    return not join.side and join.kind.upper() in ("", "INNER")


def _aliases(source: exp.Expr) -> frozenset[str]:
    """The alias a FROM or JOIN operand names its columns by; empty: not a plain one."""
    if isinstance(source, (exp.Table, exp.Subquery)) and source.alias_or_name:
        return frozenset({source.alias_or_name})
    return frozenset()


def never_true(predicate: exp.Expr, tables: frozenset[str]) -> bool:
    """Whether `predicate` is NULL or FALSE on every row whose columns of `tables` are NULL."""
    if isinstance(predicate, exp.Paren):
        return never_true(predicate.this, tables)
    if isinstance(predicate, exp.And):
        return never_true(predicate.left, tables) or never_true(predicate.right, tables)
    if isinstance(predicate, exp.Or):
        return never_true(predicate.left, tables) and never_true(predicate.right, tables)
    if isinstance(predicate, exp.Not):
        inner = predicate.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return null_when(inner.this, tables)  # x IS NOT NULL
        return null_when(inner, tables)  # NOT NULL is NULL; NOT FALSE would be TRUE
    if isinstance(predicate, (exp.In, exp.Between)):  # NULL, or FALSE over no values
        return null_when(predicate.this, tables)
    return null_when(predicate, tables)


def null_when(expression: exp.Expr, tables: frozenset[str]) -> bool:
    """Whether `expression` is NULL on every row whose columns of `tables` are NULL."""
    if isinstance(expression, exp.Null):
        return True
    if isinstance(expression, exp.Column):
        return expression.table in tables
    if isinstance(expression, _STRICT):
        operands = [v for v in expression.iter_expressions() if not isinstance(v, exp.DataType)]
        return any(null_when(operand, tables) for operand in operands)
    return False
