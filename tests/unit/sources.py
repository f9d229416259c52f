"""An in-memory `SourceResolver` for the pure SQL passes: no catalog, no JVM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from icemv.identifiers import Identifier
from icemv.sql.sources import TableInfo, ViewInfo


@dataclass
class Sources:
    """Tables by name (`ns.table` -> columns), views by name; snapshot ids are fixed."""

    tables: Mapping[str, Sequence[str]] = field(default_factory=dict)
    views: Mapping[str, ViewInfo] = field(default_factory=dict)
    catalog_name: str = "lake"

    def table(self, identifier: Identifier) -> TableInfo | None:
        columns = self.tables.get(identifier.dotted)
        if columns is None:
            return None
        return TableInfo(identifier, f"uuid-{identifier.name}", 100, tuple(columns))

    def view(self, identifier: Identifier) -> ViewInfo | None:
        return self.views.get(identifier.dotted)


def ident(text: str) -> Identifier:
    namespace, name = text.split(".", 1)
    return Identifier((namespace,), name)
