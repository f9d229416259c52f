"""Statements prepared once per DuckDB connection, run again over each refresh's rows.

DuckDB plans a statement (binds it, optimizes it, builds its physical plan) before it runs
it, and over the few thousand rows of a small refresh the planning is most of the time. A
refresh runs the statements its MV's last refresh ran: the same text (the gate keeps it per
tree), the same relation names (executor.py names them alike each time), the same column
types. So each connection keeps its statements prepared (`PREPARE`), and a refresh runs
them (`EXECUTE`). Measured here on the statements of profile-refresh's seven shapes, thread
CPU, medians of 200 runs: a DECIMAL sum by day's merge 5.3 ms planned and run, 2.3 ms run
prepared; a filter 1.0 against 0.5 ms; a DOUBLE average's merge 6.2 against 2.2 ms.

What a prepared statement scans: each relation it names is bound (by DuckDB's replacement
scan, as any statement's: executor.py) to a `_Scan` of its own, an object of Arrow's stream
interface whose rows are set just before each run and dropped after it; DuckDB asks it for
a stream again on each run.

Why a run computes what the statement computes run afresh:

- The plan is a function of the text, the relations' Arrow schemas and the connection's
  settings (the same for the connection's life: executor.py; ICU's functions read the time
  zone when bound), never of the rows: DuckDB's Arrow scan gives the optimizer no column
  statistics and no row count (its estimate is a constant; `ArrowScanCardinality` in
  DuckDB's `function/table/arrow.cpp`), so nothing is pruned, folded or ordered for the
  rows a statement was prepared with.
- A statement is kept by its text and, per relation the text names, the relation's Arrow
  fields (names, types, nullability) and metadata (an extension type lives there; the
  field ids a Parquet reader attaches aside): a run whose relations differ in any of these
  prepares a statement of its own.
- A prepared run scans the objects it was bound to, and asks each for its stream again
  (DuckDB's Arrow scan produces its stream when each run starts). If DuckDB binds a
  prepared statement again (when the connection's catalog changed, which nothing here
  does, or for a function such as `now()`, which the gate refuses), it finds the same
  `_Scan`s, holding that run's rows, in the frame that runs it.

What it costs: a kept statement holds the operator states of its last run until it runs
again (`Budget`: the hash tables of a small aggregate's merge, 2-4.4 MB by DuckDB's count),
so the statements kept on a database's connections hold at most half its memory limit
(`refresh.duckdb_memory_limit`), as measured; past that a new statement runs unprepared.

`tests/unit/test_prepared.py` checks runs over other rows (more, fewer, none, NULLs where
there were none, values outside the first rows' range) against the statement run afresh.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import duckdb
import pyarrow as pa

# `execute` binds a query once where `sql(...).to_arrow_table()` binds it twice (it first
# describes the relation). The extra copy of the rows this warns about is of a result the
# driver holds anyway (at most `driver_commit_max_rows`). Raised in the frame that runs a
# statement, whose globals carry this module's name (below).
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", module=__name__)

# A kept statement's memory (see `Budget`) is measured when it is prepared and then every
# this many runs (a measure is a statement: ~0.1 ms).
MEASURE_EVERY = 16
# When the budget is spent, a kept statement not run for this long makes room for another
# (an MV dropped or redefined); one run since does not.
STALE_SECONDS = 600.0

# The statement run, where the relations it names are the frame's variables (executor.py).
# No relation is named `connection` or `statement` (theirs all start `__icemv_`); the
# globals are a module scope of this module's name only (eval adds the builtins, which
# DuckDB's lookup imports through).
_RUN = compile("connection.execute(statement).to_arrow_table()", "<icemv duckdb>", "eval")
_PREPARE = compile("connection.execute(statement)", "<icemv duckdb>", "eval")
_SCOPE: dict[str, object] = {"__name__": __name__}

# What the database's memory holds, by DuckDB's count (prepared on each connection).
_MEMORY = "__icemv_memory"
_MEMORY_SQL = "SELECT CAST(SUM(memory_usage_bytes) AS BIGINT) FROM duckdb_memory()"


class _Scan:
    """What a prepared statement scans under a relation's name: the rows of one run."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: pa.Table | None = None

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        if self.rows is None:
            raise RuntimeError("a prepared statement scanned a relation outside its run")
        return self.rows.__arrow_c_stream__(requested_schema)


@dataclass
class _Prepared:
    run: str  # `EXECUTE name`
    deallocate: str  # `DEALLOCATE name`
    scans: dict[str, _Scan] = field(default_factory=dict)
    held: int = 0  # DuckDB memory its last run left held, as last measured
    runs: int = 0
    last_run: float = 0.0


class Budget:
    """The DuckDB memory that statements kept prepared may hold, over the connections of one
    database (a process's: executor.py).

    A prepared statement keeps the operator states of its last run (the hash tables of an
    aggregate or a join: 2-4.4 MB by DuckDB's count for the merge statement of a small
    aggregate here, nothing for a filter) until it runs again or is deallocated, and they
    count against the database's memory limit. A connection keeps a statement while the
    measured total is within the budget; past it, a statement not run for `STALE_SECONDS`
    makes room, and otherwise a new statement runs unprepared (planned each time)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        with self._lock:
            return self._held

    def add(self, change: int) -> None:
        with self._lock:
            self._held += change

    def spent(self) -> bool:
        with self._lock:
            return self._held >= self.limit_bytes


class PreparedStatements:
    """A connection and the statements prepared on it; one user at a time."""

    def __init__(
        self,
        connection: duckdb.DuckDBPyConnection,
        budget: Budget,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connection = connection
        self._budget = budget
        self._clock = clock
        self._statements: OrderedDict[Hashable, _Prepared] = OrderedDict()
        self._count = 0
        connection.execute(f"PREPARE {_MEMORY} AS {_MEMORY_SQL}")

    def __len__(self) -> int:
        return len(self._statements)

    def run(self, sql: str, relations: Mapping[str, pa.Table]) -> pa.Table:
        """`sql` run over `relations` (by name), prepared first if not kept and the budget
        allows; its rows. Raises duckdb.Error as running `sql` would."""
        # the relations the text may name (one whose name is part of another's: both)
        named = {name: rows for name, rows in relations.items() if name in sql}
        key = (sql, tuple((name, _signature(rows)) for name, rows in named.items()))
        prepared = self._statements.get(key)
        if prepared is None:
            if not self._room():
                scope = {**named, "connection": self.connection, "statement": sql}
                unprepared: pa.Table = eval(_RUN, _SCOPE, scope)  # the constant above
                return unprepared
            prepared = self._prepare(key, sql, named)
        else:
            self._statements.move_to_end(key)
        measured = prepared.runs % MEASURE_EVERY == 0
        before = self._memory() if measured else 0
        rows: pa.Table = self._over(prepared, named, _RUN, prepared.run)
        prepared.runs += 1
        prepared.last_run = self._clock()
        if measured:  # its last run's states replaced by this run's
            held = max(0, prepared.held + self._memory() - before)
            self._budget.add(held - prepared.held)
            prepared.held = held
        return rows

    def close(self) -> None:
        """Close the connection; what its statements held is freed."""
        self._budget.add(-sum(p.held for p in self._statements.values()))
        self._statements.clear()
        self.connection.close()

    def _room(self) -> bool:
        """Whether the budget has room for another statement, once statements of this
        connection not run for `STALE_SECONDS` are deallocated (the least recent first)."""
        stale_before = self._clock() - STALE_SECONDS
        while self._budget.spent():
            oldest = next(iter(self._statements.items()), None)
            if oldest is None or oldest[1].last_run > stale_before:
                return False
            del self._statements[oldest[0]]
            self.connection.execute(oldest[1].deallocate)
            self._budget.add(-oldest[1].held)
        return True

    def _memory(self) -> int:
        found = self.connection.execute(f"EXECUTE {_MEMORY}").fetchone()
        return int(found[0] or 0) if found is not None else 0

    def _prepare(self, key: Hashable, sql: str, named: Mapping[str, pa.Table]) -> _Prepared:
        self._count += 1
        name = f"__icemv_prepared_{self._count}"
        prepared = _Prepared(f"EXECUTE {name}", f"DEALLOCATE {name}")
        prepared.scans = {relation: _Scan() for relation in named}
        self._over(prepared, named, _PREPARE, f"PREPARE {name} AS {sql}")  # bound by schemas
        self._statements[key] = prepared
        return prepared

    def _over(
        self, prepared: _Prepared, named: Mapping[str, pa.Table], code: CodeType, statement: str
    ) -> Any:
        """`code` evaluated with `prepared`'s scans holding `named`'s rows, and none after."""
        for relation, scan in prepared.scans.items():
            scan.rows = named[relation]
        try:
            scope = {**prepared.scans, "connection": self.connection, "statement": statement}
            return eval(code, _SCOPE, scope)  # one of the constants above
        finally:
            for scan in prepared.scans.values():
                scan.rows = None


def _signature(rows: pa.Table) -> Hashable:
    """What of a relation a plan depends on (see the module): its schema, with its fields'
    and its own metadata but for the field ids Parquet readers attach, which DuckDB does
    not read (rows read from a data file carry them, the same rows read as a change may
    not: a rehearsal's sampled rows must find the statement the refresh runs)."""
    schema = rows.schema
    fields = tuple((f.name, f.type, f.nullable, _items(f.metadata)) for f in schema)
    return fields, _items(schema.metadata)


# Field metadata no plan depends on.
_IGNORED = frozenset({b"PARQUET:field_id"})


def _items(metadata: Mapping[bytes, bytes] | None) -> tuple[tuple[bytes, bytes], ...]:
    if not metadata:
        return ()
    return tuple(sorted((k, v) for k, v in metadata.items() if k not in _IGNORED))
