"""icemv keeps Apache Iceberg materialized views fresh, incrementally.

The package is read along the refresh path: `service` (events, polls, scheduling) asks
`refresh` to bring one MV up to date; `refresh` runs policy -> plan -> changes -> patch ->
commit -> record over `sql` (pure sqlglot passes), `catalog` and `engine` (Spark); `spec`
holds the on-disk formats; `mv` the MV lifecycle and reports; `cli` the command line.
"""

from importlib.metadata import PackageNotFoundError, version

from icemv.errors import IcemvError

try:
    __version__ = version("icemv")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = ["IcemvError", "__version__"]
