"""Namespace helpers that work on any pyiceberg catalog."""

from __future__ import annotations

import contextlib

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError


def ensure_namespace(catalog: Catalog, namespace: tuple[str, ...]) -> None:
    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace(namespace)


def all_namespaces(catalog: Catalog) -> list[tuple[str, ...]]:
    """Every namespace, nested ones included (REST lists one level per call)."""
    found: list[tuple[str, ...]] = []
    pending = [tuple(ns) for ns in catalog.list_namespaces()]
    while pending:
        namespace = pending.pop()
        found.append(namespace)
        pending += [
            tuple(ns) for ns in catalog.list_namespaces(namespace) if tuple(ns) != namespace
        ]
    return sorted(found)
