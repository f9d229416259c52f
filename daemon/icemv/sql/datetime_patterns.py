"""Spark's date-time patterns (Java's DateTimeFormatter letters, as `date_format` reads
them) written as DuckDB's strftime formats, for the letters both print alike.

Admitted, each run of one letter as counted: `yyyy` and `y` (the year, as `%Y` for years
1000-9999: the gate's tree raises on others, where Java pads or signs differently), `yy`
(`%y`), `MMMM` `MMM` `MM` `M` (month name, its abbreviation, 2 digits, digits), `dd` `d`,
`HH` `H`, `hh` `h` and `a` (12-hour clock and AM/PM), `mm` `m`, `ss` `s`, `SSS` and
`SSSSSS` (the fraction cut to milli- or microseconds), `EEEE` and `E`/`EE`/`EEE` (the day's
name, abbreviated), `DDD` and `D` (day of the year). Names are English in both (Spark's
default locale). Text in single quotes ('' a quote) and any character that is not an
ASCII letter print as themselves. Anything else is refused (`Untranslatable`): week-based
fields, zones and offsets, eras, quarters, optional sections, a letter counted otherwise.

Pure: text only.
"""

from __future__ import annotations

from dataclasses import dataclass

from icemv.sql.regex import Untranslatable

# (letter, count) -> strftime directive.
_DIRECTIVES = {
    ("y", 4): "%Y", ("y", 1): "%Y", ("y", 2): "%y",
    ("M", 4): "%B", ("M", 3): "%b", ("M", 2): "%m", ("M", 1): "%-m",
    ("d", 2): "%d", ("d", 1): "%-d",
    ("H", 2): "%H", ("H", 1): "%-H", ("h", 2): "%I", ("h", 1): "%-I", ("a", 1): "%p",
    ("m", 2): "%M", ("m", 1): "%-M", ("s", 2): "%S", ("s", 1): "%-S",
    ("S", 3): "%g", ("S", 6): "%f",
    ("E", 4): "%A", ("E", 3): "%a", ("E", 2): "%a", ("E", 1): "%a",
    ("D", 3): "%j", ("D", 1): "%-j",
}  # fmt: skip


@dataclass(frozen=True)
class Strftime:
    text: str  # DuckDB's format
    year: bool  # prints the year: a value outside 1000-9999 must not be formatted


def strftime_of(pattern: str) -> Strftime:
    """`pattern` (Spark's) as DuckDB's strftime format, or Untranslatable."""
    out: list[str] = []
    year = False
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "'":
            end = at + 1
            text: list[str] = []
            while True:
                if end >= len(pattern):
                    raise Untranslatable("an unterminated quote")
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            out.append(("".join(text) or "'").replace("%", "%%"))
            at = end + 1
            continue
        if char.isascii() and char.isalpha():
            count = 1
            while at + count < len(pattern) and pattern[at + count] == char:
                count += 1
            directive = _DIRECTIVES.get((char, count))
            if directive is None:
                raise Untranslatable(f"the pattern letters {char * count!r}")
            year |= char == "y"
            out.append(directive)
            at += count
            continue
        if char in "[]{}#":  # optional sections and reserved characters
            raise Untranslatable(f"the pattern character {char!r}")
        out.append("%%" if char == "%" else char)
        at += 1
    if not out:
        raise Untranslatable("an empty pattern")
    return Strftime("".join(out), year)
