"""Catalog commit events (icemv, Lakekeeper CloudEvents, Polaris) parsed into hints.

Parsing is pure and total: for any bytes it returns a list or raises `BadEventError` with a
machine-readable reason, so one bad message never stops the consumer. Names taken from an
event are data for catalog look-ups, never SQL text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from icemv.errors import BadEventError
from icemv.events.formats.icemv import parse_icemv
from icemv.events.formats.lakekeeper import binary_cloudevent_attributes, parse_lakekeeper
from icemv.events.formats.polaris import parse_polaris
from icemv.events.hints import EventHint

# Commit events are a few hundred bytes; anything this big is not one (and is costly to parse).
MAX_VALUE_BYTES = 1024 * 1024


def parse_event(
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
    key: bytes | None = None,
) -> list[EventHint]:
    """The hints in one Kafka record; raises only `BadEventError`."""
    if value is not None and len(value) > MAX_VALUE_BYTES:
        raise BadEventError("too-large", f"the value has {len(value)} bytes")
    attributes = binary_cloudevent_attributes(headers)
    if attributes is not None:
        data = None if not value or not value.strip() else _load_json(value)
        return parse_lakekeeper(attributes, data, key)
    if not value or not value.strip():
        raise BadEventError("empty", "the record has no value")
    event = _load_json(value)
    if not isinstance(event, dict):
        raise BadEventError("not-an-object", "the value is not a JSON object")
    if "specversion" in event:
        return parse_lakekeeper(event, event.get("data"), key)
    if "event_type" in event:
        return parse_polaris(event, key)
    if "type" in event:
        return parse_icemv(event)
    raise BadEventError("unknown-format", "no type, event_type or specversion")


def _load_json(value: bytes) -> object:
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise BadEventError("not-json", "the value is not UTF-8 JSON") from None
