"""What the SQL passes need to know about a view's sources, behind a small protocol.

`sql/` does no catalog I/O: `analysis` and `pinning` ask a `SourceResolver` for tables
and views by name, and the caller decides how to load them (the refresh plan loads each
once per refresh; unit tests pass a mapping).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from icemv.identifiers import Identifier


@dataclass(frozen=True)
class TableInfo:
    identifier: Identifier
    uuid: str
    snapshot_id: int | None  # the current snapshot; None: no snapshot yet (empty)
    columns: tuple[str, ...]  # top-level column names, exact case, state columns aside
    # An MV storage table's hidden state columns (`_icemv_*`, sql/state.py): no query sees them.
    state_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class ViewInfo:
    identifier: Identifier
    uuid: str
    version_id: int
    default_namespace: tuple[str, ...]
    sql: str | None  # the Spark SQL representation, if any
    storage_table: Identifier | None  # set: a materialized view


class SourceResolver(Protocol):
    @property
    def catalog_name(self) -> str:
        """The catalog every source must be in (the MV's)."""
        ...

    def table(self, identifier: Identifier) -> TableInfo | None:
        """The table of that name, or None if there is none."""
        ...

    def view(self, identifier: Identifier) -> ViewInfo | None:
        """The view of that name, or None if there is none."""
        ...
