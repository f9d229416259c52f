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
day here). Nothing is downloaded: the extensions the wheel carries (ICU for time zones)
are all it uses, and autoloading is off. The rows are what icemv read with pyiceberg
(deletes applied by icemv); every tree passes the portability gate (sql/portable/) first,
and a refusal or a DuckDB error sends the refresh to Spark (`EngineRefusedError`, with the
reason). DuckDB releases the GIL while it runs, so refreshes on the driver overlap.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Hashable

import duckdb
import pyarrow as pa

from icemv.catalog.arrow_schemas import arrow_schema
from icemv.errors import EngineRefusedError
from icemv.refresh.embedded.reads import live_files
from icemv.refresh.patch.model import PatchTarget
from icemv.refresh.patch.row_images import files_admitting
from icemv.sql.memo import Memo
from icemv.sql.portable import Schema, Tree, to_duckdb
from icemv.sql.spark_types import of_arrow

NAME = "duckdb"

# `execute` binds a query once where `sql(...).to_arrow_table()` binds it twice (it first
# describes the relation): ~40 % of a merge tree's time in DuckDB. The extra copy of the
# rows this warns about is of a result the driver holds anyway (at most
# `driver_commit_max_rows`).
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", module=__name__)


# One in-memory database per settings, per process; each refresh a connection of its own.
_DATABASES: dict[tuple[int, str], duckdb.DuckDBPyConnection] = {}
_DATABASES_LOCK = threading.Lock()

# Connections set up and idle, per settings: an executor takes one and gives it back
# (setting one up runs three statements, ~0.8 ms here). At most _IDLE_MAX are kept per
# settings; more refreshes at once than that close theirs.
_IDLE: dict[tuple[int, str, str], list[duckdb.DuckDBPyConnection]] = {}
_IDLE_MAX = 16

# A statement run where its relations are the frame's variables (see the module): `eval`
# with them as its locals. No relation is named `connection` or `statement` (theirs all
# start `__icemv_`); the globals are an empty module scope (eval adds the builtins, which
# DuckDB's lookup imports through).
_EXECUTE = compile("connection.execute(statement).to_arrow_table()", "<icemv duckdb>", "eval")
_SCOPE: dict[str, object] = {}

# Parsed statements by their text, per process. DuckDB's parser takes 1.5-4.6 ms of a
# merge tree's 4-14 ms here, and a refresh runs the text its MV's last refresh ran (the
# gate keeps the text per tree, the executor names relations alike each time). A parsed
# statement is only read by `execute`, which plans a copy of it.
_statements: Memo[duckdb.Statement] = Memo(2048)


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


def _take(settings: tuple[int, str, str]) -> duckdb.DuckDBPyConnection:
    """An idle connection with these settings, or a new one."""
    with _DATABASES_LOCK:
        idle = _IDLE.get(settings)
        if idle:
            return idle.pop()
    return connect(*settings)


def _give_back(settings: tuple[int, str, str], connection: duckdb.DuckDBPyConnection) -> None:
    """`connection` idle again; closed if enough connections are idle."""
    with _DATABASES_LOCK:
        idle = _IDLE.setdefault(settings, [])
        if len(idle) < _IDLE_MAX:
            idle.append(connection)
            return
    connection.close()


def _parsed(connection: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    statement = _statements.get(sql)
    if statement is None:
        (statement,) = connection.extract_statements(sql)
        _statements.put(sql, statement)
    return statement


class DuckDBExecutor:
    """Registers Arrow tables and trees by name; runs trees; collects Arrow."""

    name = NAME

    def __init__(self, threads: int, memory_limit: str, time_zone: str) -> None:
        self._settings = (threads, memory_limit, time_zone)
        self.connection = _take(self._settings)
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
            portable = to_duckdb(query, self.schemas, key)
            try:
                statement = _parsed(self.connection, portable.sql)
                scope = {**self._rows, "connection": self.connection, "statement": statement}
                rows: pa.Table = eval(_EXECUTE, _SCOPE, scope)  # the constant above
                return rows
            except duckdb.Error as error:  # overflow and the like: Spark decides
                self._failed = True
                first = str(error).splitlines()[0][:200]
                raise EngineRefusedError(f"DuckDB: {first}") from None

    def drop(self) -> None:
        with self._lock:
            self._rows = {}
            self.schemas.clear()
        if self._failed:  # whatever the error left behind goes with the connection
            self.connection.close()
        else:
            _give_back(self._settings, self.connection)

    def _name(self, purpose: str) -> str:
        """A name no other relation of this refresh has: the same names in the same order
        on every refresh (a refresh's relations are its own), so the trees of an MV's
        refreshes are the same text and the gate's answer for them is kept."""
        count = self._named[purpose] = self._named.get(purpose, 0) + 1
        return f"__icemv_{purpose}_{count}"
