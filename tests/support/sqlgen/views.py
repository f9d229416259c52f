"""Random views, in the spirit of SQLancer: a grammar of the SQL people write, typed so that
what it makes is valid Spark SQL, over the tables of `schema.py`.

Shapes: filters and projections over joins of every kind (inner, LEFT/RIGHT/FULL, cross
joins equated in the WHERE, semi and anti), aggregates (GROUP BY or global, HAVING,
DISTINCT aggregates, DECIMAL products), windows with and without PARTITION BY (ranks,
LAG/LEAD, running and partition aggregates), filters above windows, CTEs and derived
tables, set operations, `SELECT DISTINCT`, top-N, and subqueries at any depth of a WHERE
(`[NOT] EXISTS`, `IN`, `NOT IN`, `NOT (x IN ...)`, under OR and CASE) or in a projection.
Every window orders by every column it sees, so the view is one bag whatever the ties.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.support.sqlgen.schema import TABLES, Column, Kind, literal

NUMERIC = ("int", "bigint", "double", "decimal")
ORDERABLE = ("int", "bigint", "double", "decimal", "string", "date", "timestamp")
GROUPABLE = ("int", "string", "date", "bool", "decimal", "timestamp", "bigint")


@dataclass(frozen=True)
class Ref:
    """A column a query may name: `sql` as written, its kind, a readable base name."""

    sql: str
    kind: Kind
    name: str


class ViewGen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.aliases = 0

    # -- entry -------------------------------------------------------------------------
    def view(self) -> str:
        shape = self.pick(
            ("rows", 3), ("aggregate", 4), ("window", 3), ("setop", 1), ("cte", 2),
            ("distinct", 1), ("top_n", 1), ("chain", 2),
        )  # fmt: skip
        return str(getattr(self, f"_{shape}")())

    # -- helpers -----------------------------------------------------------------------
    def pick(self, *weighted: tuple[str, int]) -> str:
        names = [w[0] for w in weighted]
        return self.rng.choices(names, weights=[w[1] for w in weighted])[0]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def alias(self, prefix: str = "t") -> str:
        self.aliases += 1
        return f"{prefix}{self.aliases}"

    def refs_of(self, table: str, alias: str) -> list[Ref]:
        return [Ref(f"{alias}.{c.name}", c.kind, c.name) for c in TABLES[table].columns]

    def lit(self, kind: Kind) -> str:
        column = _column_of(self.rng, kind)
        from tests.support.sqlgen.schema import value

        return literal(value(self.rng, column) if self.chance(0.9) else None, column)

    def col(self, scope: list[Ref], kind: Kind) -> str | None:
        found = [r for r in scope if r.kind == kind]
        return self.rng.choice(found).sql if found else None

    # -- expressions -------------------------------------------------------------------
    def expr(self, scope: list[Ref], kind: Kind, depth: int = 2) -> str:
        column = self.col(scope, kind)
        if depth <= 0 or self.chance(0.45):
            if column is not None and self.chance(0.9):
                return column
            return self.lit(kind) if kind != "bool" else self.pred(scope, 0, subqueries=False)
        sub = depth - 1
        if kind == "bool":
            return self.pred(scope, depth, subqueries=False)
        if self.chance(0.12):
            then, other = self.expr(scope, kind, sub), self.expr(scope, kind, sub)
            return f"CASE WHEN {self.pred(scope, sub, False)} THEN {then} ELSE {other} END"
        if self.chance(0.1):
            return f"coalesce({self.expr(scope, kind, sub)}, {self.lit(kind)})"
        return str(getattr(self, f"_{kind}_expr")(scope, sub))

    def _int_expr(self, scope: list[Ref], depth: int) -> str:
        a, b = self.expr(scope, "int", depth), self.expr(scope, "int", depth)
        return self.rng.choice([
            f"({a} + {b})", f"({a} - {b})", f"({a} * 3)", f"({a} % 3)", f"abs({a})",
            f"length({self.expr(scope, 'string', depth)})",
            f"month({self.expr(scope, 'date', depth)})",
            f"hour({self.expr(scope, 'timestamp', depth)})",
            # functions of the embedded engine's table (sql/functions/table.py)
            f"dayofweek({self.expr(scope, 'date', depth)})",
            f"weekofyear({self.expr(scope, 'timestamp', depth)})",
            f"datediff({self.expr(scope, 'date', depth)}, {self.expr(scope, 'date', depth)})",
            f"pmod({a}, 7)", f"instr({self.expr(scope, 'string', depth)}, 'a')",
            f"CAST({self.expr(scope, 'string', depth)} AS INT)",
            f"quarter({self.expr(scope, 'timestamp', depth)})",
        ])  # fmt: skip

    def _bigint_expr(self, scope: list[Ref], depth: int) -> str:
        a = self.expr(scope, "bigint", depth)
        return self.rng.choice([
            f"CAST({self.expr(scope, 'int', depth)} AS BIGINT)", f"({a} + {a})",
            f"({a} * 2)", f"({a} DIV 2)",
            f"unix_timestamp({self.expr(scope, 'timestamp', depth)})",
        ])  # fmt: skip

    def _double_expr(self, scope: list[Ref], depth: int) -> str:
        a = self.expr(scope, "double", depth)
        return self.rng.choice([
            f"({self.expr(scope, 'int', depth)} / {self.expr(scope, 'int', depth)})",
            f"CAST({self.expr(scope, 'decimal', depth)} AS DOUBLE)", f"({a} * 1.5)",
            f"({a} + {self.expr(scope, 'double', depth)})",
            f"months_between({self.expr(scope, 'timestamp', depth)}, "
            f"{self.expr(scope, 'date', depth)})",
        ])  # fmt: skip

    def _decimal_expr(self, scope: list[Ref], depth: int) -> str:
        a, b = self.expr(scope, "decimal", depth), self.expr(scope, "decimal", depth)
        return self.rng.choice([
            f"({a} * {b})", f"({a} * {b} * {self.expr(scope, 'decimal', depth)})",
            f"({a} + {b})", f"({a} - {b})", f"round({a}, 1)", f"CAST({a} AS DECIMAL(18,4))",
            f"abs({a})", f"({a} * {self.expr(scope, 'int', depth)})", f"floor({a})",
        ])  # fmt: skip

    def _string_expr(self, scope: list[Ref], depth: int) -> str:
        a = self.expr(scope, "string", depth)
        return self.rng.choice([
            f"upper({a})", f"concat({a}, {self.expr(scope, 'string', depth)})",
            f"substr({a}, 1, 1)", f"trim({a})", f"CAST({self.expr(scope, 'int', depth)} AS STRING)",
            f"reverse({a})", f"lpad({a}, 4, '*')", f"replace({a}, 'a', 'b')",
            f"split_part({a}, ',', 1)", f"md5({a})", f"regexp_replace({a}, '[aeiou]+', '_')",
            f"regexp_extract({a}, '([a-c]+)(x)?', 1)",
            f"date_format({self.expr(scope, 'timestamp', depth)}, 'yyyy-MM-dd HH:mm')",
            f"date_format({self.expr(scope, 'date', depth)}, 'MMM d, EEE')",
            f"concat_ws('-', {a}, {self.expr(scope, 'string', depth)})", f"initcap({a})",
            f"substring_index({a}, ',', -1)",
        ])  # fmt: skip

    def _date_expr(self, scope: list[Ref], depth: int) -> str:
        return self.rng.choice([
            f"CAST({self.expr(scope, 'timestamp', depth)} AS DATE)",
            f"date_add({self.expr(scope, 'date', depth)}, 1)",
            f"last_day({self.expr(scope, 'date', depth)})",
            f"next_day({self.expr(scope, 'date', depth)}, 'MON')",
            f"add_months({self.expr(scope, 'date', depth)}, 1)",
            f"trunc({self.expr(scope, 'date', depth)}, 'MM')",
        ])  # fmt: skip

    def _timestamp_expr(self, scope: list[Ref], depth: int) -> str:
        unit = self.rng.choice(["HOUR", "DAY", "MONTH"])
        return self.rng.choice([
            f"date_trunc('{unit}', {self.expr(scope, 'timestamp', depth)})",
            f"CAST({self.expr(scope, 'date', depth)} AS TIMESTAMP)",
        ])  # fmt: skip

    # -- predicates --------------------------------------------------------------------
    def pred(self, scope: list[Ref], depth: int = 2, subqueries: bool = True) -> str:
        if depth > 0 and self.chance(0.35):
            sub = depth - 1
            form = self.pick(("and", 3), ("or", 3), ("not", 2), ("case", 1))
            if form == "not":
                return f"NOT ({self.pred(scope, sub, subqueries)})"
            if form == "case":
                a, b, c = (self.pred(scope, sub, subqueries) for _ in range(3))
                return f"CASE WHEN {a} THEN {b} ELSE {c} END"
            a, b = self.pred(scope, sub, subqueries), self.pred(scope, sub, subqueries)
            return f"({a} {form.upper()} {b})"
        if subqueries and self.chance(0.25):
            found = self._subquery_pred(scope)
            if found is not None:
                return found
        kind = self.rng.choice([r.kind for r in scope] or ["int"])
        a = self.expr(scope, kind, 1)
        form = self.pick(("cmp", 6), ("null", 2), ("in", 2), ("between", 1), ("like", 1))
        if form == "null":
            return f"{a} IS {'NOT ' if self.chance(0.5) else ''}NULL"
        if kind == "bool":
            return a
        if form == "in":
            return f"{a} IN ({', '.join(self.lit(kind) for _ in range(self.rng.randint(1, 3)))})"
        if form == "between" and kind in ORDERABLE:
            return f"{a} BETWEEN {self.lit(kind)} AND {self.lit(kind)}"
        if form == "like" and kind == "string":
            return f"{a} LIKE '{self.rng.choice(['a%', '%b', '_', '%'])}'"
        op = self.rng.choice(["=", "<>", "<", ">=", "<=>"])
        other = self.expr(scope, kind, 1) if self.chance(0.3) else self.lit(kind)
        return f"{a} {op} {other}"

    def _subquery_pred(self, scope: list[Ref]) -> str | None:
        table = self.rng.choice(list(TABLES))
        alias = self.alias("s")
        inner = self.refs_of(table, alias)
        shared = [r for r in scope if any(i.kind == r.kind for i in inner)]
        if not shared:
            return None
        outer = self.rng.choice(shared)
        keyed = [r for r in shared if r.name in ("k", "k0", "key")]
        if keyed and self.chance(0.7):  # correlated on the key, mostly
            outer = self.rng.choice(keyed)
        key = self.rng.choice([i for i in inner if i.kind == outer.kind])
        if outer.name in ("k", "k0", "key"):
            key = next(i for i in inner if i.name == "k")
        extra = f" AND {self.pred(inner, 0, False)}" if self.chance(0.4) else ""
        form = self.pick(("exists", 3), ("not_exists", 2), ("in", 3), ("not_in", 2),
                         ("not_paren_in", 1))  # fmt: skip
        source = f"{table} {alias}"
        if form in ("exists", "not_exists"):
            negate = "NOT " if form == "not_exists" else ""
            return f"{negate}EXISTS (SELECT 1 FROM {source} WHERE {key.sql} = {outer.sql}{extra})"
        where = f" WHERE {self.pred(inner, 0, False)}" if self.chance(0.5) else ""
        sub = f"SELECT {key.sql} FROM {source}{where}"
        if form == "in":
            return f"{outer.sql} IN ({sub})"
        if form == "not_in":
            return f"{outer.sql} NOT IN ({sub})"
        return f"NOT ({outer.sql} IN ({sub}))"

    # -- FROM ----------------------------------------------------------------------------
    def from_clause(self, max_sources: int = 3) -> tuple[str, list[Ref], list[str]]:
        """FROM text, the columns in scope, and WHERE conjuncts a cross join needs."""
        sql, scope = self._source()
        where: list[str] = []
        for _ in range(self.rng.randint(0, max_sources - 1)):
            join = self.pick(("inner", 4), ("left", 3), ("right", 1), ("full", 1), ("cross", 1),
                             ("semi", 1), ("anti", 1))  # fmt: skip
            table = self.rng.choice(list(TABLES))
            alias = self.alias()
            right = self.refs_of(table, alias)
            on = self._join_condition(scope, right)
            if join == "cross":
                sql += f", {table} {alias}"
                where.append(on)
            elif join in ("semi", "anti"):
                sql += f" LEFT {join.upper()} JOIN {table} {alias} ON {on}"
                continue
            else:
                kind = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN",
                        "full": "FULL JOIN"}[join]  # fmt: skip
                sql += f" {kind} {table} {alias} ON {on}"
            scope = scope + right
        return sql, scope, where

    def _source(self) -> tuple[str, list[Ref]]:
        if self.chance(0.2):
            inner, outputs = self._derived()
            alias = self.alias("q")
            return f"({inner}) {alias}", [Ref(f"{alias}.{n}", k, n) for n, k in outputs]
        table = self.rng.choice(["f", "f", "d", "e"])
        alias = self.alias()
        return f"{table} {alias}", self.refs_of(table, alias)

    def _derived(self) -> tuple[str, list[tuple[str, Kind]]]:
        """A derived table: an aggregate by k, a window over f, or a filter."""
        alias = self.alias()
        scope = self.refs_of("f", alias)
        form = self.pick(("aggregate", 2), ("window", 2), ("filter", 1))
        if form == "aggregate":
            key = self.rng.choice([f"{alias}.k", f"{alias}.g", f"{alias}.day"])
            kind = {"k": "int", "g": "string", "day": "date"}[key.split(".")[1]]
            total = self.expr(scope, "decimal", 1)
            return (
                f"SELECT {key} AS k0, count(*) AS n0, sum({total}) AS s0 FROM f {alias} "
                f"GROUP BY {key}",
                [("k0", kind), ("n0", "bigint"), ("s0", "decimal")],
            )
        if form == "window":
            partition = self.rng.choice([f"{alias}.k", f"{alias}.g", None])
            over = self._over(scope, partition, ordered=True)
            return (
                f"SELECT {alias}.k AS k0, {alias}.g AS g0, {alias}.amt AS a0, "
                f"row_number() OVER ({over}) AS rn FROM f {alias}",
                [("k0", "int"), ("g0", "string"), ("a0", "decimal"), ("rn", "int")],
            )
        where = self.pred(scope, 1)
        return (
            f"SELECT {alias}.k AS k0, {alias}.g AS g0, {alias}.amt AS a0, {alias}.day AS d0 "
            f"FROM f {alias} WHERE {where}",
            [("k0", "int"), ("g0", "string"), ("a0", "decimal"), ("d0", "date")],
        )

    def _join_condition(self, left: list[Ref], right: list[Ref]) -> str:
        keys = [(a, b) for a in left for b in right if a.name in ("k", "k0", "key") and
                b.name == "k"]  # fmt: skip
        pairs = [(a, b) for a in left for b in right if a.kind == b.kind and a.name == b.name]
        pairs = pairs or [(a, b) for a in left for b in right if a.kind == b.kind]
        if keys and self.chance(0.75):  # most joins are on the key all tables share
            pairs = keys
        if not pairs:
            return "true"
        a, b = self.rng.choice(pairs)
        op = "=" if self.chance(0.9) else self.rng.choice(["<=>", "<"])
        on = f"{a.sql} {op} {b.sql}"
        if self.chance(0.3):
            on += f" AND {self.pred(right, 0, False)}"
        return on

    # -- shapes ----------------------------------------------------------------------------
    def _projections(self, scope: list[Ref], count: int) -> list[tuple[str, Kind]]:
        made = []
        for _ in range(count):
            kind = self.rng.choice([r.kind for r in scope])
            made.append((self.expr(scope, kind, self.rng.randint(0, 2)), kind))
        return made

    def _select(self, items: list[tuple[str, Kind]]) -> str:
        return ", ".join(f"{sql} AS c{i}" for i, (sql, _) in enumerate(items))

    def _where(self, scope: list[Ref], extra: list[str], p: float = 0.6) -> str:
        conjuncts = list(extra)
        if self.chance(p):
            conjuncts.append(self.pred(scope))
        return f" WHERE {' AND '.join(conjuncts)}" if conjuncts else ""

    def _rows(self) -> str:
        sql, scope, extra = self.from_clause()
        items = self._projections(scope, self.rng.randint(1, 4))
        if self.chance(0.15):  # a correlated scalar subquery
            items.append((self._scalar_subquery(scope), "bigint"))
        return f"SELECT {self._select(items)} FROM {sql}{self._where(scope, extra)}"

    def _scalar_subquery(self, scope: list[Ref]) -> str:
        outer = self.col(scope, "int") or "1"
        alias = self.alias("s")
        return f"(SELECT max({alias}.v) FROM e {alias} WHERE {alias}.k = {outer})"

    def _aggregate_items(self, scope: list[Ref]) -> list[tuple[str, Kind]]:
        items: list[tuple[str, Kind]] = []
        for _ in range(self.rng.randint(1, 4)):
            fn = self.pick(("count_star", 2), ("count", 1), ("sum", 4), ("avg", 3), ("min", 2),
                           ("max", 2), ("count_distinct", 1), ("stddev", 1), ("var_pop", 1),
                           ("bool", 1), ("count_if", 1), ("sum_distinct", 1),
                           ("percentile", 1))  # fmt: skip
            if fn == "count_star":
                items.append(("count(*)", "bigint"))
            elif fn == "count":
                items.append((f"count({self.expr(scope, self._kind(scope), 1)})", "bigint"))
            elif fn in ("sum", "avg", "sum_distinct"):
                kind = self.rng.choice(["decimal", "decimal", "int", "bigint", "double"])
                body = self.expr(scope, kind, 2)
                if fn == "sum_distinct":
                    items.append((f"sum(DISTINCT {body})", "decimal"))
                else:
                    items.append((f"{fn}({body})", "decimal" if kind == "decimal" else "double"))
            elif fn in ("min", "max"):
                kind = self.rng.choice(ORDERABLE)
                items.append((f"{fn}({self.expr(scope, kind, 1)})", kind))
            elif fn == "count_distinct":
                items.append((f"count(DISTINCT {self.expr(scope, self._kind(scope), 1)})",
                              "bigint"))  # fmt: skip
            elif fn in ("stddev", "var_pop"):
                items.append((f"{fn}({self.expr(scope, 'double', 1)})", "double"))
            elif fn == "percentile":
                body = self.expr(scope, self.rng.choice(["double", "decimal", "int"]), 1)
                items.append((self.rng.choice([
                    f"median({body})",
                    f"percentile({body}, 0.25)",
                    f"percentile_cont(0.9) WITHIN GROUP (ORDER BY {body})",
                    f"CAST(percentile_disc(0.5) WITHIN GROUP (ORDER BY {body} DESC) AS DOUBLE)",
                ]), "double"))  # fmt: skip
            elif fn == "bool":
                items.append((f"bool_and({self.pred(scope, 0, False)})", "bool"))
            else:
                items.append((f"count_if({self.pred(scope, 0, False)})", "bigint"))
        return items

    def _kind(self, scope: list[Ref]) -> Kind:
        return self.rng.choice([r.kind for r in scope])

    def _aggregate(self) -> str:
        sql, scope, extra = self.from_clause()
        keys = []
        for kind in self.rng.sample(GROUPABLE, self.rng.randint(0, 2)):
            key = self.expr(scope, kind, self.rng.randint(0, 1))
            if "." not in key:  # a constant would be a GROUP BY ordinal
                key = self.col(scope, kind) or scope[0].sql
            keys.append((key, kind))
        aggregates = self._aggregate_items(scope)
        shown = keys if self.chance(0.95) else keys[1:]
        group = f" GROUP BY {', '.join(k for k, _ in keys)}" if keys else ""
        if keys and self.chance(0.15):  # grouping sets: rolled-up keys NULL, told apart
            shown = [*keys, ("grouping_id()", "bigint")]
            listed = ", ".join(k for k, _ in keys)
            sets = self.pick(("ROLLUP", 2), ("CUBE", 2), ("GROUPING SETS", 1))
            if sets == "GROUPING SETS":
                listed = f"({listed}), ({keys[-1][0]}), ()"
            group = f" GROUP BY {sets}({listed})"
        elif keys and self.chance(0.1):  # ANY_VALUE of what the group decides
            aggregates.append((f"any_value({keys[0][0]})", keys[0][1]))
        having = ""
        if keys and self.chance(0.15):
            having = f" HAVING count(*) > {self.rng.randint(0, 2)}"
        select = self._select([*shown, *aggregates])
        return f"SELECT {select} FROM {sql}{self._where(scope, extra)}{group}{having}"

    def _over(self, scope: list[Ref], partition: str | None, ordered: bool) -> str:
        parts = []
        if partition is not None:
            parts.append(f"PARTITION BY {partition}")
        if ordered:
            parts.append("ORDER BY " + ", ".join(r.sql for r in scope))
        return " ".join(parts)

    def _window(self) -> str:
        sql, scope, extra = self.from_clause(max_sources=2)
        items = self._projections(scope, self.rng.randint(1, 3))
        keys = [r.sql for r in scope if r.name in ("k", "k0", "key")]
        for _ in range(self.rng.randint(1, 2)):
            partition = None
            if keys and self.chance(0.6):
                partition = self.rng.choice(keys)
            elif self.chance(0.7):
                partition = self.rng.choice([r.sql for r in scope if r.kind in GROUPABLE])
            fn = self.pick(("row_number", 3), ("rank", 2), ("dense_rank", 1), ("lag", 2),
                           ("lead", 1), ("running", 2), ("partition", 3), ("ntile", 1),
                           ("frame", 2))  # fmt: skip
            if fn in ("row_number", "rank", "dense_rank"):
                items.append((f"{fn}() OVER ({self._over(scope, partition, True)})", "int"))
            elif fn == "ntile":
                ranked = self.rng.choice(["ntile(2)", "percent_rank()", "cume_dist()"])
                kind = "int" if ranked.startswith("ntile") else "double"
                items.append((f"{ranked} OVER ({self._over(scope, partition, True)})", kind))
            elif fn == "frame":  # ties are whole rows alike: the same values either way
                kind = self.rng.choice(["decimal", "int"])
                body = self.expr(scope, kind, 1)
                agg = self.rng.choice(["sum", "max", "first_value", "last_value", "count"])
                frame = self.rng.choice([
                    "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING",
                    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
                    "ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
                ])  # fmt: skip
                over = f"{self._over(scope, partition, True)} {frame}"
                out_kind = "bigint" if agg == "count" else kind
                items.append((f"{agg}({body}) OVER ({over})", out_kind))
            elif fn in ("lag", "lead"):
                kind = self._kind(scope)
                body = self.expr(scope, kind, 1)
                items.append((f"{fn}({body}) OVER ({self._over(scope, partition, True)})", kind))
            else:
                agg = self.rng.choice(["sum", "count", "min", "max", "avg"])
                kind = "decimal" if agg != "count" else "int"
                body = self.expr(scope, kind, 1)
                over = self._over(scope, partition, fn == "running")
                out_kind = "bigint" if agg == "count" else "decimal"
                items.append((f"{agg}({body}) OVER ({over})", out_kind))
        inner = f"SELECT {self._select(items)} FROM {sql}{self._where(scope, extra, 0.4)}"
        if not self.chance(0.5):
            return inner
        q = self.alias("w")
        outer = [Ref(f"{q}.c{i}", kind, f"c{i}") for i, (_, kind) in enumerate(items)]
        if self.chance(0.5):  # an equality above the window
            kinds = [k for k in {r.kind for r in outer} if sum(r.kind == k for r in outer) > 1]
            if kinds:
                a, b = self.rng.sample([r for r in outer if r.kind == kinds[0]], 2)
                return f"SELECT * FROM ({inner}) {q} WHERE {a.sql} = {b.sql}"
        return f"SELECT * FROM ({inner}) {q} WHERE {self.pred(outer, 1, False)}"

    def _setop(self) -> str:
        kinds = [self.rng.choice(("int", "string", "date", "decimal")) for _ in range(
            self.rng.randint(1, 2))]  # fmt: skip
        sides = []
        for _ in range(2):
            table = self.rng.choice(list(TABLES))
            alias = self.alias()
            scope = self.refs_of(table, alias)
            items = [(self.expr(scope, kind, 1), kind) for kind in kinds]
            sides.append(f"SELECT {self._select(items)} FROM {table} {alias}"
                         f"{self._where(scope, [], 0.5)}")  # fmt: skip
        op = self.pick(("UNION ALL", 3), ("UNION", 2), ("INTERSECT", 1), ("EXCEPT", 1))
        return f"{sides[0]} {op} {sides[1]}"

    def _cte(self) -> str:
        body = self.pick(("rows", 1), ("aggregate", 1), ("window", 1))
        alias = self.alias()
        scope = self.refs_of("f", alias)
        if body == "aggregate":
            key = self.rng.choice(["k", "g"])
            total = self.expr(scope, "decimal", 1)
            cte = (
                f"SELECT {alias}.{key} AS key, count(*) AS n, sum({total}) AS s, "
                f"max({alias}.ts) AS latest FROM f {alias}{self._where(scope, [], 0.5)} "
                f"GROUP BY {alias}.{key}"
            )
            columns = [("key", "int" if key == "k" else "string"), ("n", "bigint"),
                       ("s", "decimal"), ("latest", "timestamp")]  # fmt: skip
        elif body == "window":
            over = self._over(scope, f"{alias}.k", True)
            cte = (
                f"SELECT {alias}.k AS key, {alias}.amt AS s, {alias}.day AS day, "
                f"row_number() OVER ({over}) AS rn FROM f {alias}"
            )
            columns = [("key", "int"), ("s", "decimal"), ("day", "date"), ("rn", "int")]
        else:
            cte = (
                f"SELECT {alias}.k AS key, {alias}.amt * {alias}.rate AS s, {alias}.day AS day "
                f"FROM f {alias}{self._where(scope, [], 0.7)}"
            )
            columns = [("key", "int"), ("s", "decimal"), ("day", "date")]
        c = self.alias("c")
        scope = [Ref(f"{c}.{n}", k, n) for n, k in columns]
        sql = f"cte {c}"
        if self.chance(0.5) and columns[0][1] == "int":
            join = self.rng.choice(["JOIN", "LEFT JOIN"])
            d = self.alias()
            sql += f" {join} d {d} ON {c}.key = {d}.k"
            scope += self.refs_of("d", d)
        if self.chance(0.4):
            aggregates = self._aggregate_items(scope)
            key = scope[0].sql
            return (
                f"WITH cte AS ({cte}) SELECT {key} AS g0, {self._select(aggregates)} FROM {sql}"
                f"{self._where(scope, [], 0.4)} GROUP BY {key}"
            )
        items = self._projections(scope, self.rng.randint(1, 3))
        return f"WITH cte AS ({cte}) SELECT {self._select(items)} FROM {sql}" + self._where(
            scope, [], 0.5
        )

    def _chain(self) -> str:
        """The dbt "enriched fact": f LEFT JOINed to d and e, each join on another column
        (k, g or day, a dimension's column or the fact's), as rows or aggregated by a
        dimension's column; or a window partitioned by a dimension's column."""
        fact = self.alias()
        scope = self.refs_of("f", fact)
        sql = f"f {fact}"
        dims: list[Ref] = []
        form = self.pick(("rows", 1), ("aggregate", 2), ("window", 1))
        for table in self.rng.sample(["d", "e"], self.rng.randint(1, 2)):
            alias = self.alias()
            right = self.refs_of(table, alias)
            pairs = [
                (a, b)
                for a in scope
                for b in right
                if a.name == b.name and a.kind == b.kind and a.name in ("k", "g", "day")
            ]
            a, b = self.rng.choice(pairs)
            on = f"{a.sql} = {b.sql}"
            if self.chance(0.2):
                on += f" AND {self.pred(right, 0, False)}"
            # A window by a padded side's column puts every unmatched row in one partition.
            join = "LEFT JOIN" if form != "window" and self.chance(0.8) else "JOIN"
            sql += f" {join} {table} {alias} ON {on}"
            scope, dims = scope + right, dims + [r for r in right if r.kind in GROUPABLE]
        where = self._where(scope, [], 0.3)
        if form == "aggregate":
            key = self.rng.choice(dims)
            items = [(key.sql, key.kind), *self._aggregate_items(scope)]
            return f"SELECT {self._select(items)} FROM {sql}{where} GROUP BY {key.sql}"
        items = self._projections(scope, self.rng.randint(1, 3))
        if form == "window":
            partition = self.rng.choice(dims).sql
            fn = self.rng.choice(["rank()", "row_number()", "count(*)"])
            items.append((f"{fn} OVER ({self._over(scope, partition, True)})", "int"))
        return f"SELECT {self._select(items)} FROM {sql}{where}"

    def _distinct(self) -> str:
        sql, scope, extra = self.from_clause(max_sources=2)
        items = self._projections(scope, self.rng.randint(1, 3))
        return f"SELECT DISTINCT {self._select(items)} FROM {sql}{self._where(scope, extra)}"

    def _top_n(self) -> str:
        alias = self.alias()
        scope = self.refs_of("f", alias)
        items = self._projections(scope, self.rng.randint(1, 3))
        order = ", ".join(f"c{i}" for i in range(len(items)))
        return (
            f"SELECT {self._select(items)} FROM f {alias}{self._where(scope, [], 0.5)} "
            f"ORDER BY {order} LIMIT {self.rng.randint(1, 4)}"
        )


def _column_of(rng: random.Random, kind: Kind) -> Column:
    """A schema column of this kind, for a literal drawn from its values."""
    columns = [c for t in TABLES.values() for c in t.columns if c.kind == kind and c.name != "id"]
    return rng.choice(columns)


def generate(seed: int) -> str:
    return ViewGen(random.Random(seed)).view()
