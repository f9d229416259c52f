"""What every catalog kind's view store offers icemv: the `ViewCatalog` protocol.

Views are kept as icemv's own `ViewMetadata` (not pyiceberg's view model), because that
model drops `storage-table` and other engines' fields; each store maps its catalog's
storage (JDBC rows, REST endpoints) onto these six calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from icemv.format.view_metadata import ViewMetadata
from icemv.identifiers import Identifier


@dataclass(frozen=True)
class LoadedView:
    identifier: Identifier
    metadata_location: str
    metadata: ViewMetadata


class ViewCatalog(Protocol):
    def load(self, identifier: Identifier) -> LoadedView:
        """The view's current metadata; raises `NoSuchViewError`."""
        ...

    def exists(self, identifier: Identifier) -> bool: ...

    def list(self, namespace: tuple[str, ...] | None = None) -> list[Identifier]:
        """Views of one namespace, or of every namespace when None; sorted."""
        ...

    def create(self, identifier: Identifier, metadata: ViewMetadata) -> LoadedView:
        """Raises `ViewAlreadyExistsError` when the name is taken."""
        ...

    def replace(self, view: LoadedView, metadata: ViewMetadata) -> LoadedView:
        """Make `metadata`'s current version current; returns what the catalog now holds.

        Raises `ViewCommitConflictError` when the catalog detects a concurrent change.
        """
        ...

    def drop(self, identifier: Identifier) -> None:
        """Raises `NoSuchViewError`."""
        ...
