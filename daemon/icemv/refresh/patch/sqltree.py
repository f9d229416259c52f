"""Small sqlglot builders the patch strategies share; every name is quoted exactly.

Column and view names come from the storage schema, the source schemas and icemv's own
`__icemv_*` names: all go through `exp.to_identifier(name, quoted=True)`, so case,
spaces and backticks survive and nothing is pasted into SQL text.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def view(name: str, alias: str | None = None) -> exp.Table:
    """A temp view by name, optionally under `alias`."""
    return exp.Table(this=ident(name), alias=exp.TableAlias(this=ident(alias)) if alias else None)


def subquery(query: exp.Query, alias: str | None = None) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=ident(alias)) if alias else None)


def join(
    relation: exp.Expr, on: exp.Expr, side: str | None = None, kind: str | None = None
) -> exp.Join:
    """`[side] [kind] JOIN relation ON on`, for `Select.join` (given a join type by text,
    sqlglot parses a statement per call to read it)."""
    return exp.Join(this=relation, on=on, side=side, kind=kind)


def aliased(expression: exp.Expr, name: str) -> exp.Alias:
    return exp.Alias(this=expression, alias=ident(name))


def num(value: int | float) -> exp.Expr:
    return exp.Literal.number(value)


def text(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def null_safe_eq(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.NullSafeEQ(this=left, expression=right)


def all_of(conditions: Sequence[exp.Expr]) -> exp.Expr:
    """The conjunction; TRUE when there is nothing to require."""
    if not conditions:
        return exp.true()
    return exp.and_(*conditions, copy=False)


def any_of(conditions: Sequence[exp.Expr]) -> exp.Expr:
    """The disjunction; FALSE when there is nothing to allow."""
    if not conditions:
        return exp.false()
    return exp.or_(*conditions, copy=False)


def null_safe_match(left: str, right: str, pairs: Sequence[tuple[str, str]]) -> exp.Expr:
    """`left.a <=> right.b AND ...` for each (a, b)."""
    return all_of([null_safe_eq(col(a, left), col(b, right)) for a, b in pairs])


def if_(condition: exp.Expr, then: exp.Expr, otherwise: exp.Expr) -> exp.If:
    return exp.If(this=condition, true=then, false=otherwise)


def case(*whens: tuple[exp.Expr, exp.Expr], default: exp.Expr) -> exp.Case:
    node = exp.Case()
    for condition, value in whens:
        node = node.when(condition, value, copy=False)
    return node.else_(default, copy=False)


def sum_(expression: exp.Expr) -> exp.Sum:
    return exp.Sum(this=expression)


def coalesce(*expressions: exp.Expr) -> exp.Coalesce:
    return exp.Coalesce(this=expressions[0], expressions=list(expressions[1:]))


def paren(expression: exp.Expr) -> exp.Paren:
    return exp.Paren(this=expression)


def explode_copies(count: exp.Expr, alias: str) -> exp.Lateral:
    """`LATERAL VIEW explode(sequence(1, count)) AS alias`: one row per copy."""
    return exp.Lateral(
        this=exp.Explode(this=exp.GenerateSeries(start=num(1), end=count)),
        view=True,
        alias=exp.TableAlias(columns=[ident(alias)]),
    )


def render(expression: exp.Expr) -> str:
    return expression.sql(dialect="spark")


def columns(names: Sequence[str], table: str | None = None) -> list[exp.Expr]:
    """Fresh column nodes (a node belongs to one tree)."""
    return [col(name, table) for name in names]


def merge_into(target: str, using: exp.Expr, on: exp.Expr, whens: Sequence[exp.When]) -> exp.Merge:
    """`MERGE INTO target t USING ... ON ...`; `target` is a rendered table reference
    (quoted catalog.namespace.table[.branch]) as the commit path hands it over."""
    into = exp.to_table(target, dialect="spark")
    into.set("alias", exp.TableAlias(this=ident("t")))
    return exp.Merge(this=into, using=using, on=on, whens=exp.Whens(expressions=list(whens)))


def when_matched_delete(condition: exp.Expr | None = None) -> exp.When:
    return exp.When(matched=True, source=False, condition=condition, then=exp.Var(this="DELETE"))


def when_matched_update(sets: Sequence[tuple[str, exp.Expr]]) -> exp.When:
    return exp.When(
        matched=True,
        source=False,
        then=exp.Update(expressions=[exp.EQ(this=col(c), expression=v) for c, v in sets]),
    )


def when_not_matched_insert(
    condition: exp.Expr, names: Sequence[str], values: Sequence[exp.Expr]
) -> exp.When:
    return exp.When(
        matched=False,
        source=False,
        condition=condition,
        then=exp.Insert(
            this=exp.Tuple(expressions=columns(names)),
            expression=exp.Tuple(expressions=list(values)),
        ),
    )
