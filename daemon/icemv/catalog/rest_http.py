"""The one place that reaches into pyiceberg's RestCatalog internals.

pyiceberg 0.12 has no view replace (a REST view commit), and its view model drops fields
icemv needs, and its `load_table` cannot send `If-None-Match`. Those calls go through the
catalog's own authenticated `requests` session (`_session`: OAuth2 / token / SigV4 and
extra headers already applied by pyiceberg's auth manager) and its URL builder, so auth is
never hand-rolled. If pyiceberg renames these internals, only this module changes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests
from pyiceberg.catalog.rest import RestCatalog, TableResponse
from pyiceberg.table import Table

from icemv.errors import RestCatalogError
from icemv.identifiers import Identifier


class RestHttp:
    def __init__(self, catalog: RestCatalog) -> None:
        self._catalog = catalog

    def url(self, template: str, identifier: Identifier | None = None, **params: str) -> str:
        """`template` under /v1/{prefix}/, `{namespace}` and `{name}` filled from `identifier`."""
        if identifier is not None:
            params["namespace"] = self.namespace_path(identifier.namespace)
            params["name"] = quote(identifier.name, safe="")
        return self._catalog.url(template, prefixed=True, **params)

    def namespace_path(self, namespace: tuple[str, ...]) -> str:
        encoded: str = self._catalog._encode_namespace_path(namespace)
        return encoded

    def request(
        self,
        method: str,
        url: str,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        session: requests.Session = self._catalog._session
        return session.request(method, url, json=json, headers=headers)

    def table(self, identifier: Identifier, response_text: str) -> Table:
        """A pyiceberg Table from a loadTable response body (FileIO set up as pyiceberg does)."""
        response = TableResponse.model_validate_json(response_text)
        table: Table = self._catalog._response_to_table(identifier.as_tuple(), response)
        return table


def raise_for_status(response: requests.Response, what: str) -> None:
    """A `RestCatalogError` carrying the server's error message (never request headers)."""
    if response.ok:
        return
    try:
        error = response.json().get("error", {})
        message = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
    except ValueError:
        message = response.text[:200]
    raise RestCatalogError(f"{what}: HTTP {response.status_code} {message}")
