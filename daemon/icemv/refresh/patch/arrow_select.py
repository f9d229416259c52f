"""The SELECT an Arrow delta evaluates: its joins, its WHERE, and its columns by alias.

Views read by the Arrow path (refresh/patch/arrow_rows.py, arrow_aggregates.py) are one
SELECT whose FROM table is the changed source, joined (INNER, or LEFT with the changed
source on the preserved side) with unchanged tables by equalities: no UNION, no LIMIT, no
window, no subquery, no keyed delta. Everything is compiled against the tables' Arrow
schemas before any row is read.

A join is evaluated as Spark evaluates it: left-deep in FROM order; each ON condition a
conjunction of equalities between an expression over the tables joined so far and one
over the joined table (NULL never equals anything: Arrow's hash join does not match NULL
keys either), terms over the joined table alone (they filter it before the join, which is
the same under INNER and LEFT), and, under INNER only, terms over the tables joined so far
(they filter those). Key pairs are integers (compared in the wider type, as Spark widens
them), strings, dates or booleans; anything else (floating point keys: Spark normalises
NaN and -0.0 in join keys, DECIMAL, mixed kinds: Spark casts) is refused. Duplicate keys
multiply rows, as in Spark; a LEFT JOIN pads an unmatched row with NULLs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from icemv.errors import ArrowUnsupportedError
from icemv.sql.arrow_expr import ArrowExpr, Fields, compile_expr
from icemv.sql.names import WEIGHT

# SELECT parts the Arrow path evaluates; any other part set sends the view to Spark.
_PARTS = frozenset({"expressions", "from_", "where", "group", "kind", "joins"})


@dataclass(frozen=True)
class ArrowJoin:
    """One JOIN of the rows so far (left) with an unchanged table (right)."""

    left_outer: bool
    prefix: str  # the right table's columns in the joined rows: f"{prefix}{name}"
    left_keys: tuple[ArrowExpr, ...]  # over the rows so far
    right_keys: tuple[ArrowExpr, ...]  # over the right table's prefixed rows
    left_filter: ArrowExpr | None  # INNER only: ON terms over the rows so far
    right_filter: ArrowExpr | None  # ON terms over the right table alone

    def apply(self, left: pa.Table, right: pa.Table) -> pa.Table:
        right = right.rename_columns([f"{self.prefix}{n}" for n in right.column_names])
        left, right = _kept(left, self.left_filter), _kept(right, self.right_filter)
        lnames = [f"__lk{i}" for i in range(len(self.left_keys))]
        rnames = [f"__rk{i}" for i in range(len(self.right_keys))]
        keyed_left = left
        for name, key in zip(lnames, self.left_keys, strict=True):
            keyed_left = keyed_left.append_column(name, key.evaluate(left))
        keyed_right = right
        for name, key in zip(rnames, self.right_keys, strict=True):
            keyed_right = keyed_right.append_column(name, key.evaluate(right))
        joined = keyed_left.join(
            keyed_right,
            lnames,
            rnames,
            join_type="left outer" if self.left_outer else "inner",
            coalesce_keys=False,
            use_threads=False,
        )
        return joined.drop_columns([*lnames, *rnames])


@dataclass(frozen=True)
class ArrowSelect:
    fields: Fields  # the columns of every table occurrence, under its alias
    where: ArrowExpr | None
    joins: tuple[ArrowJoin, ...] = ()
    prefix: str = ""  # the changed source's columns in the joined rows (with joins)

    def compile(self, node: exp.Expr) -> ArrowExpr:
        return compile_expr(node, self.fields)

    def joined(self, changed: pa.Table, dimensions: Sequence[pa.Table]) -> pa.Table:
        """The changed source rows joined with the unchanged tables (one per join, in
        order): the rows the WHERE and the SELECT list are evaluated over. Signed change
        rows keep their `WEIGHT` column, by that name: each joined row carries the weight
        of the source row it comes from (the delta of `dsource JOIN t` with `t` unchanged)."""
        if not self.joins:
            return changed
        names = [n if n == WEIGHT else f"{self.prefix}{n}" for n in changed.column_names]
        rows = changed.rename_columns(names)
        for join, dimension in zip(self.joins, dimensions, strict=True):
            rows = join.apply(rows, dimension)
        return rows

    def filtered(self, rows: pa.Table) -> pa.Table:
        """The (joined) rows that pass the WHERE clause (NULL does not pass)."""
        return _kept(rows, self.where)


def _kept(rows: pa.Table, condition: ArrowExpr | None) -> pa.Table:
    if condition is None:
        return rows
    return rows.filter(condition.evaluate(rows), null_selection_behavior="drop")


def joined_tables(query: exp.Select) -> list[exp.Table]:
    """The table occurrences of the SELECT's JOINs, in order (the FROM table aside)."""
    return [j.this for j in query.args.get("joins") or [] if isinstance(j.this, exp.Table)]


def referenced_columns(query: exp.Select, alias: str) -> tuple[str, ...]:
    """The columns of occurrence `alias` the query names (a star: ArrowUnsupportedError)."""
    names: dict[str, None] = {}
    for column in query.find_all(exp.Column):
        if column.table != alias:
            continue
        if isinstance(column.this, exp.Star):
            raise ArrowUnsupportedError(f"{alias}.* over a joined table")
        names[column.name] = None
    return tuple(names)


def compile_select(
    query: exp.Query, source: pa.Schema, dimensions: Mapping[str, pa.Schema] | None = None
) -> ArrowSelect:
    """The SELECT over `source` (its FROM table) joined with `dimensions` (each JOIN's
    table by alias, the columns it reads); raises ArrowUnsupportedError outside the subset."""
    if not isinstance(query, exp.Select):
        raise ArrowUnsupportedError("not a single SELECT")
    extra = sorted(k for k, v in query.args.items() if v and k not in _PARTS)
    if extra:
        raise ArrowUnsupportedError(f"SELECT with {', '.join(extra)}")
    if query.args.get("kind"):
        raise ArrowUnsupportedError(f"SELECT {query.args['kind']}")
    if any(query.find_all(exp.Subquery, exp.Window)):
        raise ArrowUnsupportedError("a subquery or window")
    from_ = query.args.get("from_")
    first = from_.this if from_ is not None else None
    if not isinstance(first, exp.Table):
        raise ArrowUnsupportedError("FROM is not a table")
    joins = query.args.get("joins") or []
    if not joins:
        if len(list(query.find_all(exp.Table))) != 1:
            raise ArrowUnsupportedError("more than one table occurrence")
        alias = first.alias_or_name
        fields: Fields = {(alias, f.name): (f.name, f.type) for f in source}
        return ArrowSelect(fields, _where(query, fields))
    dimensions = dimensions or {}
    prefix = "0:"
    known: dict[tuple[str, str], tuple[str, pa.DataType]] = {
        (first.alias_or_name, f.name): (f"{prefix}{f.name}", f.type) for f in source
    }
    compiled: list[ArrowJoin] = []
    for position, join in enumerate(joins, start=1):
        table = join.this
        if not isinstance(table, exp.Table):
            raise ArrowUnsupportedError("a JOIN of a derived table")
        schema = dimensions.get(table.alias_or_name)
        if schema is None:
            raise ArrowUnsupportedError(f"JOIN {table.alias_or_name}: no unchanged table")
        right_prefix = f"{position}:"
        right: Fields = {
            (table.alias_or_name, f.name): (f"{right_prefix}{f.name}", f.type) for f in schema
        }
        compiled.append(_compile_join(join, dict(known), right, right_prefix))
        known.update(right)
    return ArrowSelect(known, _where(query, known), tuple(compiled), prefix)


def _where(query: exp.Select, fields: Fields) -> ArrowExpr | None:
    where = query.args.get("where")
    compiled = compile_expr(where.this, fields) if where is not None else None
    if compiled is not None and not pa.types.is_boolean(compiled.type):
        raise ArrowUnsupportedError(f"WHERE of type {compiled.type}")
    return compiled


def _compile_join(join: exp.Join, left: Fields, right: Fields, prefix: str) -> ArrowJoin:
    side, kind = str(join.args.get("side") or "").upper(), str(join.args.get("kind") or "")
    if kind.upper() not in ("", "INNER", "OUTER") or side not in ("", "LEFT"):
        raise ArrowUnsupportedError(f"a {' '.join(p for p in (side, kind) if p)} JOIN")
    if join.args.get("using") or join.args.get("method"):
        raise ArrowUnsupportedError("JOIN USING or a join method")
    on = join.args.get("on")
    if on is None:
        raise ArrowUnsupportedError("a JOIN without ON (a cross join)")
    left_outer = side == "LEFT"
    lkeys: list[ArrowExpr] = []
    rkeys: list[ArrowExpr] = []
    lterms: list[exp.Expr] = []
    rterms: list[exp.Expr] = []
    for term in _conjuncts(on):
        sides = _sides(term, left, right)
        if sides == {"right"} or not sides:
            rterms.append(term)
        elif sides == {"left"} and not left_outer:
            lterms.append(term)
        elif isinstance(term, exp.EQ):
            lkey, rkey = _key_pair(term, left, right)
            lkeys.append(lkey)
            rkeys.append(rkey)
        else:
            raise ArrowUnsupportedError(f"ON term {term.sql(dialect='spark')[:60]}")
    if not lkeys:
        raise ArrowUnsupportedError("a JOIN without an equality of both sides")
    return ArrowJoin(
        left_outer,
        prefix,
        tuple(lkeys),
        tuple(rkeys),
        _condition(lterms, left),
        _condition(rterms, right),
    )


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return [*_conjuncts(node.this), *_conjuncts(node.expression)]
    return [node]


def _sides(node: exp.Expr, left: Fields, right: Fields) -> set[str]:
    sides = set()
    for column in node.find_all(exp.Column):
        key = (column.table, column.name)
        sides.add("left" if key in left else "right" if key in right else "unknown")
    if "unknown" in sides:
        raise ArrowUnsupportedError(f"ON term {node.sql(dialect='spark')[:60]}: unknown column")
    return sides


def _condition(terms: Sequence[exp.Expr], fields: Fields) -> ArrowExpr | None:
    if not terms:
        return None
    node = terms[0].copy()
    for term in terms[1:]:
        node = exp.And(this=node, expression=term.copy())
    compiled = compile_expr(node, fields)
    if not pa.types.is_boolean(compiled.type):
        raise ArrowUnsupportedError(f"ON condition of type {compiled.type}")
    return compiled


def _key_pair(term: exp.EQ, left: Fields, right: Fields) -> tuple[ArrowExpr, ArrowExpr]:
    """`a = b` with `a` over the left rows and `b` over the right (either order), in one
    Arrow type that compares as Spark compares them."""
    a, b = term.this, term.expression
    if _sides(a, left, right) != {"left"}:
        a, b = b, a
    if _sides(a, left, right) != {"left"} or _sides(b, left, right) != {"right"}:
        raise ArrowUnsupportedError(f"ON term {term.sql(dialect='spark')[:60]}")
    lkey, rkey = compile_expr(a, left), compile_expr(b, right)
    lt, rt = lkey.type, rkey.type
    if pa.types.is_integer(lt) and pa.types.is_integer(rt):
        wide = lt if lt.bit_width >= rt.bit_width else rt
        return _as(lkey, wide), _as(rkey, wide)
    strings = (pa.types.is_string, pa.types.is_large_string)
    if any(s(lt) for s in strings) and any(s(rt) for s in strings):
        return _as(lkey, pa.large_string()), _as(rkey, pa.large_string())
    if lt == rt and (pa.types.is_date32(lt) or pa.types.is_boolean(lt)):
        return lkey, rkey
    raise ArrowUnsupportedError(f"join key of {lt} and {rt}")


def _as(expr: ArrowExpr, target: pa.DataType) -> ArrowExpr:
    if expr.type == target:
        return expr
    return ArrowExpr(target, lambda t: pc.cast(expr.evaluate(t), target))
