"""The embedded executor: the delta and merge trees run by DuckDB over Arrow tables.

One in-process connection per refresh at a time (to a database per process whose threads
and memory are capped: `refresh.duckdb_threads`, `refresh.duckdb_memory_limit`; given back
for the next refresh with its relations unregistered), its time zone Spark's session
zone, and division by zero NULL as in Spark. Nothing is downloaded:
the extensions the wheel carries (ICU for time zones) are all it uses, and autoloading is
off. The rows are what icemv read with pyiceberg (deletes applied by icemv); every tree
passes the portability gate (sql/portable/) first, and a refusal or a DuckDB error
sends the refresh to Spark (`EngineRefusedError`, with the reason). DuckDB releases the
GIL while it runs, so refreshes on the driver overlap.
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

# Connections set up and idle, per settings: an executor takes one and gives it back with
# its relations unregistered (setting one up runs three statements, ~0.8 ms here), but
# for the shared rows it registered (`add_rows(shared=True)`), kept by name with their
# rows. At most _IDLE_MAX are kept per settings; more refreshes at once than that close
# theirs.
_IDLE: dict[tuple[int, str, str], list[tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]]]] = {}
_IDLE_MAX = 16
# Shared rows an idle connection keeps registered, at most (the rows are the shared
# cache's, but one the cache has let go stays alive while a connection keeps it).
_KEEP_BYTES = 16 * 2**20

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
                }
            )
            _DATABASES[threads, memory_limit] = database
        connection = database.cursor()
    connection.execute("SET TimeZone = ?", [time_zone])
    connection.execute("SET error_on_division_by_zero = false")
    connection.execute("SET ieee_floating_point_ops = false")
    return connection


def _take(settings: tuple[int, str, str]) -> tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]]:
    """An idle connection with these settings and the shared rows it still has
    registered, or a new one."""
    with _DATABASES_LOCK:
        idle = _IDLE.get(settings)
        if idle:
            return idle.pop()
    return connect(*settings), {}


def _give_back(
    settings: tuple[int, str, str],
    connection: duckdb.DuckDBPyConnection,
    names: list[str],
    shared: dict[str, pa.Table],
) -> None:
    """`connection` idle again once `names` are unregistered, still holding `shared`;
    closed if that fails or enough connections are idle."""
    try:
        for name in names:
            connection.unregister(name)
    except duckdb.Error:
        connection.close()
        return
    with _DATABASES_LOCK:
        idle = _IDLE.setdefault(settings, [])
        if len(idle) < _IDLE_MAX:
            idle.append((connection, shared))
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
        self.connection, self._shared = _take(self._settings)
        self.schemas: dict[str, Schema] = {}
        self._rows: dict[str, pa.Table] = {}  # what each relation holds
        self._failed = False  # a statement raised: the connection is closed, not given back
        self._named: dict[str, int] = {}  # relations named so far, per purpose
        # One call at a time on the connection (files read in parallel filter through it).
        self._lock = threading.Lock()

    def add_rows(self, purpose: str, rows: pa.Table, shared: bool = False) -> str:
        """Arrow rows as a relation the trees may name; its name.

        `shared`: rows other refreshes register too, the same object (the change rows of
        a commit every MV on its table reads, from the shared cache): the relation stays
        registered on this connection when the refresh gives it back, and a later
        refresh that names the same rows under the same name finds them registered (a
        registration and its removal cost ~0.5 ms). A relation is the rows object it was
        registered with, so the same object under the same name is the same relation.
        """
        with self._lock:
            name = self._name(purpose)
            if self._shared.get(name) is not rows:
                self.connection.register(name, rows)
                if shared:
                    self._shared[name] = rows
                else:
                    self._shared.pop(name, None)
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
            self.connection.unregister(name)
            self.schemas.pop(name, None)
            self._rows.pop(name, None)
            self._shared.pop(name, None)

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
                return self.connection.execute(statement).to_arrow_table()
            except duckdb.Error as error:  # overflow and the like: Spark decides
                self._failed = True
                first = str(error).splitlines()[0][:200]
                raise EngineRefusedError(f"DuckDB: {first}") from None

    def drop(self) -> None:
        with self._lock:
            shared: dict[str, pa.Table] = {}
            size = 0
            for name, kept in self._shared.items():
                nbytes = kept.nbytes
                if self._rows.get(name) is kept and size + nbytes <= _KEEP_BYTES:
                    shared[name] = kept
                    size += nbytes
            names = [n for n in self._rows if n not in shared]
            # kept from an earlier refresh and not named by this one
            stale = [n for n in self._shared if n not in shared and n not in self._rows]
            self._rows = {}
            self.schemas.clear()
        if self._failed:  # whatever the error left behind goes with the connection
            self.connection.close()
        else:
            _give_back(self._settings, self.connection, names + stale, shared)

    def _name(self, purpose: str) -> str:
        """A name no relation of this connection has: the same names in the same order on
        every refresh (a connection's relations are its own), so the trees of an MV's
        refreshes are the same text and the gate's answer for them is kept."""
        count = self._named[purpose] = self._named.get(purpose, 0) + 1
        return f"__icemv_{purpose}_{count}"
