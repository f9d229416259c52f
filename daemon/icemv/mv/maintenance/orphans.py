"""Files under a storage table's location that no snapshot references.

A killed or conflicting refresh leaves the data and manifest files it wrote; pyiceberg
and Spark leave old metadata files. Neither is ever read again. A file is removed only if
it is older than `min_age_seconds`: a write still in flight (in this process or another)
has written files that no commit references yet.
"""

from __future__ import annotations

import time

import structlog
from pyarrow.fs import FileSelector, FileType
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

from icemv.mv.maintenance.expiry import reachable_files

log = structlog.get_logger(__name__)

# Files a catalog or engine reads by name rather than through the metadata.
KEEP_NAMES = frozenset({"version-hint.text"})


def _normalized(location: str) -> tuple[str, str]:
    """(scheme, path) the same whichever engine spelled it (`file:/x`, `file:///x`)."""
    scheme, _, path = PyArrowFileIO.parse_location(location)
    return scheme, path.rstrip("/")


def remove_orphan_files(table: Table, min_age_seconds: float, now: float | None = None) -> int:
    """Delete unreferenced files under the table location; how many were deleted."""
    io = table.io
    if not isinstance(io, PyArrowFileIO):
        log.info("orphan_scan_skipped", table=".".join(table.name()), reason="not a pyarrow FileIO")
        return 0
    now = time.time() if now is None else now
    scheme, netloc, root = PyArrowFileIO.parse_location(table.location())
    filesystem = io.fs_by_scheme(scheme, netloc)
    referenced = {_normalized(path) for path in reachable_files(table)}
    cutoff_ns = int((now - min_age_seconds) * 1e9)
    deleted = 0
    for info in filesystem.get_file_info(FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type != FileType.File or info.base_name in KEEP_NAMES:
            continue
        if (scheme, info.path.rstrip("/")) in referenced:
            continue
        if info.mtime_ns is None or info.mtime_ns > cutoff_ns:
            continue
        try:
            filesystem.delete_file(info.path)
            deleted += 1
        except OSError as exc:
            log.warning("file_delete_failed", path=info.path, error=str(exc))
    if deleted:
        log.info("orphan_files_removed", table=".".join(table.name()), files=deleted)
    return deleted
