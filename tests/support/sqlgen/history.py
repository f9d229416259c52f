"""Random histories of the generated tables, as other writers make them: appends with NULLs
and duplicates, DELETE, UPDATE of keys and measures, MERGE, compaction and equality
deletes. A step is a Spark statement (`{t}` stands for the table's quoted name, `{ns}` and
`{name}` for its namespace and bare name) or an equality delete, so a history prints as a
reproducible test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.support.sqlgen.schema import TABLES, literal, rows, some_value, value, values_sql


@dataclass(frozen=True)
class Step:
    kind: str  # append, delete, update, merge, compact, eqdelete
    table: str
    sql: str = ""
    # An equality delete: the column and the values it deletes.
    column: str = ""
    values: tuple[Any, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        if self.kind == "eqdelete":
            return f"equality delete on {self.table}.{self.column} in {self.values!r}"
        return self.sql.replace("{t}", self.table)


def _predicate(rng: random.Random, table: str) -> str:
    spec = TABLES[table]
    column = rng.choice([c for c in spec.columns if c.kind in ("int", "string", "decimal", "date")])
    if rng.random() < 0.2:
        return f"{column.name} IS NULL"
    op = rng.choice(["=", "=", "<", ">="])
    return f"{column.name} {op} {literal(some_value(rng, column), column)}"


def _where(rng: random.Random, table: str) -> str:
    spec = TABLES[table]
    key = "id" if table == "f" else "k"
    column = spec.column(key)
    if rng.random() < 0.6:
        return f"{key} = {literal(some_value(rng, column), column)}"
    return _predicate(rng, table)


_UPDATES = {
    "f": ["k = k + 1", "amt = amt + 0.01", "g = 'c'", "x = x * 2", "rate = -rate",
          "day = date_add(day, 1)", "ts = ts + INTERVAL 1 HOUR", "k = NULL", "n = n + 1"],
    "d": ["flag = NOT flag", "w = w * 2", "k = k + 1", "name = upper(name)"],
    "e": ["v = v + 1", "q = q / 3", "g = NULL", "k = k - 1"],
}  # fmt: skip


def step(rng: random.Random) -> Step:
    table = rng.choice(["f", "f", "d", "e"])
    spec = TABLES[table]
    kind = rng.choices(
        ["append", "delete", "update", "merge", "compact", "eqdelete"], [5, 3, 3, 2, 1, 1]
    )[0]
    if kind == "append":
        made = rows(rng, spec, rng.randint(1, 4))
        return Step(kind, table, f"INSERT INTO {{t}} VALUES {values_sql(spec, made)}")
    if kind == "delete":
        return Step(kind, table, f"DELETE FROM {{t}} WHERE {_where(rng, table)}")
    if kind == "update":
        change = rng.choice(_UPDATES[table])
        return Step(kind, table, f"UPDATE {{t}} SET {change} WHERE {_where(rng, table)}")
    if kind == "compact":
        return Step(
            kind,
            table,
            "CALL `lake`.system.rewrite_data_files(table => '{ns}.{name}', "
            "options => map('rewrite-all', 'true'))",
        )
    if kind == "eqdelete":
        column = rng.choice(["k", "g"] if table in ("f", "e") else ["k"])
        picked = tuple({value(rng, spec.column(column)) for _ in range(rng.randint(1, 2))})
        return Step(kind, table, column=column, values=picked)
    key = "id" if table == "f" else "k"
    made = rows(rng, spec, rng.randint(1, 3))
    seen: dict[Any, tuple[Any, ...]] = {}
    position = [c.name for c in spec.columns].index(key)
    for r in made:  # one source row per key: MERGE forbids a target row matching two
        if r[position] is not None:
            seen.setdefault(r[position], r)
    if not seen:
        return Step("append", table, f"INSERT INTO {{t}} VALUES {values_sql(spec, made)}")
    names = ", ".join(c.name for c in spec.columns)
    sets = ", ".join(f"t.{c.name} = s.{c.name}" for c in spec.columns if c.name != key)
    gone = rng.choice([c.name for c in spec.columns if c.name != key])
    return Step(
        kind,
        table,
        f"MERGE INTO {{t}} t USING (SELECT * FROM VALUES {values_sql(spec, list(seen.values()))} "
        f"AS s({names})) s ON t.{key} = s.{key} WHEN MATCHED AND s.{gone} IS NULL THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {sets} WHEN NOT MATCHED THEN INSERT *",
    )


def history(rng: random.Random, length: int) -> list[Step]:
    return [step(rng) for _ in range(length)]


def initial_rows(rng: random.Random) -> dict[str, list[tuple[Any, ...]]]:
    sizes = {"f": 14, "d": 5, "e": 7}
    return {name: rows(rng, TABLES[name], size) for name, size in sizes.items()}
