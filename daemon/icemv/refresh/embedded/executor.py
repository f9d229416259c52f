"""The embedded executor: the delta and merge trees run by DuckDB over Arrow tables.

One in-process connection per refresh at a time (to a database per process whose threads
and memory are capped: `refresh.duckdb_threads`, `refresh.duckdb_memory_limit`; given back
for the next refresh), its time zone Spark's session zone, and division by zero NULL as in
Spark. A statement finds its relations by name among the Arrow tables it is run with
(DuckDB's replacement scans: a table name no catalog entry has is looked up among the
variables of the Python frame that runs the statement), so nothing is registered on the
connection: registering a table is a change to the connection's catalog, and a DECIMAL
merge statement over two relations took 5.3 ms with them registered and removed again,
3.8 ms with them found as variables (thread CPU, medians of 300 runs in turn, on a slow
day here). A connection keeps the statements it ran prepared, and runs them again over the
next refresh's rows without planning them again (refresh/embedded/prepared.py). Nothing
is downloaded: the extensions the wheel carries (ICU for time zones)
are all it uses, and autoloading is off. The rows are what icemv read with pyiceberg
(deletes applied by icemv); every tree passes the portability gate (sql/portable/) first,
and a refusal or a DuckDB error sends the refresh to Spark (`EngineRefusedError`, with the
reason). DuckDB releases the GIL while it runs, so refreshes on the driver overlap.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Hashable

import duckdb
import pyarrow as pa

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.errors import EngineRefusedError
from icemv.refresh.embedded.prepared import Budget, PreparedStatements
from icemv.refresh.embedded.reads import live_files
from icemv.refresh.patch.model import PatchTarget
from icemv.refresh.patch.row_images import files_admitting
from icemv.sql.portable import UTC_ZONES, Schema, Tree, to_duckdb
from icemv.sql.spark_types import of_arrow

NAME = "duckdb"

# One in-memory database per settings, per process; each refresh a connection of its own.
_DATABASES: dict[tuple[int, str], duckdb.DuckDBPyConnection] = {}
# What the statements kept prepared on each database's connections may hold: half its
# memory limit (refresh/embedded/prepared.py).
_BUDGETS: dict[tuple[int, str], Budget] = {}
_DATABASES_LOCK = threading.Lock()

# Connections set up and idle, per settings: an executor takes one and gives it back
# (setting one up runs four statements, ~0.8 ms here). At most _IDLE_MAX are kept per
# settings; more refreshes at once than that close theirs.
_IDLE: dict[tuple[int, str, str], list[PreparedStatements]] = {}
_IDLE_MAX = 16

# DuckDB's optimizer passes left out. Common subexpression elimination computes an
# expression a statement repeats once per row, in a projection of its own: it took 15 %
# of the DuckDB time of a fleet's small refreshes (binding, optimizing and running the 14
# statements of 7 MVs: 37.0 ms with it, 31.3 without, medians here), and it saves nothing
# on the few thousand rows those statements see. It rewrites the plan, not what it
# computes: the 48 statements of profile-refresh gave the same rows either way.
_DISABLED_OPTIMIZERS = "common_subexpressions"


def connect(threads: int, memory_limit: str, time_zone: str) -> duckdb.DuckDBPyConnection:
    """A connection computing as Spark's session does (see the module): a cursor of the
    process's database with these limits (opening a database costs ~30 ms, a cursor
    nearly nothing), whose relations no other connection sees."""
    with _DATABASES_LOCK:
        database = _DATABASES.get((threads, memory_limit))
        if database is None:
            database = duckdb.connect(
                config={
                    "threads": threads,
                    "memory_limit": memory_limit,
                    "autoinstall_known_extensions": False,
                    "autoload_known_extensions": False,
                    "disabled_optimizers": _DISABLED_OPTIMIZERS,
                    "python_enable_replacements": True,  # how statements find relations
                    "python_scan_all_frames": False,  # only in the frame that runs them
                }
            )
            _DATABASES[threads, memory_limit] = database
        connection = database.cursor()
    connection.execute("SET TimeZone = ?", [time_zone])
    connection.execute("SET error_on_division_by_zero = false")
    connection.execute("SET ieee_floating_point_ops = false")
    return connection


def memory_bytes(limit: str) -> int:
    """A memory limit as DuckDB reads it (`refresh.duckdb_memory_limit`: `512MB` is
    512,000,000 bytes, `2GiB` 2**31), in bytes."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT])(i?)B", limit.strip())
    if found is None:
        raise ValueError(f"not a memory limit: {limit!r}")
    number, unit, binary = found.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** ("KMGT".index(unit) + 1))


def _take(settings: tuple[int, str, str]) -> PreparedStatements:
    """An idle connection with these settings (its statements prepared), or a new one."""
    threads, memory_limit, _ = settings
    with _DATABASES_LOCK:
        idle = _IDLE.get(settings)
        if idle:
            return idle.pop()
        budget = _BUDGETS.get((threads, memory_limit))
        if budget is None:
            budget = Budget(memory_bytes(memory_limit) // 2)
            _BUDGETS[threads, memory_limit] = budget
    return PreparedStatements(connect(*settings), budget)


def _give_back(settings: tuple[int, str, str], prepared: PreparedStatements) -> None:
    """A connection idle again; closed if enough connections are idle."""
    with _DATABASES_LOCK:
        idle = _IDLE.setdefault(settings, [])
        if len(idle) < _IDLE_MAX:
            idle.append(prepared)
            return
    prepared.close()


class DuckDBExecutor:
    """Registers Arrow tables and trees by name; runs trees; collects Arrow."""

    name = NAME

    def __init__(self, threads: int, memory_limit: str, time_zone: str) -> None:
        self._settings = (threads, memory_limit, time_zone)
        self._utc = time_zone in UTC_ZONES  # what the gate may render (see Gate.utc)
        self._prepared = _take(self._settings)
        self.connection = self._prepared.connection
        self.schemas: dict[str, Schema] = {}
        self._rows: dict[str, pa.Table] = {}  # what each relation holds
        self._failed = False  # a statement raised: the connection is closed, not given back
        self._named: dict[str, int] = {}  # relations named so far, per purpose
        # One call at a time on the connection (files read in parallel filter through it).
        self._lock = threading.Lock()

    def add_rows(self, purpose: str, rows: pa.Table) -> str:
        """Arrow rows as a relation the trees may name; its name."""
        with self._lock:
            name = self._name(purpose)
            self.schemas[name] = {f.name: of_arrow(f.type) for f in rows.schema}
            self._rows[name] = rows
        return name

    def register(
        self, purpose: str, query: Tree, cache: bool = False, key: Hashable | None = None
    ) -> str:
        """`query`'s rows, computed now, as a relation; its name (`cache`: always)."""
        return self.add_rows(purpose, self._run(query, key))

    def collect(self, query: Tree, max_rows: int, key: Hashable | None = None) -> pa.Table | None:
        rows = self._run(query, key)
        return None if rows.num_rows > max_rows else rows

    def rows(self, name: str) -> pa.Table:
        with self._lock:
            return self._rows[name]

    def forget(self, name: str) -> None:
        with self._lock:
            self.schemas.pop(name, None)
            self._rows.pop(name, None)

    def stored(
        self, target: PatchTarget, keys: str | None, key_columns: list[tuple[str, str]]
    ) -> PatchTarget:
        """The storage files whose bounds admit the touched keys (every file: `keys`
        None), their rows held."""
        probe = pa.table({}) if keys is None else self.rows(keys)
        probe = probe.select([k for _, k in key_columns])
        probe = probe.rename_columns([s for s, _ in key_columns])
        files = files_admitting(target.table, target.snapshot_id, probe, target.driver_max_rows)
        if files is None:
            raise EngineRefusedError("the storage files of the touched groups are too large")
        empty = arrow_schema(target.table.schema()).empty_table()
        rows = pa.concat_tables([rows for _, rows in files]) if files else empty
        return target.holding(self.add_rows("stored", rows), tuple(f for f, _ in files))

    def reads_whole(self, target: PatchTarget) -> bool:
        files = live_files(target.table, target.snapshot_id)
        return files is not None and len(files) <= 1  # as files_admitting reads them

    def _run(self, query: Tree, key: Hashable | None) -> pa.Table:
        with self._lock:
            portable = to_duckdb(query, self.schemas, key, self._utc)
            try:
                return self._prepared.run(portable.sql, self._rows)
            except duckdb.Error as error:  # overflow and the like: Spark decides
                self._failed = True
                first = str(error).splitlines()[0][:200]
                raise EngineRefusedError(f"DuckDB: {first}") from None

    def drop(self) -> None:
        with self._lock:
            self._rows = {}
            self.schemas.clear()
        if self._failed:  # whatever the error left behind goes with the connection
            self._prepared.close()
        else:
            _give_back(self._settings, self._prepared)

    def _name(self, purpose: str) -> str:
        """A name no other relation of this refresh has: the same names in the same order
        on every refresh (a refresh's relations are its own), so the trees of an MV's
        refreshes are the same text and the gate's answer for them is kept."""
        count = self._named[purpose] = self._named.get(purpose, 0) + 1
        return f"__icemv_{purpose}_{count}"
