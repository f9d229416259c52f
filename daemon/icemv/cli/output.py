"""`--output json`: the one JSON document each reading command prints, for scripts.

`--output text` (the default) is for people and may change between releases. The JSON
documents are stable: their keys stay, with the same meaning; new keys may be added.
Each is printed as one JSON value (indented) on stdout, nothing else; log lines only ever
go to stderr. `--format` is the old name of `--output`: it still works, hidden from
`--help`, and is deprecated.

Names are `namespace.name` (no catalog part); times are epoch milliseconds (`*-ms`) or
seconds (`*-seconds`); a missing value is `null`.

`icemv status`: a list, one object per MV, in catalog order:
    name                "namespace.name"
    state               "fresh", "stale" or "invalid"
    reason              why not fresh (`source-changed`, `never-refreshed`, ...) or null
    staleness-seconds   seconds since the first source commit the MV has not absorbed
                        (0 when fresh)
    pending-snapshots   source snapshots committed since the last refresh
    quarantined-rule    the delta rule quarantined after a wrong delta, or null

`icemv mv list`: a list, one object per MV:
    name                "namespace.name"
    storage-table       "namespace.name__storage"
    view-version-id     the view's current version

`icemv mv show NAME`: one object (`icemv.mv.report.mv_report`):
    name, sql, view-version-id, storage-table, properties (object), state, reason,
    staleness-seconds as in status; view-columns (the storage table's columns a reader
    selects: the view's, without the hidden state) and read-sql (that SELECT, Spark SQL);
    sources: [{type ("table"/"view"), name, recorded, current (snapshot ids, or view
        versions), pending, problem}]
    history: newest first, [{snapshot-id, timestamp-ms, view-version-id, mode, reason,
        engine ("duckdb"/"spark" or null), rows-inserted, rows-deleted (or null),
        duration-seconds (from the refresh's start to its commit),
        sources: {name: snapshot id or "vN"}}]
    current-refresh-id, refreshes: the same history oldest first in the shape of the
        Iceberg MV proposal (#6420): [{refresh-id, version-id, sequence-number,
        timestamp-ms, base-tables: {name: {type, identifier, snapshot-reference}}}]

`icemv mv explain NAME`: one object (`icemv.mv.explain.explain`):
    name, incremental (bool), policy, sources (names); when not incremental `reasons` (codes)
    and `details`; when it is, `shape`, `strategy`, `change-sets` and, as they apply,
    `rules`, `keys`, `grouping-sets`, `state-columns`, `normalised`, `quarantined`,
    `joined-reads` (a view of several tables: per table changing alone, how the embedded
    engine reads the others, `icemv.refresh.embedded.restrict.joined_reads`);
    `strategy` is a string (rows) or, for an aggregate, {insert-only, with-deletes} (before
    this release: "insert-only deltas" and "deltas with deletes").

`icemv mv verify NAME`: one object (`icemv.mv.verify.verify_report_json`): mv, clean,
    summary, storage-snapshot-id, slices, checked-slices, differing-slices, storage-rows,
    view-rows, only-in-storage, only-in-view, sample-only-in-storage, sample-only-in-view,
    seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from icemv.mv.model import MaterializedView

OUTPUTS = ("text", "json")


def add_output_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        choices=OUTPUTS,
        default="text",
        help="text for people (default) or one stable JSON document for scripts",
    )
    # The old name, kept working for scripts that use it.
    parser.add_argument(
        "--format",
        dest="output",
        choices=OUTPUTS,
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


def print_document(document: object) -> None:
    print(json.dumps(document, indent=2, default=str))


def mv_list_document(mvs: Iterable[MaterializedView]) -> list[dict[str, Any]]:
    return [
        {
            "name": mv.identifier.dotted,
            "storage-table": mv.storage.dotted,
            "view-version-id": mv.version.version_id,
        }
        for mv in mvs
    ]


@contextmanager
def announced(what: str) -> Iterator[None]:
    """`icemv: <what> ...` before a long command and `icemv: <what>: done in 12.3 s` after it,
    on stderr when it is a terminal (scripts read stdout and a quiet stderr)."""
    terminal = sys.stderr.isatty()
    started = time.monotonic()
    if terminal:
        print(f"icemv: {what} ...", file=sys.stderr, flush=True)
    yield
    if terminal:
        print(f"icemv: {what}: done in {time.monotonic() - started:.1f} s", file=sys.stderr)
