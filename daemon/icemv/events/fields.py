"""Validators for the fields of a decoded event: each returns a clean value or raises
`BadEventError` with a fixed reason code.

Names taken from an event are later looked up in the catalog, whose database refuses some
strings outright (PostgreSQL: NUL); such a failure cannot be fixed by retrying, so names
are checked here, up front, and a bad one makes the whole event bad.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from icemv.errors import BadEventError

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The JDBC catalog stores names in VARCHAR(255) columns; longer ones cannot exist.
MAX_NAME_LENGTH = 255
MAX_NAMESPACE_DEPTH = 32
# Other string fields (ids, times, locations) feed dedup memory and logs: keep them sane.
MAX_STRING_LENGTH = 4096
# Control characters (NUL included) and lone surrogates: no catalog name holds them.
_FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cs"})


def table_namespace(value: object, field: str) -> tuple[str, ...]:
    """A list of names, or one string split at U+001F (Lakekeeper) or dots."""
    if value is None:
        raise BadEventError("missing-namespace", f"{field} is missing")
    if isinstance(value, str):
        if len(value) > MAX_NAME_LENGTH * MAX_NAMESPACE_DEPTH:
            raise BadEventError("bad-identifier", f"{field} is too long")
        parts: list[object] = list(value.split("\x1f" if "\x1f" in value else "."))
    elif isinstance(value, list | tuple):  # tuples from IcemvCommitEvent's callers
        parts = list(value)
    else:
        raise BadEventError("bad-field", f"{field} must be a list of strings or a string")
    if not parts or not all(isinstance(part, str) and part for part in parts):
        raise BadEventError("bad-field", f"{field} must hold non-empty strings")
    if len(parts) > MAX_NAMESPACE_DEPTH:
        raise BadEventError("bad-identifier", f"{field} has more than {MAX_NAMESPACE_DEPTH} levels")
    return tuple(_checked_name(str(part), field) for part in parts)


def table_name(value: object, field: str) -> str:
    if value is None:
        raise BadEventError("missing-table-name", f"{field} is missing")
    if not isinstance(value, str) or not value:
        raise BadEventError("bad-field", f"{field} must be a non-empty string")
    return _checked_name(value, field)


def _checked_name(name: str, field: str) -> str:
    if len(name) > MAX_NAME_LENGTH:
        raise BadEventError("bad-identifier", f"{field} is longer than {MAX_NAME_LENGTH}")
    if any(unicodedata.category(char) in _FORBIDDEN_CATEGORIES for char in name):
        raise BadEventError("bad-identifier", f"{field} holds a control character or surrogate")
    return name


def optional_identifier(
    source: Mapping[str, object], namespace_key: str, name_key: str
) -> tuple[tuple[str, ...] | None, str | None]:
    namespace = source.get(namespace_key)
    name = source.get(name_key)
    return (
        None if namespace is None else table_namespace(namespace, namespace_key),
        None if name is None else table_name(name, name_key),
    )


def required_str(source: Mapping[str, object], field: str) -> str:
    value = optional_str(source, field)
    if value is None:
        raise BadEventError("bad-field", f"{field} is missing")
    return value


def optional_str(source: Mapping[str, object], field: str) -> str | None:
    value = source.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadEventError("bad-field", f"{field} must be a string")
    if len(value) > MAX_STRING_LENGTH:
        raise BadEventError("bad-field", f"{field} is longer than {MAX_STRING_LENGTH}")
    return value


def optional_int64(source: Mapping[str, object], field: str) -> int | None:
    value = source.get(field)
    if value is None:
        return None
    # bool is an int in Python but never a valid id or timestamp.
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not _INT64_MIN <= value <= _INT64_MAX
    ):
        raise BadEventError("bad-field", f"{field} must be a 64-bit integer")
    return value


def optional_uuid(source: Mapping[str, object], field: str) -> str | None:
    """Canonical lower-case form, so the same table deduplicates across formats."""
    value = optional_str(source, field)
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise BadEventError("bad-field", f"{field} must be a UUID") from None


def optional_time(source: Mapping[str, object], field: str) -> int | None:
    """Milliseconds since the epoch of an ISO-8601 / RFC 3339 time (UTC if no offset)."""
    value = optional_str(source, field)
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return (moment - _EPOCH) // timedelta(milliseconds=1)
    except (ValueError, OverflowError):
        raise BadEventError("bad-field", f"{field} must be an ISO-8601 time") from None
