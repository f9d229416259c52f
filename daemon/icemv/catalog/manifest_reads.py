"""Manifests and manifest lists decoded once per process, not once per reader.

pyiceberg decodes a manifest (Avro, in Python: ~3.5 ms for a one-file manifest here) on
every `fetch_manifest_entry`, and a manifest list on every `Snapshot.manifests`. One
refresh of a small aggregate MV read the storage table's current manifest three times
(planning the held rows, then pyiceberg's overwrite finding the files it keeps and the
ones it deletes), and every MV over a source reads that source's new manifests: 4.4
manifest decodes and 2.6 list decodes per refresh of a fleet MV, 16 and 5 ms of its ~85.

Both are files written once under a name no other file takes, so a path names its
content, and what is decoded from it is kept by path:

- a manifest's entries (all of them, live and deleted; a reader that discards deleted
  ones gets the live ones), for manifests of at most `_MAX_ENTRIES` entries, the last
  `_MANIFESTS` of them: a fleet's storage tables and its sources' recent appends, not a
  large table's planning;
- a manifest list's manifests (pyiceberg keeps the `ManifestFile` objects themselves by
  path already), the last `_LISTS` of them.

An entry's inherited fields (its snapshot id and sequence number when the manifest does
not carry them) come from the manifest's own row in the manifest list, which is the same
in every list that holds the manifest once it is committed; pyiceberg's own manifest cache
keys those rows by path alone. No reader changes an entry it gets: pyiceberg's writers
build new entries from them, and icemv only reads. Every reader gets a list of its own.

`keep_manifest_reads()` replaces `ManifestFile.fetch_manifest_entry` and the manifest
list reader `pyiceberg.table.snapshots` imports (a private name: pyiceberg 0.12.*); opening
a catalog backend installs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
from pyiceberg.table import snapshots

from icemv.sql.memo import Memo

_MAX_ENTRIES = 128
_MANIFESTS = 512
_LISTS = 256

_entries: Memo[tuple[ManifestEntry, ...]] = Memo(_MANIFESTS)
_lists: Memo[tuple[ManifestFile, ...]] = Memo(_LISTS)
_installed = threading.Lock()
_originals: dict[str, Callable[..., object]] = {}


def keep_manifest_reads() -> None:
    """Install the kept reads (once per process; later calls do nothing)."""
    with _installed:
        if _originals:
            return
        _originals["entries"] = ManifestFile.fetch_manifest_entry
        _originals["list"] = getattr(snapshots, "_manifests")  # noqa: B009 (not exported)
        ManifestFile.fetch_manifest_entry = _fetch_manifest_entry  # type: ignore[method-assign]
        setattr(snapshots, "_manifests", _manifest_list)  # noqa: B010


def _fetch_manifest_entry(
    self: ManifestFile, io: FileIO, discard_deleted: bool = True
) -> list[ManifestEntry]:
    entries = _entries.get(self.manifest_path)
    if entries is None:
        read = _originals["entries"](self, io, discard_deleted=False)
        assert isinstance(read, list)
        entries = tuple(read)
        if len(entries) <= _MAX_ENTRIES:
            _entries.put(self.manifest_path, entries)
    if discard_deleted:
        return [e for e in entries if e.status != ManifestEntryStatus.DELETED]
    return list(entries)


def _manifest_list(io: FileIO, manifest_list: str) -> tuple[ManifestFile, ...]:
    manifests = _lists.get(manifest_list)
    if manifests is None:
        read = _originals["list"](io, manifest_list)
        assert isinstance(read, tuple)
        manifests = read
        _lists.put(manifest_list, manifests)
    return manifests
