"""Every function of the gate's table (sql/functions/table.py), proven equal to Spark 3.5 on
generated values: per argument type the edges (NULL, empty, Unicode with combining marks
and emoji, negative, zero, the extreme integers, NaN and infinities, years 1 and 9999,
leap days, ISO week edges) and seeded random values, each function called with every
column of its argument types and every literal its row admits, in the session zone UTC
and again in America/New_York (a DST change's hours). Each call must give, row for row,
Spark's value and type, bit for bit, or be refused by the gate; where DuckDB raises on
some rows (Spark then computes the refresh), the other rows must be Spark's.

`make test` generates ICEMV_FUNCTION_VALUES random rows (few); `make fuzz-functions` many.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import random
import struct
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from sqlglot import exp, parse_one

from icemv.engine.arrow import collect_bounded
from icemv.errors import EngineRefusedError
from icemv.lakehouse import Lakehouse
from icemv.refresh.embedded.executor import connect
from icemv.sql.functions import DATE_LIKE, FUNCTIONS, Argument, Function
from icemv.sql.portable import UTC_ZONES, to_duckdb
from icemv.sql.spark_types import of_arrow
from tests.test_engine_corpus import _same

pytestmark = [pytest.mark.spark]

UTC = dt.UTC
RANDOM_ROWS = int(os.environ.get("ICEMV_FUNCTION_VALUES", "40"))
SEED = int(os.environ.get("ICEMV_FUNCTION_SEED", "4242"))
ZONES = ("UTC", "America/New_York")
COLUMNS = "s STRING, t STRING, d DATE, ts TIMESTAMP, i INT, b BIGINT, x DOUBLE, " \
          "m DECIMAL(12,2), h DECIMAL(38,10)"  # fmt: skip
BY_KIND = {"string": ["s", "t"], "date": ["d"], "timestamp": ["ts"], "int": ["i"],
           "bigint": ["b"], "double": ["x"], "decimal": ["m", "h"]}  # fmt: skip
LITERALS = [*(exp.Literal.number(n) for n in (0, 1, 2, 5, 256)),
            *(exp.Neg(this=exp.Literal.number(n)) for n in (1, 3)),
            *(exp.Literal.string(t) for t in ("", ",", "a", "ß", "ab", "e\u0301", "MM", "YEAR",
                                              "QUARTER", "WEEK", "MON", "yy", "x", "su",
                                              "Friday")),
            exp.true(), exp.false()]  # fmt: skip
# Java patterns (the rows of regular expressions take these) and replacements.
PATTERNS = [".", "a.c", "^a", "b$", "\\d+", "\\s", "\\S+", "\\w+", "[a-c]+", "[^a-z]",
            "(a|b)+", "(\\w)(\\w)?", "a*", "x?", "ß|日", "(?:ab)+", ".*", "[\\s,]", "\\.",
            "a{1,2}", "e\u0301", "(.)$", "^$", "\\W", "(b)(c)?"]  # fmt: skip
REPLACEMENTS = ["", "X", "<$0>", "$1", "\\$", "[$2]"]
# Java date-time patterns (date_format takes these; some refused).
DATETIME_PATTERNS = ["yyyy-MM-dd", "y", "yy", "yyyy-MM-dd HH:mm:ss", "SSSSSS",
                     "yyyy-MM-dd'T'HH:mm:ss.SSS", "MMM d, yyyy", "MMMM", "M/d/yy", "h:mm a",
                     "hh", "H", "EEE", "EEEE", "E", "DDD", "D", "'week''s' %", "dd.MM.yyyy",
                     "YYYY", "ww", "z", "yyyyy", "HH:mm:ss.SSSSSS", "m s"]  # fmt: skip
# Spark's own trees: their arguments are any values of one type.
TREES = ["nvl2(s, i, b)", "nvl2(x, m, h)", "nvl2(d, ts, ts)", "nullif(i, b)", "nullif(s, t)",
         "nullif(m, 0)", "nullif(x, 0.0)"]  # fmt: skip

EDGE_STRINGS = [None, "", "a", "abc", "ß", "ĳ", "ǅ", "e\u0301", "👍🏽", "Ωé ß", " a ", "a,b,,c",
                "\u00a0x", "İ", "ﬁ", "a\tb\nc", "Z", "ab,ab", "\u0301", "日本語", "ab\n",
                "ab\r\n", "a\rb", "a\u2028b", "a\u0085c", "x\x0by", "aab\n\n", "bab",
                # numbers as Spark reads them into integers (and does not)
                "1", " 12 ", "-7", "+5", "1.9", "-1.9", ".", "-.", "+", "-", ".5", "5.",
                "1e3", "0x1A", "2147483647", "2147483648", "-2147483648", "-2147483649",
                "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                "\x001\x00", "\x1c3", "\x7f4\x7f", "\u00a05", "\uff11\uff12", "1 2",
                "--1", "1.2.3", "007", "\t\n8\r", "+-1", "-0", "1.", "127", "128", "-129",
                "32767", "32768", " ", "\x01", "1\u2028", "9" * 30]  # fmt: skip
EDGE_DATES = [None, dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1),
              dt.date(1969, 12, 31), dt.date(2024, 2, 29), dt.date(2023, 2, 28),
              dt.date(2000, 2, 29), dt.date(1900, 3, 1), dt.date(1582, 10, 15),
              dt.date(1582, 10, 4), dt.date(2024, 3, 10), dt.date(2024, 12, 30),
              dt.date(2021, 1, 3), dt.date(2020, 12, 31), dt.date(2024, 1, 31)]  # fmt: skip
EDGE_TIMESTAMPS = [None, dt.datetime(1970, 1, 1, tzinfo=UTC),
                   dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                   dt.datetime(1, 1, 2, tzinfo=UTC),
                   dt.datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC),
                   dt.datetime(2024, 3, 10, 6, 59, 59, 999999, tzinfo=UTC),
                   dt.datetime(2024, 3, 10, 7, 0, tzinfo=UTC),
                   dt.datetime(2024, 11, 3, 5, 30, tzinfo=UTC),
                   dt.datetime(2024, 11, 3, 6, 30, tzinfo=UTC),
                   dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC),
                   dt.datetime(1900, 1, 1, 4, 56, 2, tzinfo=UTC),
                   dt.datetime(2024, 12, 31, 4, 0, tzinfo=UTC)]  # fmt: skip
EDGE_INTS = [None, 0, 1, -1, 7, -7, 2147483647, -2147483648, 3, 100]
EDGE_BIGINTS = [None, 0, -1, 9223372036854775807, -9223372036854775808, 5, -86400]
EDGE_DOUBLES = [None, 0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e308, -1e-320,
                2.5, -2.5, 0.49999999999999994, 4503599627370495.5, -0.4, 1e19]  # fmt: skip
EDGE_DECIMALS = [None, Decimal("0.00"), Decimal("9999999999.99"), Decimal("-9999999999.99"),
                 Decimal("2.50"), Decimal("-2.50"), Decimal("0.01"), Decimal("-0.01")]  # fmt: skip
WIDE_DECIMALS = [None, Decimal("9999999999999999999999999999.9999999999"),
                 Decimal("-9999999999999999999999999999.9999999999"), Decimal("-0.0000000001"),
                 Decimal("0.5000000000"),
                 # where the unscaled integer rounded to DOUBLE first, then divided, would
                 # give another DOUBLE than the nearest one
                 Decimal("7415697278.1759199358"), Decimal("-4132565251.6087655816"),
                 Decimal("-3045776592387270002010699018")]  # fmt: skip
ALPHABET = "aAbczZ09 ,._-ßĳéÉ\u0301\u0308ΩЖ日👍🏽\u00a0\t\n\r\u2028"
NUMERIC = "0123456789012345678901234567890123456789.+- \t\x00\x1c\x7f\u00a0e"
# Spark's casts of strings to integers, and its comparisons of integers with strings
# (which cast the string): sql/portable/string_numbers.py.
CONVERSIONS = ["CAST(s AS INT)", "CAST(t AS BIGINT)", "CAST(s AS SMALLINT)", "CAST(t AS TINYINT)",
               "i = s", "s < i", "b = t", "t >= b", "i <=> s", "s <> b",
               "CAST(m AS DOUBLE)", "CAST(h AS DOUBLE)"]  # fmt: skip


def _random_row(rng: random.Random) -> tuple[Any, ...]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.05 else value

    def text() -> str:
        alphabet = NUMERIC if rng.random() < 0.3 else ALPHABET
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))

    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    digits = rng.choice([38, rng.randint(1, 38)])
    micros = rng.randint(-62_135_596_800 + 86_400, 253_402_214_400 - 86_400) * 1_000_000
    return (
        maybe(text()), maybe(text()),
        maybe(dt.date(1, 1, 1) + dt.timedelta(days=rng.randint(0, 3_652_058))),
        maybe(epoch + dt.timedelta(microseconds=micros + rng.randint(0, 999_999))),
        maybe(rng.randint(-(2**31), 2**31 - 1)), maybe(rng.randint(-(2**63), 2**63 - 1)),
        maybe(rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-10, 10),
                          struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]])),
        maybe(Decimal(rng.randint(-(10**12) + 1, 10**12 - 1)).scaleb(-2)),
        maybe(Decimal(rng.randint(-(10**digits) + 1, 10**digits - 1)).scaleb(-10)),
    )  # fmt: skip


def rows() -> list[tuple[Any, ...]]:
    """The edges, column by column (the longest list decides the count), then random."""
    edges = [EDGE_STRINGS, EDGE_STRINGS[::-1], EDGE_DATES, EDGE_TIMESTAMPS, EDGE_INTS,
             EDGE_BIGINTS, EDGE_DOUBLES, EDGE_DECIMALS, WIDE_DECIMALS]  # fmt: skip
    count = max(len(e) for e in edges)
    generated = [tuple(e[n % len(e)] for e in edges) for n in range(count)]
    rng = random.Random(SEED)
    return generated + [_random_row(rng) for _ in range(RANDOM_ROWS)]


def _literal(value: Any, kind: str) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, dt.datetime):
        text = value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
        return f"TIMESTAMP'{text}+00:00'"
    if isinstance(value, dt.date):
        return f"DATE'{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"CAST('{value}' AS {kind})"


def calls(function: Function) -> list[str]:
    """`function` over every column of each argument's types and every literal its row
    admits (at most 16 calls, a seeded sample of them all)."""
    choices: list[list[str]] = []
    for argument in function.arguments:
        options = _options(argument)
        if not options:
            return []
        choices.append(options)
    every = [list(c) for c in itertools.product(*choices)]
    random.Random(function.name).shuffle(every)
    many = 48 if any("pattern" in a.literal_is for a in function.arguments) else 16
    return [_call(function, arguments) for arguments in every[:many]]


def _options(argument: Argument) -> list[str]:
    if "date-time pattern" in argument.literal_is:
        return [exp.Literal.string(p).sql(dialect="spark") for p in DATETIME_PATTERNS]
    if "Java pattern" in argument.literal_is:
        return [exp.Literal.string(p).sql(dialect="spark") for p in PATTERNS]
    if "$n" in argument.literal_is:
        return [exp.Literal.string(r).sql(dialect="spark") for r in REPLACEMENTS]
    if argument.literal is not None:
        return [node.sql(dialect="spark") for node in LITERALS if argument.literal(node)]
    kinds = {"date", "timestamp"} if argument.kinds == DATE_LIKE else argument.kinds
    columns = [c for kind in sorted(kinds) for c in BY_KIND.get(kind, [])]
    if argument.repeated:  # one, all, some with a NULL among them, a NULL alone
        lists = [columns[:1], columns, [columns[-1], "NULL", columns[0]], ["NULL"]]
        return [", ".join(each) for each in lists]
    return columns + (["NULL"] if argument.optional is False else [])


def _call(function: Function, arguments: list[str]) -> str:
    """The call as Spark SQL spells it (sqlglot parses it back to the row's node)."""
    return f"{function.name}({', '.join(arguments)})"


@pytest.fixture(scope="module")
def arguments_view(lakehouse: Lakehouse) -> tuple[Any, pa.Table]:
    spark = lakehouse.spark
    kinds = [c.split(" ", 1)[1] for c in COLUMNS.split(", ")]
    names = [c.split(" ", 1)[0] for c in COLUMNS.split(", ")]
    values = ", ".join(
        "(" + ", ".join([str(n), *(_literal(v, k) for v, k in zip(row, kinds, strict=True))]) + ")"
        for n, row in enumerate(rows())
    )
    casts = ", ".join(f"CAST({n} AS {k}) AS {n}" for n, k in zip(names, kinds, strict=True))
    spark.sql(
        f"CREATE OR REPLACE TEMP VIEW fargs AS SELECT r, {casts} "
        f"FROM VALUES {values} AS v(r, {', '.join(names)})"
    )
    table = collect_bounded(spark.table("fargs"), 100_000)
    assert table is not None
    return spark, table


def _spark_values(
    spark: Any, every: list[str], answered: dict[str, list[int]]
) -> dict[str, pa.Table]:
    """Spark's (r, v) of each call, many calls in one query; where that raises, each half
    of the calls again, down to one call, which is then read on the rows DuckDB answered
    only (DuckDB raising is always allowed: Spark computes the refresh then); a row
    Spark raises on is missing from its call's table."""
    columns = ", ".join(f"{c} AS v{i}" for i, c in enumerate(every))
    try:
        together = collect_bounded(spark.sql(f"SELECT r, {columns} FROM fargs"), 100_000)
    except Exception:  # noqa: BLE001 (Spark raises on some call: find which)
        if len(every) == 1:
            return {every[0]: _spark_rows(spark, every[0], answered.get(every[0], []))}
        middle = len(every) // 2
        return _spark_values(spark, every[:middle], answered) | _spark_values(
            spark, every[middle:], answered
        )  # fmt: skip
    assert together is not None
    return {
        call: together.select(["r", f"v{i}"]).rename_columns(["r", "v"])
        for i, call in enumerate(every)
    }


def _spark_rows(spark: Any, call: str, rows: list[int]) -> pa.Table:
    """Spark's (r, v) of one call on `rows`; the rows it raises on left out, found by
    halving the list."""
    sql = f"SELECT r, {call} AS v FROM fargs"

    def among(some: list[int]) -> list[pa.Table]:
        if not some:
            return []
        listed = ", ".join(str(r) for r in some)
        try:
            table = collect_bounded(spark.sql(f"{sql} WHERE r IN ({listed})"), 100_000)
        except Exception:  # noqa: BLE001 (Spark raises on some of these rows)
            if len(some) == 1:
                return []  # a refresh fails on this row in Spark
            middle = len(some) // 2
            return among(some[:middle]) + among(some[middle:])
        assert table is not None
        return [table]

    found = among(rows)
    return pa.concat_tables(found) if found else pa.table({"r": pa.array([], pa.int32())})


def _duckdb_rows(connection: Any, sql: str) -> tuple[pa.Table, list[int]]:
    """DuckDB's rows, each row on its own where the whole raised; the rows that raised."""
    try:
        return connection.sql(sql).to_arrow_table(), []
    except duckdb.Error:
        pass
    computed, failed = [], []
    for (r,) in connection.sql("SELECT r FROM fargs").fetchall():
        try:
            computed.append(connection.sql(f"SELECT * FROM ({sql}) q WHERE r = {r}")
                            .to_arrow_table())  # fmt: skip
        except duckdb.Error:
            failed.append(r)
    return pa.concat_tables(computed) if computed else pa.table({}), failed


def _values(table: pa.Table) -> list[Any]:
    """Column v's values; dates and timestamps as their days and microseconds (Spark makes
    dates past year 9999, which Python cannot hold)."""
    column = table.column("v")
    if pa.types.is_date32(column.type):
        column = column.cast(pa.int32())
    elif pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    return column.to_pylist()


def _duckdb(
    connection: Any, relations: Any, call: str, utc: bool
) -> tuple[pa.Table, list[int]] | str:
    """DuckDB's rows of the call and the rows it raised on, or the gate's refusal (`utc`:
    as the gate renders it for a UTC session, Gate.utc)."""
    sql = f"SELECT r, {call} AS v FROM fargs"
    try:
        portable = to_duckdb(parse_one(sql, read="spark"), relations, utc=utc)
    except EngineRefusedError as why:
        return f"refused: {why}"
    return _duckdb_rows(connection, portable.sql)


def _outcome(computed: tuple[pa.Table, list[int]] | str, expected: pa.Table | None) -> str:
    if isinstance(computed, str):
        return computed
    actual, failed = computed
    if actual.num_rows == 0:
        return "raised on every row" if failed else "no rows"
    assert expected is not None
    if expected.num_rows and actual.schema.field("v").type != expected.schema.field("v").type:
        return f"types differ: spark {expected.schema.field('v').type}, duckdb " \
               f"{actual.schema.field('v').type}"  # fmt: skip
    theirs = dict(zip(expected.column("r").to_pylist(), _values(expected), strict=True)) \
        if expected.num_rows else {}  # fmt: skip
    for r, value in zip(actual.column("r").to_pylist(), _values(actual), strict=True):
        if r not in theirs:  # Spark raises here: DuckDB must not answer
            return f"DuckDB answers {value!r} at row {r}, where Spark raises"
        if not _same(theirs[r], value):
            return f"values differ at row {r}: spark {theirs[r]!r}, duckdb {value!r}"
    return f"same ({len(failed)} rows raised)" if failed else "same"


def _in_zone(function: Function, zone: str) -> bool:
    """Every function in UTC; in the other zone those of dates and timestamps."""
    return zone == "UTC" or any(
        a.kinds & {"date", "timestamp"} for a in function.arguments
    )  # fmt: skip


@pytest.mark.parametrize("zone", ZONES)
def test_each_admitted_function_is_spark_s_value_for_generated_arguments(
    arguments_view: tuple[Any, pa.Table], zone: str
) -> None:
    spark, table = arguments_view
    connection = connect(threads=1, memory_limit="512MB", time_zone=zone)
    connection.register("fargs", table)
    relations = {"fargs": {field.name: of_arrow(field.type) for field in table.schema}}
    cases = {f.name: calls(f) for f in FUNCTIONS if f.spark_tree is None and _in_zone(f, zone)}
    cases["trees"] = TREES
    cases["dates formatted"] = ["date_format(d, 'yyyy-MM-dd HH:mm')", "date_format(d, 'EEE D')"]
    if zone == "UTC":
        cases["conversions"] = CONVERSIONS
    every = [c for group in cases.values() for c in group]
    utc = zone in UTC_ZONES  # as the executor renders in the zone
    computed = {call: _duckdb(connection, relations, call, utc) for call in every}
    answered = {
        call: result[0].column("r").to_pylist()
        for call, result in computed.items()
        if not isinstance(result, str) and result[0].num_rows
    }
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        expected: dict[str, pa.Table] = {}
        for start in range(0, len(every), 32):  # Spark compiles a few columns faster
            expected |= _spark_values(spark, every[start : start + 32], answered)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    outcomes: dict[str, str] = {}
    for call in every:
        outcomes[call] = _outcome(computed[call], expected.get(call))
    connection.close()
    wrong = {c: o for c, o in outcomes.items() if not o.startswith(("same", "refused", "raised"))}
    print(f"\nfunction corpus ({zone}, {table.num_rows} rows): {len(outcomes)} calls, "
          f"{sum(o.startswith('same') for o in outcomes.values())} equal to Spark")  # fmt: skip
    for call, outcome in sorted(outcomes.items()):
        if not outcome.startswith("same"):
            print(f"  {call}: {outcome}")
    assert not wrong, "\n".join(f"{c}: {o}" for c, o in wrong.items())
    # Every row of the table computes on DuckDB for some call: the table drives the gate.
    unproven = [name for name, group in cases.items()
                if not any(outcomes[c].startswith("same") for c in group)]  # fmt: skip
    assert not unproven, {name: {c: outcomes[c] for c in cases[name]} for name in unproven}
