"""Java regular expressions (Spark's) as RE2 patterns (DuckDB's) that match the same text,
for the subset where that is sure; anything else is refused with the reason.

Spark compiles a pattern with `java.util.regex.Pattern` and no flags; DuckDB with RE2. Both
are leftmost-first (the same match and the same groups, as a backtracking engine finds
them) on what is admitted here:

- literal characters, escaped punctuation, `\\t \\n \\r \\f`;
- `.`: Java's matches any character but the line terminators `\\n \\r \\u0085 \\u2028
  \\u2029`, RE2's all but `\\n`: written out as that class;
- `\\d \\D \\w \\W`: ASCII in both (Java without UNICODE_CHARACTER_CLASS); `\\s \\S`: Java's
  space also holds `\\x0B`, RE2's not: written out (`\\S` not inside a class);
- classes `[...]` and `[^...]` of characters, ranges and the escapes above (Java's unions,
  intersections `&&` and nested classes refused);
- groups `(...)` and `(?:...)`, alternation, greedy and lazy quantifiers `* + ? {n} {n,}
  {n,m}` (at most 1000: RE2's limit; possessive quantifiers refused);
- `^`: the input's start in both; `$`: Java's also matches before a final line break, so
  where only whether the pattern matches counts (RLIKE) it is written out as an optional
  final line break then the end; elsewhere (it would change the matched text) refused.

Replacing every match differs where a pattern can match the empty string (Java also
replaces the empty match right after a non-empty one: `bab` with `a*` is `XbXXbX` in Java,
`XbXbX` in RE2): `Re2Pattern.empty` says so, and regexp_replace refuses such patterns.

Refused: back-references, look-around, named groups, inline flags (`(?i)`: Java folds case
in ASCII, RE2 in Unicode), `\\b` (Java's word boundary is not its `\\w`), `\\p{...}`,
`\\Q...\\E`, `\\uXXXX`, `\\x`, octal escapes and the other Java-only escapes.
"""

from __future__ import annotations

from dataclasses import dataclass

_TERMINATORS = "\\n\\r\\x{85}\\x{2028}\\x{2029}"
_DOT = f"[^{_TERMINATORS}]"
_SPACE = "\\t\\n\\x0B\\f\\r "
_FINAL_LINE_BREAK = f"(?:\\r\\n|[{_TERMINATORS}])?$"
_COPIED_ESCAPES = frozenset("dDwWtnrf")
_MAX_REPEAT = 1000


class Untranslatable(ValueError):
    """A Java pattern the gate does not translate (the reason)."""


@dataclass(frozen=True)
class Re2Pattern:
    text: str  # RE2 syntax
    groups: int  # capturing groups
    empty: bool  # it can match the empty string (somewhere: `^` is its only zero-width atom)


def translate(pattern: str, *, end_may_move: bool) -> Re2Pattern:
    """`pattern` (Java) as an RE2 pattern matching the same text. `end_may_move`: only
    whether it matches counts (a `$` may then consume a final line break)."""
    return _Translator(pattern, end_may_move).run()


class _Translator:
    def __init__(self, pattern: str, end_may_move: bool) -> None:
        self.pattern = pattern
        self.end_may_move = end_may_move
        self.at = 0
        self.out: list[str] = []
        self.groups = 0
        # Whether each atom of the current alternative can match empty, per open group
        # (innermost last), and whether an earlier alternative of that group can.
        self.atoms: list[list[bool]] = [[]]
        self.alternatives: list[bool] = [False]

    def run(self) -> Re2Pattern:
        quantifiable = False
        while self.at < len(self.pattern):
            char = self.pattern[self.at]
            self.at += 1
            if char in "*+?{":
                if not quantifiable:
                    raise Untranslatable(f"a quantifier with nothing to repeat at {self.at}")
                if self._quantifier(char):  # at least 0: the atom may match empty
                    self.atoms[-1][-1] = True
                quantifiable = False
                continue
            quantifiable = True
            if char == "\\":
                self.out.append(self._escape(in_class=False))
            elif char == ".":
                self.out.append(_DOT)
            elif char == "[":
                self.out.append(self._class())
            elif char == "(":
                self._group()
                self.atoms.append([])
                self.alternatives.append(False)
                quantifiable = False
                continue
            elif char == ")":
                if len(self.atoms) == 1:
                    raise Untranslatable("an unopened group")
                self.out.append(char)
                empty = self._alternatives_end()
                self.atoms[-1].append(empty)
                continue
            elif char == "|":
                self.out.append(char)
                self.alternatives[-1] |= all(self.atoms[-1])
                self.atoms[-1] = []
                quantifiable = False
                continue
            elif char == "^":
                self.out.append("^")
                self.atoms[-1].append(True)
                quantifiable = False
                continue
            elif char == "$":
                if not self.end_may_move:
                    raise Untranslatable("$ (Java's also matches before a final line break)")
                self.out.append(_FINAL_LINE_BREAK)
                self.atoms[-1].append(True)
                quantifiable = False
                continue
            elif char in "]}":
                self.out.append("\\" + char)
            else:
                self.out.append(char)
            self.atoms[-1].append(False)  # a character
        if len(self.atoms) != 1:
            raise Untranslatable("an unclosed group")
        empty = self._alternatives_end()
        return Re2Pattern("".join(self.out), self.groups, empty)

    def _alternatives_end(self) -> bool:
        """Close the innermost alternatives (a group's, or the pattern's): whether one of
        them can match empty."""
        earlier, last = self.alternatives.pop(), self.atoms.pop()
        return earlier or all(last)

    def _escape(self, in_class: bool) -> str:
        if self.at >= len(self.pattern):
            raise Untranslatable("a pattern ending in a backslash")
        char = self.pattern[self.at]
        self.at += 1
        if char in _COPIED_ESCAPES:
            return "\\" + char
        if char == "s":
            return _SPACE if in_class else f"[{_SPACE}]"
        if char == "S" and not in_class:
            return f"[^{_SPACE}]"
        if char.isascii() and not char.isalnum():
            return "\\" + char
        raise Untranslatable(f"the escape \\{char} (Java and RE2 differ, or RE2 lacks it)")

    def _class(self) -> str:
        parts = ["["]
        if self.pattern.startswith("^", self.at):
            parts.append("^")
            self.at += 1
        if self.pattern.startswith("]", self.at):
            raise Untranslatable("a class starting with ]")
        while True:
            if self.at >= len(self.pattern):
                raise Untranslatable("an unclosed class")
            char = self.pattern[self.at]
            self.at += 1
            if char == "]":
                break
            if char == "[" or self.pattern.startswith("&&", self.at - 1):
                raise Untranslatable("a nested class or class intersection (Java only)")
            if char == "\\":
                parts.append(self._escape(in_class=True))
            else:
                parts.append(char)
        if len(parts) == 1 or parts == ["[", "^"]:
            raise Untranslatable("an empty class")
        return "".join(parts) + "]"

    def _group(self) -> None:
        if self.pattern.startswith("?", self.at):
            if not self.pattern.startswith("?:", self.at):
                raise Untranslatable("look-around, a named group or inline flags")
            self.at += 2
            self.out.append("(?:")
            return
        self.groups += 1
        self.out.append("(")

    def _quantifier(self, char: str) -> bool:
        """Copy a quantifier; whether it admits zero repetitions."""
        if char == "{":
            close = self.pattern.find("}", self.at)
            body = self.pattern[self.at : close] if close >= 0 else ""
            low, _, high = body.partition(",")
            if not low.isdigit() or (high and not high.isdigit()):
                raise Untranslatable(f"the repetition {{{body}")
            if max(int(low), int(high or 0)) > _MAX_REPEAT or (high and int(high) < int(low)):
                raise Untranslatable(f"the repetition {{{body}}}")
            self.at = close + 1
            char = "{" + body + "}"
            zero = int(low) == 0
        else:
            zero = char in "*?"
        if self.pattern.startswith("+", self.at):
            raise Untranslatable("a possessive quantifier (Java only)")
        lazy = self.pattern.startswith("?", self.at)
        self.at += lazy
        self.out.append(char + ("?" if lazy else ""))
        return zero


def replacement(text: str, groups: int) -> str:
    """A Java replacement string (`$n` a group, `\\x` the character x) as RE2's (`\\n` a
    group, `\\\\` a backslash)."""
    out, at = [], 0
    while at < len(text):
        char = text[at]
        at += 1
        if char == "\\":
            if at >= len(text):
                raise Untranslatable("a replacement ending in a backslash")
            char = text[at]
            at += 1
            out.append("\\\\" if char == "\\" else char)
        elif char == "$":
            digit = text[at : at + 1]
            if not digit.isdigit() or int(digit) > groups or text[at + 1 : at + 2].isdigit():
                raise Untranslatable("a replacement's $ other than $0-$9 of an existing group")
            out.append("\\" + digit)
            at += 1
        else:
            out.append(char)
    return "".join(out)
