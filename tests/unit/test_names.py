"""Names from the command line and config parse as Spark parses a multipart name."""

from __future__ import annotations

import pytest

from icemv.errors import InvalidIdentifierError
from icemv.identifiers import Identifier, split_name


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("t", ["t"]),
        ("ns.t", ["ns", "t"]),
        ("fx.`odd`", ["fx", "odd"]),
        ("`a.b`.c", ["a.b", "c"]),
        ("ns.`we``ird`", ["ns", "we`ird"]),
        ("ns.`with space`", ["ns", "with space"]),
        (" ns . t ", ["ns", "t"]),
        ("Ns.T_1", ["Ns", "T_1"]),
    ],
)
def test_parts(text: str, parts: list[str]) -> None:
    assert split_name(text) == parts


@pytest.mark.parametrize(
    "text", ["", "a..b", "a.", ".a", "`a", "a`", "``", "a b", "a-b", "a.b;DROP TABLE x", "`a`b"]
)
def test_what_cannot_be_parsed_says_what_a_valid_name_looks_like(text: str) -> None:
    with pytest.raises(InvalidIdentifierError) as raised:
        split_name(text)
    message = str(raised.value)
    assert message.startswith(f"invalid name {text!r}: expected name, namespace.name")
    assert "backticks" in message and "\n" not in message


def test_identifiers_from_quoted_parts() -> None:
    odd = Identifier.parse("fx.`odd`", "default")
    assert odd == Identifier(("fx",), "odd")
    assert odd.storage_default() == Identifier(("fx",), "odd__storage")
    assert Identifier.parse("`a.b`.c", "default") == Identifier(("a.b",), "c")
    assert Identifier.parse("lake.ns.t", "default", "lake") == Identifier(("ns",), "t")
    assert Identifier.parse("t", "analytics") == Identifier(("analytics",), "t")
    assert Identifier.parse("`a.b`.c", "default").quoted() == "`a.b`.`c`"
