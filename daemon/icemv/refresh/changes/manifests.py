"""The files a source's change range touched, from its manifests (pyiceberg, no data read).

For each snapshot in the range, the manifests it wrote hold its ADDED entries (data and
delete files) and DELETED entries (data files it removed). A position-delete file names
one data file when the lower and upper bounds of its `file_path` column are equal (as
Iceberg's own `ContentFileUtil.referencedDataFile` decides). A small equality delete is
read to learn which data files its values may be in (refresh/changes/pushdown.py).

Snapshots never change, so a range's facts are kept (a small per-process cache by table
UUID and snapshot ids): a refresh's plan, its Arrow route and other MVs over the same
range ask for them again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator

from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
)
from pyiceberg.table import Table

from icemv.format.summary import TOTAL_DATA_FILES, TOTAL_RECORDS, summary_of
from icemv.refresh.changes.classify import SourceChange
from icemv.refresh.changes.pushdown import equality_candidates, pushable
from icemv.refresh.cost import PositionDeletes, TouchedFiles

# The reserved field id of `file_path` in position-delete files (Iceberg spec).
_DELETE_FILE_PATH_ID = 2147483546


def _summary_int(table: Table, snapshot_id: int | None, key: str) -> int:
    if snapshot_id is None:
        return 0
    try:
        return int(summary_of(table.snapshot_by_id(snapshot_id)).get(key, 0))
    except ValueError:
        return 0


def _target(bounds_low: dict[int, bytes], bounds_high: dict[int, bytes]) -> str | None:
    low = (bounds_low or {}).get(_DELETE_FILE_PATH_ID)
    high = (bounds_high or {}).get(_DELETE_FILE_PATH_ID)
    if low is None or low != high:
        return None
    return low.decode("utf-8", errors="replace")


def _equality_candidates(
    table: Table, delete: DataFile, old_snapshot_id: int | None, found: list[dict[str, int]] | None
) -> list[dict[str, int]] | None:
    """`found` and the data files an equality delete's values may be in; None once a
    delete's values are not pushed down (or its file cannot be read here)."""
    if found is None or not pushable(table, delete):
        return None
    if old_snapshot_id is None:  # no data files before the range
        return [*found, {}]
    try:
        return [*found, equality_candidates(table, delete, old_snapshot_id)]
    except (OSError, ValueError):  # unreadable here: weigh every data file, as unpushed
        return None


def range_entries(table: Table, change: SourceChange) -> Iterator[ManifestEntry]:
    """The manifest entries the range's snapshots wrote (ADDED and DELETED files)."""
    io = table.io
    for snapshot in change.snapshots:
        for manifest in snapshot.manifests(io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue  # written earlier: holds no entry of this snapshot
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if entry.snapshot_id == snapshot.snapshot_id:
                    yield entry


_CACHED_RANGES = 256
_cache: OrderedDict[tuple[str, int | None, int | None], TouchedFiles] = OrderedDict()
_cache_lock = threading.Lock()


def touched_files(table: Table, change: SourceChange) -> TouchedFiles:
    """What `change` (a non-append range of `table`) added and removed, by manifest."""
    key = (str(table.metadata.table_uuid), change.old_snapshot_id, change.new_snapshot_id)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    touched = _touched_files(table, change)
    with _cache_lock:
        _cache[key] = touched
        while len(_cache) > _CACHED_RANGES:
            _cache.popitem(last=False)
    return touched


def _touched_files(table: Table, change: SourceChange) -> TouchedFiles:
    added: dict[str, int] = {}
    removed: dict[str, int] = {}
    positions: list[PositionDeletes] = []
    equality: list[int] = []
    old = change.old_snapshot_id
    candidates: list[dict[str, int]] | None = []
    vectors = 0
    for entry in range_entries(table, change):
        data = entry.data_file
        if entry.status == ManifestEntryStatus.DELETED:
            if data.content == DataFileContent.DATA:
                removed[data.file_path] = data.record_count
        elif entry.status == ManifestEntryStatus.ADDED:
            if data.content == DataFileContent.DATA:
                added[data.file_path] = data.record_count
            elif data.content == DataFileContent.EQUALITY_DELETES:
                equality.append(data.record_count)
                candidates = _equality_candidates(table, data, old, candidates)
            elif data.file_format == FileFormat.PUFFIN:
                vectors += 1
            else:
                target = _target(data.lower_bounds, data.upper_bounds)
                positions.append(PositionDeletes(data.record_count, target))
    return TouchedFiles(
        added=added,
        removed=removed,
        position_deletes=tuple(positions),
        equality_delete_records=tuple(equality),
        equality_candidates=None if candidates is None else tuple(candidates),
        vectors=vectors,
        old_records=_summary_int(table, old, TOTAL_RECORDS),
        old_data_files=_summary_int(table, old, TOTAL_DATA_FILES),
    )
