"""Recently seen events, so redeliveries and one commit announced twice cost nothing."""

from __future__ import annotations

from collections import OrderedDict

from icemv.events.hints import EventHint, IgnoredEvent, RefreshRequestHint, TableCommitHint


class EventDeduplicator:
    """Recently seen events, by event id and by (table uuid, snapshot id).

    Catches redeliveries and the same commit announced in two formats. Bounded LRU, so
    memory stays flat; forgetting an old entry costs at most one redundant reload.
    Not thread-safe: use it from the consumer's thread.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[object, ...], None] = OrderedDict()

    def seen(self, hint: EventHint) -> bool:
        """Whether any identity of `hint` was seen before; records them all."""
        found = self.known(hint)
        self.remember(hint)
        return found

    def known(self, hint: EventHint) -> bool:
        """Whether any identity of `hint` was seen before; records nothing (a hint whose
        handling may still fail must not be remembered yet, or its retry looks like a
        duplicate)."""
        return any(key in self._entries for key in _dedup_keys(hint))

    def remember(self, hint: EventHint) -> None:
        for key in _dedup_keys(hint):
            self._entries[key] = None
            self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _dedup_keys(hint: EventHint) -> list[tuple[object, ...]]:
    if isinstance(hint, IgnoredEvent | RefreshRequestHint):  # requests merge in the scheduler
        return []
    keys: list[tuple[object, ...]] = []
    if hint.event_id is not None:
        # One event can name several tables (a rename, a transaction): the id alone is not enough.
        kind = "table" if isinstance(hint, TableCommitHint) else "view"
        keys.append(("event", hint.format, hint.event_id, kind, hint.namespace, hint.name))
    if isinstance(hint, TableCommitHint) and hint.table_uuid and hint.snapshot_id is not None:
        keys.append(("snapshot", hint.table_uuid, hint.snapshot_id))
    return keys
