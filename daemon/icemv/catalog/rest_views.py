"""Iceberg views in a REST catalog, through the REST spec's view endpoints.

Create and load use the endpoints' JSON directly (pyiceberg's view model would drop
`storage-table` and unknown fields); a replace is a view commit, `POST .../views/{view}`,
whose only requirement is `assert-view-uuid`: the server does not detect a concurrent
replace, so the result is read from the commit's answer (what is current now).
The server drops the `storage-table` version field: the `icemv.storage-table` property
(see `spec.view_metadata`) carries the pointer across.

Loads send `If-None-Match` when the server gave the view an `ETag`, as table loads do.
The REST spec has that for tables only so far (apache/iceberg#15946 proposes it for
views; Gravitino serves it): a server without it sends no ETag, and every load is full.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from pyiceberg.catalog.rest import RestCatalog

from icemv.catalog.namespaces import all_namespaces
from icemv.catalog.rest_http import RestHttp, raise_for_status
from icemv.catalog.views import LoadedView
from icemv.errors import NoSuchViewError, ViewAlreadyExistsError, ViewCommitConflictError
from icemv.format.view_metadata import ViewMetadata, encode_view_version, view_metadata_from_json
from icemv.identifiers import Identifier

VIEWS = "namespaces/{namespace}/views"
VIEW = "namespaces/{namespace}/views/{name}"


class RestViewStore:
    def __init__(self, catalog: RestCatalog, http: RestHttp) -> None:
        self._catalog = catalog
        self._http = http
        self._etags: dict[Identifier, tuple[str, LoadedView]] = {}
        self._lock = threading.Lock()
        self.not_modified = 0  # view loads answered 304 (for tests and benchmarks)

    def load(self, identifier: Identifier) -> LoadedView:
        with self._lock:
            cached = self._etags.get(identifier)
        headers = {"If-None-Match": cached[0]} if cached else None
        response = self._http.request("GET", self._http.url(VIEW, identifier), headers=headers)
        if response.status_code == 404:
            with self._lock:
                self._etags.pop(identifier, None)
            raise NoSuchViewError(f"view {identifier} does not exist")
        if response.status_code == 304 and cached is not None:
            self.not_modified += 1
            return cached[1]  # immutable: shared as it is
        raise_for_status(response, f"load view {identifier}")
        view = _loaded(identifier, response.json())
        etag = response.headers.get("ETag")
        if etag:
            with self._lock:
                self._etags[identifier] = (etag, view)
        return view

    def exists(self, identifier: Identifier) -> bool:
        response = self._http.request("HEAD", self._http.url(VIEW, identifier))
        if response.status_code == 404:
            return False
        raise_for_status(response, f"check view {identifier}")
        return True

    def list(self, namespace: tuple[str, ...] | None = None) -> list[Identifier]:
        namespaces = [namespace] if namespace is not None else all_namespaces(self._catalog)
        found = []
        for ns in namespaces:
            for *parts, name in self._catalog.list_views(ns):
                found.append(Identifier(tuple(parts), name))
        return sorted(found)

    def create(self, identifier: Identifier, metadata: ViewMetadata) -> LoadedView:
        version = metadata.current_version
        request = {
            "name": identifier.name,
            "location": metadata.location,
            "schema": dict(metadata.schema(version.schema_id)),
            "view-version": encode_view_version(version),
            "properties": dict(metadata.properties),
        }
        url = self._http.url(VIEWS, namespace=self._http.namespace_path(identifier.namespace))
        response = self._http.request("POST", url, json=request)
        if response.status_code == 409:
            raise ViewAlreadyExistsError(f"{identifier} already exists")
        raise_for_status(response, f"create view {identifier}")
        return _loaded(identifier, response.json())

    def replace(self, view: LoadedView, metadata: ViewMetadata) -> LoadedView:
        """A view commit adding the new version (and its schema unless the view has it).

        The server reuses an existing identical schema or version instead of adding one,
        and then "-1" (last added) would be undefined: a known schema is referenced by its
        id, and every version carries a unique `icemv.replace-id` so it is always new.
        """
        version = metadata.current_version
        schema = dict(metadata.schema(version.schema_id))
        new_properties = dict(metadata.properties)
        removed = sorted(set(view.metadata.properties) - set(new_properties))
        updates: list[dict[str, Any]] = []
        schema_id = _same_schema_id(view.metadata, schema)
        if schema_id is None:
            updates.append({"action": "add-schema", "schema": schema})
            schema_id = -1  # the schema added by this commit
        summary = {**version.summary, "icemv.replace-id": str(uuid.uuid4())}
        updates += [
            {
                "action": "add-view-version",
                "view-version": {
                    **encode_view_version(version),
                    "schema-id": schema_id,
                    "summary": summary,
                },
            },
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": new_properties},
        ]
        if removed:
            updates.append({"action": "remove-properties", "removals": removed})
        request = {
            "identifier": {
                "namespace": list(view.identifier.namespace),
                "name": view.identifier.name,
            },
            "requirements": [{"type": "assert-view-uuid", "uuid": view.metadata.view_uuid}],
            "updates": updates,
        }
        response = self._http.request("POST", self._http.url(VIEW, view.identifier), json=request)
        if response.status_code == 404:
            raise NoSuchViewError(f"view {view.identifier} does not exist")
        if response.status_code == 409:
            raise ViewCommitConflictError(f"view {view.identifier} changed concurrently")
        raise_for_status(response, f"replace view {view.identifier}")
        return _loaded(view.identifier, response.json())

    def drop(self, identifier: Identifier) -> None:
        response = self._http.request("DELETE", self._http.url(VIEW, identifier))
        if response.status_code == 404:
            raise NoSuchViewError(f"view {identifier} does not exist")
        raise_for_status(response, f"drop view {identifier}")


def _same_schema_id(metadata: ViewMetadata, schema: dict[str, Any]) -> int | None:
    """The id of a schema the view already has with the same fields, if any."""
    for known in metadata.schemas:
        if known.get("fields") == schema.get("fields") and known.get(
            "identifier-field-ids", []
        ) == schema.get("identifier-field-ids", []):
            return int(known["schema-id"])
    return None


def _loaded(identifier: Identifier, body: dict[str, Any]) -> LoadedView:
    """A LoadViewResponse: `metadata-location` and the metadata itself, inline."""
    return LoadedView(
        identifier, str(body["metadata-location"]), view_metadata_from_json(body["metadata"])
    )
