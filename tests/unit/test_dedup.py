"""EventDeduplicator: `known` only asks, `remember` records, `seen` does both."""

from __future__ import annotations

from icemv.events.dedup import EventDeduplicator
from icemv.events.hints import IgnoredEvent, TableCommitHint, ViewChangeHint

UUID = "6891e4cd-ebac-4e4a-b511-dd3bcb3b6798"


def test_known_does_not_record() -> None:
    dedup = EventDeduplicator()
    hint = TableCommitHint(("n",), "t", "icemv", UUID, 1)
    assert not dedup.known(hint) and not dedup.known(hint)
    dedup.remember(hint)
    assert dedup.known(hint)
    assert dedup.seen(hint)


def test_remember_keeps_the_bound() -> None:
    dedup = EventDeduplicator(max_entries=3)
    for snapshot in range(10):
        dedup.remember(TableCommitHint(("n",), "t", "icemv", UUID, snapshot))
    assert len(dedup) == 3
    assert dedup.known(TableCommitHint(("n",), "t", "icemv", UUID, 9))
    assert not dedup.known(TableCommitHint(("n",), "t", "icemv", UUID, 0))


def test_view_changes_dedup_by_event_id_and_ignored_events_never() -> None:
    dedup = EventDeduplicator()
    view = ViewChangeHint(("n",), "v", "lakekeeper", "e1")
    assert not dedup.seen(view) and dedup.seen(view)
    ignored = IgnoredEvent("polaris", "not-a-table-or-view-event")
    assert not dedup.seen(ignored) and not dedup.seen(ignored)
