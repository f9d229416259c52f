"""pyiceberg's own configuration read once per process, not once per file written.

pyiceberg reads its configuration (`~/.pyiceberg.yaml` or `$PYICEBERG_HOME`'s, and every
`PYICEBERG_*` environment variable) each time it asks for a setting, by building a new
`Config`: a scan of the environment and up to three file lookups. A small storage commit
asks five times (the data file writer, the schema conversion, the metadata JSON, the file
scan of the touched groups' storage): ~0.5 ms of a fleet refresh's ~20 ms of CPU here.

The daemon reads that configuration once, when it opens its catalog, as it reads its own:
a changed `PYICEBERG_*` variable or file takes effect at the next start.
`read_pyiceberg_config_once()` gives the modules that build a `Config` per call (pyiceberg
0.12.*: `pyiceberg.io.pyarrow`, `pyiceberg.table`, `pyiceberg.table.metadata`,
`pyiceberg.serializers`) one `Config` read now; opening a catalog backend calls it.
"""

from __future__ import annotations

import importlib
import threading

from pyiceberg.utils.config import Config

# The pyiceberg modules that build a Config for each setting they read.
_READERS = ("pyiceberg.io.pyarrow", "pyiceberg.table", "pyiceberg.table.metadata",
            "pyiceberg.serializers")  # fmt: skip

_installed = threading.Lock()


def read_pyiceberg_config_once() -> None:
    """pyiceberg's configuration read once for this process (see the module)."""
    with _installed:
        config = Config()
        for name in _READERS:
            readers = vars(importlib.import_module(name))
            if readers.get("Config") is Config:
                readers["Config"] = lambda: config
