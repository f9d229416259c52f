"""Identifiers of catalog objects, and the only way they reach SQL text: quoted."""

from __future__ import annotations

from dataclasses import dataclass

from icemv.errors import InvalidIdentifierError


@dataclass(frozen=True, order=True)
class Identifier:
    namespace: tuple[str, ...]
    name: str

    def __post_init__(self) -> None:
        if not self.namespace or not all(self.namespace) or not self.name:
            raise InvalidIdentifierError(f"incomplete identifier {self.dotted!r}")

    @classmethod
    def parse(
        cls, text: str, default_namespace: str, catalog_name: str | None = None
    ) -> Identifier:
        """`name`, `ns.name` or `catalog.ns.name` (the catalog part must be ours), parsed as
        Spark parses a multipart name: a backtick-quoted part is one identifier without its
        quotes (doubled backticks stand for one), so `` ns.`a.b` `` names the table `a.b`."""
        parts = split_name(text)
        if catalog_name is not None and len(parts) > 2 and parts[0] == catalog_name:
            parts = parts[1:]
        if len(parts) == 1:
            return cls(tuple(default_namespace.split(".")), parts[0])
        return cls(tuple(parts[:-1]), parts[-1])

    @property
    def dotted(self) -> str:
        return ".".join((*self.namespace, self.name))

    @property
    def namespace_str(self) -> str:
        return ".".join(self.namespace)

    def as_tuple(self) -> tuple[str, ...]:
        return (*self.namespace, self.name)

    def quoted(self, catalog_name: str | None = None) -> str:
        """Spark SQL text for this identifier, every part backquoted."""
        parts = self.as_tuple() if catalog_name is None else (catalog_name, *self.as_tuple())
        return ".".join(quote_part(part) for part in parts)

    def storage_default(self) -> Identifier:
        return Identifier(self.namespace, f"{self.name}__storage")

    def __str__(self) -> str:
        return self.dotted


def quote_part(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


_VALID_NAME = (
    "expected name, namespace.name or catalog.namespace.name: parts of letters, digits and _"
    " separated by dots; quote a part with backticks to use dots or other characters (`a.b`)"
)


def split_name(text: str) -> list[str]:
    """The parts of a dotted name as Spark's parser reads them; InvalidIdentifierError (one
    line saying what a valid name looks like) for anything else."""
    parts: list[str] = []
    i, n = 0, len(text)

    def invalid() -> InvalidIdentifierError:
        return InvalidIdentifierError(f"invalid name {text!r}: {_VALID_NAME}")

    while True:
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == "`":
            part, i = [], i + 1
            while True:
                if i >= n:
                    raise invalid()  # unbalanced backtick
                if text[i] == "`":
                    if i + 1 < n and text[i + 1] == "`":
                        part.append("`")
                        i += 2
                        continue
                    i += 1
                    break
                part.append(text[i])
                i += 1
            if not part:
                raise invalid()
            parts.append("".join(part))
        else:
            start = i
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            if i == start:
                raise invalid()
            parts.append(text[start:i])
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return parts
        if text[i] != ".":
            raise invalid()
        i += 1
