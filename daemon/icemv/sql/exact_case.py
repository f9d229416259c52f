"""Exact-case names, put back after sqlglot's `qualify` lowercased them (issue 12 item 11)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from icemv.sql.sources import TableInfo


@dataclass(frozen=True)
class ExactCase:
    """Exact-case names to put back after `qualify`.

    Spark's sqlglot dialect is case-insensitive, so `qualify` lowercases every identifier,
    quoted or not. Spark resolves columns case-insensitively, but catalog table names are
    case-sensitive, and storage columns keep the case the view SQL gave them: tables,
    columns and output aliases get their exact names back.
    """

    tables: dict[tuple[str, str], TableInfo]  # (namespace, name), lowercased
    aliases: dict[str, str]  # output aliases in the view SQL, lowercased -> as written

    @classmethod
    def of(cls, query: exp.Query, resolved: list[TableInfo]) -> ExactCase | None:
        tables = {
            (table.identifier.namespace_str.lower(), table.identifier.name.lower()): table
            for table in resolved
        }
        if len(tables) != len(resolved):
            return None
        aliases = {a.alias.lower(): a.alias for a in query.find_all(exp.Alias) if a.alias}
        return cls(tables, aliases)

    def restore(self, query: exp.Query) -> None:
        by_alias: dict[str, TableInfo] = {}
        for table in query.find_all(exp.Table):
            info = self.tables.get((table.db.lower(), table.name.lower()))
            if info is None:
                continue
            table.set("this", exp.to_identifier(info.identifier.name, quoted=True))
            table.set("db", exp.to_identifier(info.identifier.namespace_str, quoted=True))
            by_alias[table.alias_or_name] = info
        for column in query.find_all(exp.Column):
            info = by_alias.get(column.table)
            if info is None:
                continue
            name = next((c for c in info.columns if c.lower() == column.name.lower()), None)
            if name is not None:
                column.set("this", exp.to_identifier(name, quoted=True))
        for alias in query.find_all(exp.Alias):
            written = self.aliases.get(alias.alias.lower())
            inner = alias.this
            if (
                written is None
                and isinstance(inner, exp.Column)
                and inner.name.lower() == (alias.alias.lower())
            ):
                written = inner.name  # a bare column's generated alias: its exact name
            if written is not None:
                alias.set("alias", exp.to_identifier(written, quoted=True))
