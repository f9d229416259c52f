"""The DuckDB expressions (and Spark trees, result types and literal checks) of the
function table's rows, each computing Spark's value where its row admits the call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from icemv.sql.datetime_patterns import strftime_of
from icemv.sql.functions.model import (
    INTEGERS,
    STRINGS,
    Argument,
    Function,
    as_double,
    call,
    int_value,
    literal_int,
    literal_string,
    minus,
    mod,
    num,
    plus,
)
from icemv.sql.regex import Untranslatable, replacement, translate
from icemv.sql.spark_types import BIGINT, INT, STRING, SparkType


def epoch_seconds(value: exp.Expr) -> exp.Expr:
    """Seconds since the epoch, the microseconds divided and truncated towards zero as
    Spark's `micros / 1000000` (DuckDB's `//` on integers truncates too):
    1969-12-31 23:59:59.999999 is 0 in both."""
    return exp.IntDiv(this=call("epoch_us", value), expression=num(1_000_000))


def epoch_floor(per_second: int) -> Callable[[exp.Expr], exp.Expr]:
    """Whole units (1 per second, 1,000: milliseconds) since the epoch, rounded down
    (Spark's Math.floorDiv), exactly: the microseconds less their floored remainder, then
    divided (a multiple: DuckDB's truncating `//` does not round)."""
    divisor = 1_000_000 // per_second

    def floor(value: exp.Expr) -> exp.Expr:
        micros = call("epoch_us", value)
        unit = num(divisor)
        remainder = mod(plus(mod(micros, unit), unit.copy()), unit.copy())
        whole = exp.Paren(this=minus(micros.copy(), remainder))
        return exp.IntDiv(this=whole, expression=unit.copy())

    return floor


def floor_type(kinds: Sequence[SparkType], _: exp.Expr) -> SparkType:
    """floor/ceil: BIGINT of integers and DOUBLE, DECIMAL(p - s + 1, 0) of DECIMAL(p, s)
    (Spark's DecimalType.bounded)."""
    kind = kinds[0]
    if kind.kind != "decimal":
        return BIGINT
    return SparkType("decimal", min(kind.precision - kind.scale + 1, 38), 0)


def pmod_type(kinds: Sequence[SparkType], _: exp.Expr) -> SparkType:
    order = ("tinyint", "smallint", "int", "bigint")
    known = [k for k in kinds if k.kind in order]
    return max(known, key=lambda k: order.index(k.kind)) if known else INT


def rounded_type(kind: SparkType, scale: int) -> SparkType:
    """round/bround of DECIMAL(p, s) to `scale` >= 0 places: DECIMAL(p - s + 1 + k, k) for
    k = min(s, scale) (one more integer digit: round(9.9) is 10), at most 38 digits."""
    kept = min(kind.scale, scale)
    return SparkType("decimal", min(kind.precision - kind.scale + 1 + kept, 38), kept)


def bround_type(kinds: Sequence[SparkType], node: exp.Expr) -> SparkType:
    scale = int_value(node.expressions[1]) if len(node.expressions) > 1 else 0
    return rounded_type(kinds[0], scale or 0)


def pmod(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    """Spark's pmod: `r = a % b; if r < 0 then (r + b) % b else r` (by zero: NULL)."""
    remainder = mod(a, b)
    negative = exp.LT(this=remainder.copy(), expression=num(0))
    return exp.Case(
        ifs=[exp.If(this=negative, true=mod(plus(remainder.copy(), b.copy()), b.copy()))],
        default=remainder,
    )


def nvl2_tree(node: exp.Expr) -> exp.Expr:
    """nvl2(a, b, c) is Spark's If(IsNotNull(a), b, c)."""
    present = exp.Not(this=exp.Is(this=node.this.copy(), expression=exp.null()))
    return exp.If(this=present, true=node.args["true"].copy(), false=node.args["false"].copy())


def nullif_tree(node: exp.Expr) -> exp.Expr:
    """nullif(a, b) is Spark's If(EqualTo(a, b), NULL, a)."""
    equal = exp.EQ(this=node.this.copy(), expression=node.expression.copy())
    return exp.If(this=equal, true=exp.null(), false=node.this.copy())


def equal_null_tree(node: exp.Expr) -> exp.Expr:
    """equal_null(a, b) is Spark's EqualNullSafe(a, b)."""
    return exp.NullSafeEQ(this=node.this.copy(), expression=node.expression.copy())


TRUNC_UNITS = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter",
                "MONTH": "month", "MM": "month", "MON": "month", "WEEK": "week"}  # fmt: skip


def trunc_unit(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and node.this.upper() in TRUNC_UNITS


def trunc(date: exp.Expr, unit: exp.Expr) -> exp.Expr:
    assert isinstance(unit, exp.Literal)
    return call("date_trunc", exp.Literal.string(TRUNC_UNITS[unit.this.upper()]), date)


def code_points_reversed(value: exp.Expr) -> exp.Expr:
    """By code points, as Spark's UTF8String.reverse (DuckDB's reverse keeps grapheme
    clusters together: a combining mark stays after its letter)."""
    characters = call("string_split", value, exp.Literal.string(""))
    return call("array_to_string", call("list_reverse", characters), exp.Literal.string(""))


def space() -> exp.Expr:
    return exp.Literal.string(" ")


def empty() -> exp.Expr:
    return exp.Literal.string("")


def as_date(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("DATE"))


# sql/decimals.half_way's internal last-digit test (sql/portable/division.py), not a row's.
HALF_WAY_PATTERN = "5(E[-+]?[0-9]+)?$"


def pattern_text(node: exp.Expr) -> str:
    assert isinstance(node, exp.Literal)
    return str(node.this)


def rlike(value: exp.Expr, pattern: exp.Expr) -> exp.Expr:
    """Whether the pattern is found anywhere in the string (Matcher.find), in both."""
    translated = translate(pattern_text(pattern), end_may_move=True)
    return call("regexp_matches", value, exp.Literal.string(translated.text))


def regexp_group(value: exp.Expr, pattern: exp.Expr, group: exp.Expr) -> exp.Expr:
    """The group of the first match, '' without a match or where the group took no part,
    in both; a group past the pattern's raises in Spark: refused."""
    translated = translate(pattern_text(pattern), end_may_move=False)
    if int(pattern_text(group)) > translated.groups:
        raise Untranslatable(f"group {pattern_text(group)} of a pattern of {translated.groups}")
    return call("regexp_extract", value, exp.Literal.string(translated.text), group)


def regexp_replaced(value: exp.Expr, pattern: exp.Expr, by: exp.Expr) -> exp.Expr:
    """Every match replaced (Matcher.replaceAll; RE2's global replace)."""
    translated = translate(pattern_text(pattern), end_may_move=False)
    if translated.empty:
        raise Untranslatable("a pattern that matches the empty string (Java replaces empty "
                             "matches after a match, RE2 does not)")  # fmt: skip
    text = replacement(pattern_text(by), translated.groups)
    return call("regexp_replace", value, exp.Literal.string(translated.text),
                exp.Literal.string(text), exp.Literal.string("g"))  # fmt: skip


REGEX = "a literal Java pattern in the subset RE2 matches alike (sql/regex.py)"
DATETIME = "a literal Java date-time pattern of the letters sql/datetime_patterns.py admits"


def raising_where(condition: exp.Expr, why: str, computed: exp.Expr) -> exp.Expr:
    """`computed`, except that DuckDB raises (and Spark computes the refresh) where
    `condition` holds: the rows on which the engines would differ."""
    stop = call("error", exp.Literal.string(why))
    return exp.Case(ifs=[exp.If(this=condition, true=stop)], default=computed)


def _years_within(value: exp.Expr, first: int, why: str, computed: exp.Expr) -> exp.Expr:
    """`computed` for years `first`-9999 of `value`; other years raise in DuckDB."""
    year = call("year", value.copy())
    outside = exp.Not(this=exp.Between(this=year, low=num(first), high=num(9999)))
    return raising_where(outside, why, computed)


def date_format(value: exp.Expr, pattern: exp.Expr) -> exp.Expr:
    """strftime of the translated pattern; a year outside 1000-9999 raises in DuckDB
    (Spark computes the refresh) where the pattern prints the year."""
    translated = strftime_of(pattern_text(pattern))
    formatted = call("strftime", value, exp.Literal.string(translated.text))
    if not translated.year:
        return formatted
    return _years_within(value, 1000, "a year date_format prints otherwise", formatted)


def pad(name: str, left: bool) -> Function:
    return Function(
        name,
        exp.Pad,
        (
            Argument("this", STRINGS),
            Argument("expression", INTEGERS, literal_int(0), "a literal >= 0"),
            Argument(
                "fill_pattern",
                STRINGS,
                literal_string(True),
                "a non-empty literal",
                optional=True,
                absent=space,
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
    return raising_where(other, "case mapping of non-ASCII text", computed)


def initcap(value: exp.Expr) -> exp.Expr:
    """Spark lower-cases the string, then title-cases its first character and each one
    after an ASCII space: the words split at each space, each one's first character
    upper-cased (ASCII text only, where both engines' case mappings agree)."""
    word = exp.column("w")
    titled = call("concat", call("upper", call("substring", word, num(1), num(1))),
                  call("substring", word.copy(), num(2)))  # fmt: skip
    words = call("string_split", call("lower", value), space())
    each = exp.Lambda(this=titled, expressions=[exp.to_identifier("w")])
    return ascii_only(value, call("array_to_string", call("list_transform", words, each),
                                  space()))  # fmt: skip


# Spark's names of the days (DateTimeUtils.getDayOfWeekFromString), as ISO day numbers.
DAYS = {name: n for n, names in enumerate(
    (("MO", "MON", "MONDAY"), ("TU", "TUE", "TUESDAY"), ("WE", "WED", "WEDNESDAY"),
     ("TH", "THU", "THURSDAY"), ("FR", "FRI", "FRIDAY"), ("SA", "SAT", "SATURDAY"),
     ("SU", "SUN", "SUNDAY")), start=1) for name in names}  # fmt: skip


def day_name(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and node.this.upper() in DAYS


def next_day(date: exp.Expr, day: exp.Expr) -> exp.Expr:
    """The first date after `date` on that day: `date + ((day - isodow(date) + 6) % 7 + 1)`
    (Spark: `start + 1 + ((dow - 1 - start) % 7 + 7) % 7` in days since the epoch)."""
    assert isinstance(day, exp.Literal)
    ahead = minus(num(DAYS[day.this.upper()] + 6), call("isodow", date))
    days = exp.Cast(this=plus(mod(ahead, num(7)), num(1)), to=exp.DataType.build("INT"))
    return plus(date.copy(), days)


def one_character(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and node.is_string and len(node.this) == 1


def substring_index(value: exp.Expr, delimiter: exp.Expr, count: exp.Expr) -> exp.Expr:
    """Before the count-th delimiter (after the count-th from the end when negative), ''
    for 0, the whole string with fewer: the split string's first (last) count parts
    joined again. A one-character delimiter: Spark counts overlapping occurrences of
    longer ones, a split does not."""
    parts = call("string_split", value, delimiter)
    number = int_value(count)
    assert number is not None
    kept = (call("list_slice", parts, num(1), count) if number >= 0
            else call("list_slice", parts, count, num(-1)))  # fmt: skip
    return call("array_to_string", kept, delimiter.copy())


def _seconds_of_day(value: exp.Expr) -> exp.Expr:
    """Whole seconds since the local day began (the session zone's midnight), as Spark
    counts them: an instant's difference, so a DST day's 03:00 is 7,200 s after its
    midnight in New York, not 10,800."""
    midnight = exp.Cast(this=exp.Cast(this=value.copy(), to=exp.DataType.build("DATE")),
                        to=exp.DataType.build("TIMESTAMPTZ"))  # fmt: skip
    elapsed = minus(call("epoch_us", value), call("epoch_us", midnight))
    return exp.Paren(this=exp.IntDiv(this=exp.Paren(this=elapsed), expression=num(1_000_000)))


def months_between(later: exp.Expr, earlier: exp.Expr, round_off: exp.Expr) -> exp.Expr:
    """Spark 3.5's DateTimeUtils.monthsBetween over the local dates: whole months when the
    days of the month are equal or both the last, else the months plus the difference in
    seconds (days apart, and seconds since each local midnight) over 31 days' seconds, in
    DOUBLE (each step one IEEE operation on exact integers: both engines round alike),
    then (round_off) Java's Math.round(diff * 1e8) / 1e8, Math.round being floor(x + 1/2)
    exactly: the floor, plus one where x less its floor (exact) is at least 1/2."""
    months = [exp.Paren(this=plus(exp.Mul(this=call("year", v), expression=num(12)),
                                  call("month", v.copy())))
              for v in (later, earlier)]  # fmt: skip
    month_diff = as_double(exp.Paren(this=minus(*months)))
    days = [call("day", v.copy()) for v in (later, earlier)]
    lasts = [exp.EQ(this=call("day", v.copy()), expression=call("day", call("last_day", v.copy())))
             for v in (later, earlier)]  # fmt: skip
    whole = exp.or_(exp.EQ(this=days[0], expression=days[1]), exp.and_(*lasts))
    seconds = plus(
        exp.Mul(this=exp.Paren(this=minus(days[0].copy(), days[1].copy())), expression=num(86400)),
        exp.Paren(this=minus(_seconds_of_day(later), _seconds_of_day(earlier))),
    )
    diff = plus(month_diff.copy(), exp.Div(this=as_double(seconds),
                                            expression=as_double(num(2678400))))  # fmt: skip
    scaled = exp.Mul(this=exp.Paren(this=diff.copy()), expression=as_double(num(100000000)))
    floor = call("floor", scaled)
    up = exp.GTE(
        this=minus(scaled.copy(), floor.copy()), expression=as_double(exp.Literal.number("0.5"))
    )
    rounded = exp.Div(
        this=exp.Case(ifs=[exp.If(this=up, true=plus(floor.copy(), num(1)))], default=floor.copy()),
        expression=as_double(num(100000000)),
    )
    # round_off: a literal (its row admits no other)
    computed = rounded if isinstance(round_off, exp.Boolean) and round_off.this else diff
    return exp.Case(ifs=[exp.If(this=whole, true=month_diff)], default=computed)


# extract(field FROM x) and date_part('field', x): Spark's fields, as the function each one
# is (DateTimeUtils / DatePart: year(x), ...); SECOND (a DECIMAL with the fraction) and
# the ISO and epoch fields are not among them.
_FIELDS: dict[str, type[exp.Expr]] = {
    **dict.fromkeys(("YEAR", "Y", "YEARS", "YR", "YRS"), exp.Year),
    **dict.fromkeys(("QUARTER", "QTR"), exp.Quarter),
    **dict.fromkeys(("MONTH", "MON", "MONS", "MONTHS"), exp.Month),
    **dict.fromkeys(("WEEK", "W", "WEEKS"), exp.WeekOfYear),
    **dict.fromkeys(("DAY", "D", "DAYS"), exp.Day),
    **dict.fromkeys(("DAYOFWEEK", "DOW"), exp.DayOfWeek),
    "DOY": exp.DayOfYear,
    **dict.fromkeys(("HOUR", "H", "HOURS", "HR", "HRS"), exp.Hour),
    **dict.fromkeys(("MINUTE", "M", "MIN", "MINS", "MINUTES"), exp.Minute),
}


def _field(name: str, value: exp.Expr) -> exp.Expr:
    part = _FIELDS.get(name.upper())
    if part is None:
        raise Untranslatable(f"the field {name!r}")
    return part(this=value.copy())


def extract_tree(node: exp.Expr) -> exp.Expr:
    """extract(field FROM x) is Spark's function of the field: year(x), month(x), ..."""
    field = node.this
    return _field(field.name if isinstance(field, exp.Var | exp.Literal) else "", node.expression)


def date_part_tree(node: exp.Expr) -> exp.Expr:
    """date_part('field', x) is extract(field FROM x)."""
    field, value = [*node.expressions, None, None][:2]
    if not (isinstance(field, exp.Literal) and field.is_string) or value is None:
        raise Untranslatable("a field that is not a literal")
    return _field(field.this, value)


def is_null_tree(node: exp.Expr) -> exp.Expr:
    """isnull(x) is `x IS NULL`."""
    return exp.Is(this=node.expressions[0].copy(), expression=exp.null())


def is_not_null_tree(node: exp.Expr) -> exp.Expr:
    """isnotnull(x) is `NOT x IS NULL`."""
    return exp.Not(this=is_null_tree(node))


def ilike_tree(node: exp.Expr) -> exp.Expr:
    """`s ILIKE p` is Spark's `lower(s) LIKE lower(p)`: a literal ASCII pattern lowered
    here (LIKE needs a literal; other text is refused by lower's row: case mapping)."""
    pattern = node.expression
    if isinstance(pattern, exp.Literal) and pattern.is_string and pattern.this.isascii():
        pattern = exp.Literal.string(pattern.this.lower())
    else:
        pattern = exp.Lower(this=pattern.copy())
    return exp.Like(this=exp.Lower(this=node.this.copy()), expression=pattern)


def timestamp_text(value: exp.Expr) -> exp.Expr:
    """CAST(ts AS STRING) as Spark writes it: `yyyy-MM-dd HH:mm:ss` in the session zone,
    then the fraction of a second without its trailing zeros (none when whole); a year
    outside 1-9999 raises (Spark computes it)."""
    text = call("strftime", value, exp.Literal.string("%Y-%m-%d %H:%M:%S"))
    micros = mod(call("microsecond", value.copy()), num(1_000_000))
    digits = call("lpad", exp.Cast(this=micros.copy(), to=exp.DataType.build("VARCHAR")),
                  num(6), exp.Literal.string("0"))  # fmt: skip
    fraction = exp.Case(
        ifs=[exp.If(this=exp.EQ(this=micros, expression=num(0)), true=empty())],
        default=exp.DPipe(this=exp.Literal.string("."), safe=False,
                          expression=call("rtrim", digits, exp.Literal.string("0"))),
    )  # fmt: skip
    joined = exp.DPipe(this=text, expression=exp.Paren(this=fraction), safe=False)
    return _years_within(value, 1, "a year CAST(ts AS STRING) writes otherwise", joined)
