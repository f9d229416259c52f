"""Java patterns as RE2 patterns (sql/regex.py): what is written out, what is refused.
Whether each admitted pattern matches alike is proven against Spark by
tests/test_function_corpus.py."""

from __future__ import annotations

import pytest

from icemv.sql.regex import Untranslatable, replacement, translate

TERMINATORS = "\\n\\r\\x{85}\\x{2028}\\x{2029}"


@pytest.mark.parametrize(
    ("java", "re2", "groups"),
    [
        ("abc", "abc", 0),
        ("a.c", f"a[^{TERMINATORS}]c", 0),
        ("\\d+-\\w*?", "\\d+-\\w*?", 0),
        ("a\\sb", "a[\\t\\n\\x0B\\f\\r ]b", 0),
        ("[\\s,]+", "[\\t\\n\\x0B\\f\\r ,]+", 0),
        ("[^a-z0-9_]", "[^a-z0-9_]", 0),
        ("(a|b)(?:c)(d){2,3}", "(a|b)(?:c)(d){2,3}", 2),
        ("^\\$\\.x]", "^\\$\\.x\\]", 0),
        ("ß日+", "ß日+", 0),
    ],
)
def test_the_subset_is_written_out_for_re2(java: str, re2: str, groups: int) -> None:
    translated = translate(java, end_may_move=False)
    assert (translated.text, translated.groups) == (re2, groups)


def test_dollar_only_where_the_match_alone_counts() -> None:
    assert translate("b$", end_may_move=True).text == f"b(?:\\r\\n|[{TERMINATORS}])?$"
    with pytest.raises(Untranslatable, match="final line break"):
        translate("b$", end_may_move=False)


@pytest.mark.parametrize(
    "java",
    ["(a)\\1", "(?=a)", "(?<n>a)", "(?i)a", "\\bword", "\\p{L}", "a*+", "\\Qa\\E", "\\u00e9",
     "[a[b]]", "[a-z&&[^b]]", "a{1001}", "a{2,1}", "*a", "a{x}", "[]a]", "[\\S]", "a\\"],
)  # fmt: skip
def test_what_java_and_re2_read_differently_is_refused(java: str) -> None:
    with pytest.raises(Untranslatable):
        translate(java, end_may_move=True)


def test_replacements() -> None:
    assert replacement("[$1]", 1) == "[\\1]"
    assert replacement("a\\$b\\\\c", 0) == "a$b\\\\c"
    for bad in ("$2", "$x", "${n}", "$12", "a\\"):
        with pytest.raises(Untranslatable):
            replacement(bad, 1)


@pytest.mark.parametrize(
    ("java", "empty"),
    [("a*", True), ("x?", True), ("a", False), ("(a|)", True), ("(a|b)+", False),
     ("(?:ab)*c", False), ("^", True), ("a{0,2}", True), ("a{1,2}", False), ("(a*)b", False),
     ("b|a*", True), ("[a-c]+", False)],
)  # fmt: skip
def test_whether_a_pattern_can_match_the_empty_string(java: str, empty: bool) -> None:
    assert translate(java, end_may_move=False).empty is empty
