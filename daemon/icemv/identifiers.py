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
        """`name`, `ns.name` or `catalog.ns.name` (the catalog part must be ours)."""
        parts = [part.strip() for part in text.strip().split(".")]
        if not text.strip() or any(not part for part in parts):
            raise InvalidIdentifierError(f"invalid name {text!r}")
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
