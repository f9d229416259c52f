"""`a NOT IN (SELECT x FROM S WHERE p)` as NOT EXISTS conjuncts, exactly, NULLs included.

A top-level conjunct of a WHERE

    a NOT IN (SELECT x FROM S WHERE p)

becomes the three conjuncts

    NOT EXISTS (SELECT 1 FROM S WHERE p AND x = a)          -- no equal value
    AND NOT EXISTS (SELECT 1 FROM S WHERE p AND x IS NULL)  -- no NULL value
    AND (a IS NOT NULL OR NOT EXISTS (SELECT 1 FROM S WHERE p))

Why this is exact. Let X be the values the subquery returns (for this outer row, if `p`
is correlated). SQL defines `a NOT IN X` as `a <> x1 AND a <> x2 AND ...`: TRUE when X is
empty; FALSE when some x = a is TRUE; NULL otherwise (a is NULL and X is not empty, or some
x is NULL and none equals a). A WHERE keeps a row only when every conjunct is TRUE, so
FALSE and NULL both drop it, and the rewrite must be TRUE exactly when `a NOT IN X` is:

- X empty: all three NOT EXISTS hold: TRUE, as `NOT IN` of nothing.
- X not empty, a NULL: the third conjunct is `FALSE OR FALSE`: the row goes, as `NOT IN`
  is NULL (`NULL <> x` is NULL for every x).
- X not empty, a not NULL, X holds a NULL: the second conjunct is FALSE: the row goes, as
  `NOT IN` is FALSE (some x = a) or NULL (`a <> NULL`).
- X not empty, a not NULL, no NULL in X: the second and third conjuncts hold; the first is
  TRUE exactly when no x equals a, which is when `NOT IN` is TRUE.

The rewrite is two-valued where `NOT IN` is three-valued, so it is only made where that
cannot show: a top-level conjunct of a WHERE (not under NOT, OR, CASE, a projection). The
equality conjunct is an anti join Spark plans by hash; the uncorrelated ones are one-row
probes. Only a one-column subquery without aggregate, window, LIMIT or set operation is
rewritten (`p` then filters S row by row). Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import exp


def not_in_to_not_exists(query: exp.Query, notes: list[str]) -> exp.Query:
    """Rewrite every `a NOT IN (SELECT x ...)` conjunct of every WHERE as above."""
    for where in list(query.find_all(exp.Where)):
        condition = where.this
        conjuncts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
        rewritten = [_rewrite(c) for c in conjuncts]
        if all(r is None for r in rewritten):
            continue
        parts: list[exp.Expr] = []
        for conjunct, replacement in zip(conjuncts, rewritten, strict=True):
            parts += replacement if replacement is not None else [conjunct.copy()]
        where.set("this", exp.and_(*parts))
        notes.append("NOT IN (SELECT) as NOT EXISTS with its NULL cases")
    return query


def _rewrite(conjunct: exp.Expr) -> list[exp.Expr] | None:
    while isinstance(conjunct, exp.Paren):
        conjunct = conjunct.this
    if not isinstance(conjunct, exp.Not):
        return None
    membership = conjunct.this
    while isinstance(membership, exp.Paren):
        membership = membership.this
    if not isinstance(membership, exp.In):
        return None
    subquery = membership.args.get("query")
    inner = subquery.this if isinstance(subquery, exp.Subquery) else subquery
    if not isinstance(inner, exp.Select) or not _rewritable(inner):
        return None
    value = membership.this
    if isinstance(value, exp.Tuple):
        return None
    projection = inner.expressions[0]
    x = projection.this if isinstance(projection, exp.Alias) else projection
    equal = _probe(inner, exp.EQ(this=x.copy(), expression=value.copy()))
    null = _probe(inner, exp.Is(this=x.copy(), expression=exp.null()))
    anything = _probe(inner, None)
    value_known = exp.Not(this=exp.Is(this=value.copy(), expression=exp.null()))
    return [
        exp.Not(this=equal),
        exp.Not(this=null),
        exp.Paren(this=exp.or_(value_known, exp.Not(this=anything))),
    ]


def _rewritable(inner: exp.Select) -> bool:
    if len(inner.expressions) != 1 or isinstance(inner.expressions[0], exp.Star):
        return False
    blocking = ("group", "having", "qualify", "limit", "offset", "with_", "order")
    if any(inner.args.get(key) for key in blocking):
        return False
    return not any(p.find(exp.AggFunc, exp.Window) for p in inner.expressions)


def _probe(inner: exp.Select, condition: exp.Expr | None) -> exp.Exists:
    """EXISTS (SELECT 1 FROM <inner's sources> WHERE <inner's filter> AND condition)."""
    probe = inner.copy()
    probe.set("distinct", None)
    probe.set("expressions", [exp.alias_(exp.Literal.number(1), "one", quoted=True)])
    if condition is not None:
        where = probe.args.get("where")
        combined = exp.and_(where.this.copy(), condition) if where is not None else condition
        probe.set("where", exp.Where(this=combined))
    return exp.Exists(this=probe)
