"""Spark SQL functions the embedded engine computes, as a table the portability gate reads.

Each admitted function is a row: Spark's name, sqlglot's node for it (or the name of an
unparsed call), each argument's admitted Spark types and literal conditions, Spark's
result type, and the DuckDB expression over the rendered arguments that computes Spark's
value (`Function`). The gate (sql/portable/) types the arguments, checks them against the
row, renders `duckdb(...)` and casts it to the result type strictly (a value that does not
fit raises in DuckDB, and Spark computes the refresh). Each row holds only where both
engines compute the same value for every argument value; rows are proven value for value
against Spark 3.5 on generated arguments (tests/test_function_corpus.py: NULL, empty,
Unicode with combining marks and emoji, negative, zero, extreme integers, years 1 and 9999,
leap days, a DST change). A function Spark defines as a tree of others (`nvl2`, `nullif`)
is that tree (`spark_tree`), typed and rendered like any other.

The refused functions that views commonly use are listed with the reason (`REFUSED`): the
gate says it, and the docs' list (docs/concepts/embedded-engine.md) is built from both
tables. A function in neither goes to Spark as "(Spark only)".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from icemv.sql.datetime_patterns import strftime_of
from icemv.sql.regex import Untranslatable, replacement, translate
from icemv.sql.spark_types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    SparkType,
)

# Argument kinds (SparkType.kind): "date-like" is a DATE, or a TIMESTAMP read as its date
# in the session zone (Spark's implicit cast; sqlglot often wraps it in TsOrDsToDate).
STRINGS = frozenset({"string"})
DATES = frozenset({"date"})
DATE_LIKE = frozenset({"date", "timestamp"})
NUMBERS = frozenset({"double", "decimal"})
TIMESTAMPS = frozenset({"timestamp"})
INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})


def _literal_int(minimum: int | None = None, nonzero: bool = False) -> Callable[[exp.Expr], bool]:
    def check(node: exp.Expr) -> bool:
        value = _int_value(node)
        if value is None:
            return False
        return (minimum is None or value >= minimum) and not (nonzero and value == 0)

    return check


def _int_value(node: exp.Expr) -> int | None:
    negative = isinstance(node, exp.Neg)
    inner = node.this if negative else node
    if not (isinstance(inner, exp.Literal) and not inner.is_string):
        return None
    try:
        value = int(inner.this)
    except ValueError:
        return None
    return -value if negative else value


def _literal_string(nonempty: bool = False) -> Callable[[exp.Expr], bool]:
    def check(node: exp.Expr) -> bool:
        return isinstance(node, exp.Literal) and node.is_string and not (nonempty and not node.this)

    return check


@dataclass(frozen=True)
class Argument:
    """One argument: where sqlglot keeps it (an arg name, or a position of an unparsed
    call), the Spark type kinds admitted (NULL always is), a literal it must be, and
    whether it may be left out (then `absent`, if given, is what the gate uses)."""

    at: str | int
    kinds: frozenset[str]
    literal: Callable[[exp.Expr], bool] | None = None
    literal_is: str = ""  # the literal condition, for the refusal and the docs
    optional: bool = False
    absent: Callable[[], exp.Expr] | None = None
    null: bool = True  # a NULL literal admitted here
    repeated: bool = False  # at an int: this and every later argument (at least one)


@dataclass(frozen=True)
class Function:
    """An admitted Spark function (see the module)."""

    name: str
    node: type[exp.Expr] | str  # sqlglot's class, or an unparsed (Anonymous) call's name
    arguments: tuple[Argument, ...] = ()
    # Spark's result type: one, or of the arguments' types and the call (its literals)
    result: SparkType | Callable[[Sequence[SparkType], exp.Expr], SparkType] = STRING
    duckdb: Callable[..., exp.Expr] | None = None  # over the rendered arguments, in order
    spark_tree: Callable[[exp.Expr], exp.Expr] | None = None  # Spark's own definition
    note: str = ""
    forbidden_args: tuple[str, ...] = field(default=())  # sqlglot args that must be unset
    when: Callable[[exp.Expr], bool] | None = None  # which of a node's functions (lpad/rpad)


def call(name: str, *arguments: exp.Expr) -> exp.Expr:
    """A DuckDB function call, as named."""
    return exp.Anonymous(this=name, expressions=list(arguments))


def _num(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def _plus(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Add(this=left, expression=right)


def _minus(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    return exp.Sub(this=left, expression=right)


def _mod(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    """`(left % right)`, a compound `left` in parentheses (sqlglot adds none)."""
    if isinstance(left, exp.Binary):
        left = exp.Paren(this=left)
    return exp.Paren(this=exp.Mod(this=left, expression=right))


def _epoch_seconds(value: exp.Expr) -> exp.Expr:
    """Seconds since the epoch, the microseconds divided and truncated towards zero as
    Spark's `micros / 1000000` (DuckDB's `//` on integers truncates too):
    1969-12-31 23:59:59.999999 is 0 in both."""
    return exp.IntDiv(this=call("epoch_us", value), expression=_num(1_000_000))


def _epoch_floor(per_second: int) -> Callable[[exp.Expr], exp.Expr]:
    """Whole units (1 per second, 1,000: milliseconds) since the epoch, rounded down
    (Spark's Math.floorDiv), exactly: the microseconds less their floored remainder, then
    divided (a multiple: DuckDB's truncating `//` does not round)."""
    divisor = 1_000_000 // per_second

    def floor(value: exp.Expr) -> exp.Expr:
        micros = call("epoch_us", value)
        unit = _num(divisor)
        remainder = _mod(_plus(_mod(micros, unit), unit.copy()), unit.copy())
        whole = exp.Paren(this=_minus(micros.copy(), remainder))
        return exp.IntDiv(this=whole, expression=unit.copy())

    return floor


def _floor_type(kinds: Sequence[SparkType], _: exp.Expr) -> SparkType:
    """floor/ceil: BIGINT of integers and DOUBLE, DECIMAL(p - s + 1, 0) of DECIMAL(p, s)
    (Spark's DecimalType.bounded)."""
    kind = kinds[0]
    if kind.kind != "decimal":
        return BIGINT
    return SparkType("decimal", min(kind.precision - kind.scale + 1, 38), 0)


def _pmod_type(kinds: Sequence[SparkType], _: exp.Expr) -> SparkType:
    order = ("tinyint", "smallint", "int", "bigint")
    known = [k for k in kinds if k.kind in order]
    return max(known, key=lambda k: order.index(k.kind)) if known else INT


def rounded_type(kind: SparkType, scale: int) -> SparkType:
    """round/bround of DECIMAL(p, s) to `scale` >= 0 places: DECIMAL(p - s + 1 + k, k) for
    k = min(s, scale) (one more integer digit: round(9.9) is 10), at most 38 digits."""
    kept = min(kind.scale, scale)
    return SparkType("decimal", min(kind.precision - kind.scale + 1 + kept, 38), kept)


def _bround_type(kinds: Sequence[SparkType], node: exp.Expr) -> SparkType:
    scale = _int_value(node.expressions[1]) if len(node.expressions) > 1 else 0
    return rounded_type(kinds[0], scale or 0)


def _pmod(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """Spark's pmod: `r = a % b; if r < 0 then (r + b) % b else r` (by zero: NULL)."""
    remainder = _mod(a, b)
    negative = exp.LT(this=remainder.copy(), expression=_num(0))
    return exp.Case(
        ifs=[exp.If(this=negative, true=_mod(_plus(remainder.copy(), b.copy()), b.copy()))],
        default=remainder,
    )


def _nvl2(node: exp.Expr) -> exp.Expr:
    """nvl2(a, b, c) is Spark's If(IsNotNull(a), b, c)."""
    present = exp.Not(this=exp.Is(this=node.this.copy(), expression=exp.null()))
    return exp.If(this=present, true=node.args["true"].copy(), false=node.args["false"].copy())


def _nullif(node: exp.Expr) -> exp.Expr:
    """nullif(a, b) is Spark's If(EqualTo(a, b), NULL, a)."""
    equal = exp.EQ(this=node.this.copy(), expression=node.expression.copy())
    return exp.If(this=equal, true=exp.null(), false=node.this.copy())


def _equal_null(node: exp.Expr) -> exp.Expr:
    """equal_null(a, b) is Spark's EqualNullSafe(a, b)."""
    return exp.NullSafeEQ(this=node.this.copy(), expression=node.expression.copy())


_TRUNC_UNITS = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter",
                "MONTH": "month", "MM": "month", "MON": "month", "WEEK": "week"}  # fmt: skip


def _trunc_unit(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and node.this.upper() in _TRUNC_UNITS


def _trunc(date: exp.Expr, unit: exp.Expr) -> exp.Expr:
    assert isinstance(unit, exp.Literal)
    return call("date_trunc", exp.Literal.string(_TRUNC_UNITS[unit.this.upper()]), date)


def _reverse(value: exp.Expr) -> exp.Expr:
    """By code points, as Spark's UTF8String.reverse (DuckDB's reverse keeps grapheme
    clusters together: a combining mark stays after its letter)."""
    characters = call("string_split", value, exp.Literal.string(""))
    return call("array_to_string", call("list_reverse", characters), exp.Literal.string(""))


def _space() -> exp.Expr:
    return exp.Literal.string(" ")


def _empty() -> exp.Expr:
    return exp.Literal.string("")


def _date(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("DATE"))


# sql/decimals.half_way's internal last-digit test (sql/portable/division.py), not a row's.
HALF_WAY_PATTERN = "5(E[-+]?[0-9]+)?$"


def _pattern(node: exp.Expr) -> str:
    assert isinstance(node, exp.Literal)
    return str(node.this)


def _rlike(value: exp.Expr, pattern: exp.Expr) -> exp.Expr:
    """Whether the pattern is found anywhere in the string (Matcher.find), in both."""
    translated = translate(_pattern(pattern), end_may_move=True)
    return call("regexp_matches", value, exp.Literal.string(translated.text))


def _extract(value: exp.Expr, pattern: exp.Expr, group: exp.Expr) -> exp.Expr:
    """The group of the first match, '' without a match or where the group took no part,
    in both; a group past the pattern's raises in Spark: refused."""
    translated = translate(_pattern(pattern), end_may_move=False)
    if int(_pattern(group)) > translated.groups:
        raise Untranslatable(f"group {_pattern(group)} of a pattern of {translated.groups}")
    return call("regexp_extract", value, exp.Literal.string(translated.text), group)


def _replace(value: exp.Expr, pattern: exp.Expr, by: exp.Expr) -> exp.Expr:
    """Every match replaced (Matcher.replaceAll; RE2's global replace)."""
    translated = translate(_pattern(pattern), end_may_move=False)
    if translated.empty:
        raise Untranslatable("a pattern that matches the empty string (Java replaces empty "
                             "matches after a match, RE2 does not)")  # fmt: skip
    text = replacement(_pattern(by), translated.groups)
    return call("regexp_replace", value, exp.Literal.string(translated.text),
                exp.Literal.string(text), exp.Literal.string("g"))  # fmt: skip


_REGEX = "a literal Java pattern in the subset RE2 matches alike (sql/regex.py)"
_DATETIME = "a literal Java date-time pattern of the letters sql/datetime_patterns.py admits"


def _date_format(value: exp.Expr, pattern: exp.Expr) -> exp.Expr:
    """strftime of the translated pattern; a year outside 1000-9999 raises in DuckDB
    (Spark computes the refresh) where the pattern prints the year."""
    translated = strftime_of(_pattern(pattern))
    formatted = call("strftime", value, exp.Literal.string(translated.text))
    if not translated.year:
        return formatted
    year = call("year", value)
    outside = exp.Not(this=exp.Between(this=year, low=_num(1000), high=_num(9999)))
    fail = call("error", exp.Literal.string("a year date_format prints otherwise"))
    return exp.Case(ifs=[exp.If(this=outside, true=fail)], default=formatted)


def _pad(name: str, left: bool) -> Function:
    return Function(
        name,
        exp.Pad,
        (
            Argument("this", STRINGS),
            Argument("expression", INTEGERS, _literal_int(0), "a literal >= 0"),
            Argument(
                "fill_pattern",
                STRINGS,
                _literal_string(True),
                "a non-empty literal",
                optional=True,
                absent=_space,
            ),
        ),
        STRING,
        lambda s, n, pad: call(name, s, n, pad),
        note="a longer string is cut to the length",
        when=lambda node: bool(node.args.get("is_left")) == left,
    )


def ascii_only(value: exp.Expr, computed: exp.Expr) -> exp.Expr:
    """Case mapping agrees on ASCII only (Spark's upper('ß') is 'SS', DuckDB's 'ẞ'): other
    text raises in DuckDB, and Spark computes the refresh."""
    other = call("regexp_matches", value.copy(), exp.Literal.string("[^\x01-\x7f]"))
    stop = call("error", exp.Literal.string("case mapping of non-ASCII text"))
    return exp.Case().when(other, stop, copy=False).else_(computed, copy=False)


def _initcap(value: exp.Expr) -> exp.Expr:
    """Spark lower-cases the string, then title-cases its first character and each one
    after an ASCII space: the words split at each space, each one's first character
    upper-cased (ASCII text only, where both engines' case mappings agree)."""
    word = exp.column("w")
    titled = call("concat", call("upper", call("substring", word, _num(1), _num(1))),
                  call("substring", word.copy(), _num(2)))  # fmt: skip
    words = call("string_split", call("lower", value), _space())
    each = exp.Lambda(this=titled, expressions=[exp.to_identifier("w")])
    return ascii_only(value, call("array_to_string", call("list_transform", words, each),
                                  _space()))  # fmt: skip


# Spark's names of the days (DateTimeUtils.getDayOfWeekFromString), as ISO day numbers.
_DAYS = {name: n for n, names in enumerate(
    (("MO", "MON", "MONDAY"), ("TU", "TUE", "TUESDAY"), ("WE", "WED", "WEDNESDAY"),
     ("TH", "THU", "THURSDAY"), ("FR", "FRI", "FRIDAY"), ("SA", "SAT", "SATURDAY"),
     ("SU", "SUN", "SUNDAY")), start=1) for name in names}  # fmt: skip


def _day_name(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and node.this.upper() in _DAYS


def _next_day(date: exp.Expr, day: exp.Expr) -> exp.Expr:
    """The first date after `date` on that day: `date + ((day - isodow(date) + 6) % 7 + 1)`
    (Spark: `start + 1 + ((dow - 1 - start) % 7 + 7) % 7` in days since the epoch)."""
    assert isinstance(day, exp.Literal)
    ahead = _minus(_num(_DAYS[day.this.upper()] + 6), call("isodow", date))
    days = exp.Cast(this=_plus(_mod(ahead, _num(7)), _num(1)), to=exp.DataType.build("INT"))
    return _plus(date.copy(), days)


def _one_character(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and len(node.this) == 1


def _substring_index(value: exp.Expr, delimiter: exp.Expr, count: exp.Expr) -> exp.Expr:
    """Before the count-th delimiter (after the count-th from the end when negative), ''
    for 0, the whole string with fewer: the split string's first (last) count parts
    joined again. A one-character delimiter: Spark counts overlapping occurrences of
    longer ones, a split does not."""
    parts = call("string_split", value, delimiter)
    number = _int_value(count)
    assert number is not None
    kept = (call("list_slice", parts, _num(1), count) if number >= 0
            else call("list_slice", parts, count, _num(-1)))  # fmt: skip
    return call("array_to_string", kept, delimiter.copy())


FUNCTIONS: tuple[Function, ...] = (
    # -- dates and times (a TIMESTAMP in the session zone) -----------------------------
    Function("dayofweek", exp.DayOfWeek, (Argument("this", DATE_LIKE),), INT,
             lambda d: _plus(call("dayofweek", d), _num(1)), note="1 = Sunday"),
    Function("weekday", "weekday", (Argument(0, DATE_LIKE),), INT,
             lambda d: _minus(call("isodow", d), _num(1)), note="0 = Monday"),
    Function("dayofyear", exp.DayOfYear, (Argument("this", DATE_LIKE),), INT,
             lambda d: call("dayofyear", d)),
    Function("weekofyear", exp.WeekOfYear, (Argument("this", DATE_LIKE),), INT,
             lambda d: call("weekofyear", d), note="ISO 8601 weeks in both"),
    Function("date_format", exp.TimeToStr,
             (Argument("this", TIMESTAMPS),
              Argument("format", STRINGS, _literal_string(True), _DATETIME)),
             STRING, _date_format, forbidden_args=("culture", "zone"),
             note="a DATE at midnight; the session zone's local time"),
    Function("quarter", exp.Quarter, (Argument("this", DATE_LIKE),), INT,
             lambda d: call("quarter", d)),
    Function("next_day", exp.NextDay,
             (Argument("this", DATE_LIKE),
              Argument("expression", STRINGS, _day_name, "a literal day: MO, MON, MONDAY, ...")),
             DATE, _next_day, note="the first such day after the date"),
    Function("last_day", exp.LastDay, (Argument("this", DATES),), DATE,
             lambda d: call("last_day", d)),
    Function("datediff", exp.DateDiff, (Argument("this", DATES), Argument("expression", DATES)),
             INT, lambda end, start: call("date_diff", exp.Literal.string("day"), start, end),
             forbidden_args=("unit",)),
    Function("add_months", exp.AddMonths,
             (Argument("this", DATES), Argument("expression", INTEGERS)), DATE,
             lambda d, n: _plus(d, call("to_months", n)),
             note="a day past the new month's end is its last day, in both"),
    Function("unix_date", exp.UnixDate, (Argument("this", DATES),), INT,
             lambda d: call("date_diff", exp.Literal.string("day"),
                            _date(exp.Literal.string("1970-01-01")), d)),
    Function("unix_timestamp", exp.StrToUnix, (Argument("this", TIMESTAMPS),), BIGINT,
             _epoch_seconds, note="of a TIMESTAMP (its format is not read); not of strings"),
    Function("unix_seconds", exp.UnixSeconds, (Argument("this", TIMESTAMPS),), BIGINT,
             _epoch_floor(1), note="rounded down"),
    Function("unix_millis", exp.UnixMillis, (Argument("this", TIMESTAMPS),), BIGINT,
             _epoch_floor(1_000), note="rounded down"),
    Function("unix_micros", exp.UnixMicros, (Argument("this", TIMESTAMPS),), BIGINT,
             lambda t: call("epoch_us", t)),
    Function("timestamp_seconds", "timestamp_seconds", (Argument(0, INTEGERS),), TIMESTAMP,
             lambda n: call("to_timestamp", n), note="of integers"),
    Function("date_from_unix_date", exp.DateFromUnixDate,
             (Argument("this", frozenset({"tinyint", "smallint", "int"})),), DATE,
             lambda n: _plus(_date(exp.Literal.string("1970-01-01")), n)),
    Function("make_date", "make_date",
             (Argument(0, INTEGERS), Argument(1, INTEGERS), Argument(2, INTEGERS)), DATE,
             lambda y, m, d: call("make_date", y, m, d),
             note="an invalid date: NULL in Spark, DuckDB raises (Spark computes it)"),
    Function("trunc", exp.DateTrunc,
             (Argument("this", DATES),
              Argument("unit", STRINGS, _trunc_unit, "YEAR, YYYY, YY, QUARTER, MONTH, MM, "
                                                     "MON or WEEK")),
             DATE, _trunc),
    # -- strings -----------------------------------------------------------------------
    Function("reverse", exp.Reverse, (Argument("this", STRINGS),), STRING, _reverse,
             note="by code points"),
    Function("upper", exp.Upper, (Argument("this", STRINGS),), STRING,
             lambda s: ascii_only(s, call("upper", s)),
             note="also ucase; ASCII text (Spark's upper('ß') is 'SS': other text raises in "
                  "DuckDB, Spark computes it)"),
    Function("lower", exp.Lower, (Argument("this", STRINGS),), STRING,
             lambda s: ascii_only(s, call("lower", s)), note="also lcase; as upper"),
    Function("length", exp.Length, (Argument("this", STRINGS),), INT,
             lambda s: call("length", s), forbidden_args=("binary", "encoding"),
             note="also char_length, character_length; in code points"),
    Function("concat_ws", exp.ConcatWs,
             (Argument(0, STRINGS), Argument(1, STRINGS, repeated=True)), STRING,
             lambda sep, *values: call("concat_ws", sep, *values),
             note="NULL values skipped; of strings (not arrays)"),
    Function("initcap", exp.Initcap, (Argument("this", STRINGS),), STRING, _initcap,
             when=lambda node: node.args.get("expression") in (None, exp.Literal.string(" ")),
             note="ASCII text (other text raises in DuckDB: Spark computes it)"),
    Function("substring_index", exp.SubstringIndex,
             (Argument("this", STRINGS),
              Argument("delimiter", STRINGS, _one_character, "a one-character literal"),
              Argument("count", INTEGERS, _literal_int(), "a literal")),
             STRING, _substring_index),
    Function("replace", exp.Replace,
             (Argument("this", STRINGS),
              Argument("expression", STRINGS, _literal_string(True), "a non-empty literal"),
              Argument("replacement", STRINGS, optional=True, absent=_empty)),
             STRING, lambda s, search, by: call("replace", s, search, by)),
    Function("translate", exp.Translate,
             (Argument("this", STRINGS),
              Argument("from_", STRINGS, _literal_string(), "a literal"),
              Argument("to", STRINGS, _literal_string(), "a literal")),
             STRING, lambda s, a, b: call("translate", s, a, b)),
    _pad("lpad", left=True),
    _pad("rpad", left=False),
    Function("left", exp.Left,
             (Argument("this", STRINGS),
              Argument("expression", INTEGERS, _literal_int(0), "a literal >= 0")),
             STRING, lambda s, n: call("left", s, n)),
    Function("right", exp.Right,
             (Argument("this", STRINGS),
              Argument("expression", INTEGERS, _literal_int(0), "a literal >= 0")),
             STRING, lambda s, n: call("right", s, n)),
    Function("instr", exp.StrPosition,
             (Argument("this", STRINGS), Argument("substr", STRINGS)), INT,
             lambda s, sub: call("strpos", s, sub), note="also locate(sub, s)",
             forbidden_args=("position", "occurrence")),
    Function("startswith", exp.StartsWith,
             (Argument("this", STRINGS), Argument("expression", STRINGS)), BOOLEAN,
             lambda s, p: call("starts_with", s, p)),
    Function("endswith", exp.EndsWith,
             (Argument("this", STRINGS), Argument("expression", STRINGS)), BOOLEAN,
             lambda s, p: call("ends_with", s, p)),
    Function("contains", exp.Contains,
             (Argument("this", STRINGS), Argument("expression", STRINGS)), BOOLEAN,
             lambda s, p: call("contains", s, p)),
    Function("repeat", exp.Repeat,
             (Argument("this", STRINGS),
              Argument("times", INTEGERS, _literal_int(), "a literal")),
             STRING, lambda s, n: call("repeat", s, n)),
    Function("ascii", exp.Ascii, (Argument("this", STRINGS),), INT, lambda s: call("ascii", s)),
    Function("octet_length", "octet_length", (Argument(0, STRINGS),), INT,
             lambda s: call("strlen", s)),
    Function("bit_length", exp.BitLength, (Argument("this", STRINGS),), INT,
             lambda s: exp.Mul(this=call("strlen", s), expression=_num(8))),
    Function("split_part", exp.SplitPart,
             (Argument("this", STRINGS),
              Argument("delimiter", STRINGS, _literal_string(True), "a non-empty literal"),
              Argument("part_index", INTEGERS, _literal_int(nonzero=True),
                       "a literal other than 0")),
             STRING, lambda s, d, n: call("split_part", s, d, n)),
    Function("levenshtein", exp.Levenshtein,
             (Argument("this", STRINGS), Argument("expression", STRINGS)), INT,
             lambda a, b: call("levenshtein", a, b), forbidden_args=(
                 "ins_cost", "del_cost", "sub_cost", "max_dist")),
    Function("base64", exp.ToBase64, (Argument("this", STRINGS),), STRING,
             lambda s: call("to_base64", call("encode", s)), note="of a string's UTF-8 bytes"),
    Function("hex", exp.Hex, (Argument("this", INTEGERS),), STRING,
             lambda n: call("hex", exp.Cast(this=n, to=exp.DataType.build("BIGINT"))),
             note="of integers (as BIGINT: two's complement)"),
    Function("md5", exp.MD5, (Argument("this", STRINGS),), STRING, lambda s: call("md5", s),
             note="of a string's UTF-8 bytes"),
    Function("sha1", exp.SHA, (Argument("this", STRINGS),), STRING, lambda s: call("sha1", s),
             note="also sha"),
    Function("sha2", exp.SHA2,
             (Argument("this", STRINGS),
              Argument("length", INTEGERS, lambda n: _int_value(n) in (0, 256), "256 or 0")),
             STRING, lambda s, _: call("sha256", s)),
    Function("rlike", exp.RegexpLike,
             (Argument("this", STRINGS), Argument("expression", STRINGS, _literal_string(),
                                                  _REGEX)),
             BOOLEAN, _rlike, note="also regexp_like, regexp and `s RLIKE p`",
             when=lambda node: not (isinstance(node.expression, exp.Literal)
                                    and node.expression.this == HALF_WAY_PATTERN)),
    Function("regexp", "regexp",
             (Argument(0, STRINGS), Argument(1, STRINGS, _literal_string(), _REGEX)),
             BOOLEAN, _rlike),
    Function("regexp_extract", exp.RegexpExtract,
             (Argument("this", STRINGS), Argument("expression", STRINGS, _literal_string(),
                                                  _REGEX),
              Argument("group", INTEGERS, _literal_int(0), "a literal >= 0")),
             STRING, _extract, forbidden_args=("position", "occurrence", "parameters")),
    Function("regexp_replace", exp.RegexpReplace,
             (Argument("this", STRINGS), Argument("expression", STRINGS, _literal_string(),
                                                  _REGEX),
              Argument("replacement", STRINGS, _literal_string(), "a literal ($n: a group)")),
             STRING, _replace, forbidden_args=("position", "occurrence", "modifiers")),
    # -- numbers -----------------------------------------------------------------------
    Function("floor", exp.Floor, (Argument("this", NUMBERS),), _floor_type,
             lambda x: call("floor", x), forbidden_args=("decimals", "to"),
             note="of integers: Spark's identity, not admitted (DuckDB's goes through DOUBLE)"),
    Function("ceil", exp.Ceil, (Argument("this", NUMBERS),), _floor_type,
             lambda x: call("ceil", x), note="also ceiling; as floor",
             forbidden_args=("decimals", "to")),
    Function("sqrt", exp.Sqrt, (Argument("this", INTEGERS | {"double"}),), DOUBLE,
             lambda x: call("sqrt", exp.Cast(this=x, to=exp.DataType.build("DOUBLE"))),
             note="of integers and DOUBLE (IEEE's correctly rounded square root in both); "
                  "of a negative: NaN in Spark, DuckDB raises (Spark computes it)"),
    Function("sign", exp.Sign, (Argument("this", INTEGERS),), DOUBLE,
             lambda x: call("sign", x),
             note="also signum; of integers (Spark's sign(-0.0) is -0.0, DuckDB's 0.0)"),
    Function("bround", "bround",
             (Argument(0, frozenset({"decimal"}), null=False),  # Spark types NULL DOUBLE
              Argument(1, INTEGERS, _literal_int(0), "a literal >= 0", optional=True,
                       absent=lambda: _num(0))),
             _bround_type, lambda x, d: call("round_even", x, d),
             note="of a DECIMAL: half to even, exactly (of a DOUBLE: see round)"),
    Function("isnan", exp.IsNan, (Argument("this", NUMBERS),), BOOLEAN,
             lambda x: exp.Coalesce(this=call("isnan", x), expressions=[exp.false()]),
             note="false for NULL, as Spark"),
    Function("pmod", "pmod", (Argument(0, INTEGERS, null=False), Argument(1, INTEGERS, null=False)),
             _pmod_type, _pmod, note="NULL literals refused (Spark types them DOUBLE)"),
    # -- conditionals: Spark's own trees ----------------------------------------------
    Function("nvl2", exp.Nvl2, spark_tree=_nvl2, note="if(a IS NOT NULL, b, c)"),
    Function("nullif", exp.Nullif, spark_tree=_nullif, note="if(a = b, NULL, a)"),
    Function("equal_null", exp.EqualNull, spark_tree=_equal_null, note="a <=> b"),
)  # fmt: skip


# The functions views commonly use that the gate refuses, and why (Spark computes them).
REFUSED: dict[str, str] = {
    "regexp_extract, regexp_replace, rlike with other patterns": "Java's regular "
    "expressions and DuckDB's RE2 differ outside the subset of sql/regex.py "
    "(back-references, look-around, inline flags, `\\b`, `\\p{...}`, possessive "
    "quantifiers, `$` where the match's text counts); a pattern that is not a literal",
    "date_format with other patterns": "zones and offsets, week-based fields, eras, "
    "quarters, optional sections and letters counted otherwise are not translated",
    "from_unixtime, to_date(s, fmt), to_timestamp(s, fmt), unix_timestamp(s, fmt)": "parsing "
    "strings with Java's patterns (and Spark's lenient fallbacks) is not translated",
    "to_date(s), CAST(s AS DATE) of a column": "Spark's lenient parsing of strings "
    "(`2024-1-5`, trailing text) differs from DuckDB's",
    "months_between": "not yet proven equal on generated values",
    "next_day with a day that is not a literal": "Spark's names of days are not translated per row",
    "substring_index with a longer delimiter": "Spark counts overlapping occurrences",
    "pow, power, exp, ln, log, log2, log10": "Java's Math and the C library may differ in "
    "the last bit of a DOUBLE; not yet proven on generated values",
    "round, bround of a DOUBLE": "Spark rounds the DOUBLE's shortest decimal text, DuckDB "
    "the binary value (round(2.675, 2): 2.68 in Spark, 2.67 in DuckDB)",
    "round, bround to a negative scale": "not yet proven equal on generated values",
    "crc32": "DuckDB has no CRC-32",
    "sha2 with 224, 384 or 512 bits": "DuckDB computes SHA-256 only",
    "lpad, rpad with an empty pad": "DuckDB raises, Spark returns the string cut to length",
    "get_json_object, from_json": "DuckDB's JSON paths are not Spark's; not admitted",
    "split, element_at, array functions": "complex types stay on Spark",
    "format_string, printf": "Java's formatter is not translated",
}

_BY_NODE: dict[type[exp.Expr] | str, list[Function]] = {}
for _function in FUNCTIONS:
    _BY_NODE.setdefault(_function.node, []).append(_function)


def function_of(node: exp.Expr) -> Function | None:
    """The admitted function `node` calls, if any."""
    key = str(node.name).lower() if isinstance(node, exp.Anonymous) else type(node)
    for function in _BY_NODE.get(key, ()):
        if function.when is None or function.when(node):
            return function
    return None


def function_table() -> str:
    """The docs' list of admitted and refused functions (Markdown), built from the tables."""
    lines = ["| function | arguments | result | notes |", "|---|---|---|---|"]
    for function in sorted(FUNCTIONS, key=lambda f: f.name):
        arguments = ", ".join(_shown(a) for a in function.arguments) or "as Spark defines it"
        result = function.result
        if isinstance(result, SparkType):
            shown = result.describe()
        else:
            shown = _RESULTS.get(function.name, "see notes")
        lines.append(f"| `{function.name}` | {arguments} | {shown} | {function.note} |")
    lines += ["", "Refused (computed by Spark):", "", "| functions | why |", "|---|---|"]
    lines += [f"| {names} | {why} |" for names, why in REFUSED.items()]
    return "\n".join(lines)


_RESULTS = {"floor": "BIGINT; DECIMAL(p - s + 1, 0) of a DECIMAL", "ceil": "as floor",
            "bround": "DECIMAL(p - s + 1 + k, k), k the places kept",
            "pmod": "the wider integer type"}  # fmt: skip


def _shown(argument: Argument) -> str:
    kinds = "DATE or TIMESTAMP" if argument.kinds == DATE_LIKE else "/".join(
        sorted(k.upper() for k in argument.kinds)
    )  # fmt: skip
    if argument.literal_is:
        kinds += f" ({argument.literal_is})"
    return kinds + (" (optional)" if argument.optional else "") + (
        ", ..." if argument.repeated else "")  # fmt: skip
