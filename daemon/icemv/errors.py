"""Every error icemv raises on purpose, in one module (factored out to avoid import loops).

`IcemvError` is the base: the CLI prints any of them as one line, without a traceback.
Each also keeps the stdlib base it had (`ValueError`, `LookupError`, `RuntimeError`) so
callers that catch those still work.
"""

from __future__ import annotations


class IcemvError(Exception):
    """Base of all icemv errors; the message is written for the user."""


# --- input: configuration, names, definitions


class ConfigError(IcemvError, ValueError):
    """A configuration that cannot be used; the message names the bad key."""


class InvalidIdentifierError(IcemvError, ValueError):
    """A catalog object name that is empty, malformed or outside this catalog."""


class DurationError(IcemvError, ValueError):
    """A text that is not a duration such as `30s`, `5m`, `1h`."""


class PartitionSpecError(IcemvError, ValueError):
    """A partition transform icemv cannot apply to the storage table."""


class ViewSqlError(IcemvError, ValueError):
    """The SQL cannot define a materialized view; the message says why."""


class UnknownSourceError(ViewSqlError):
    """The SQL reads a table or view that the catalog does not have."""


# --- formats read from storage


class ViewMetadataError(IcemvError, ValueError):
    """View metadata JSON that does not follow the Iceberg view spec."""


class RefreshStateError(IcemvError, ValueError):
    """A refresh-state that cannot be decoded."""


class BadEventError(IcemvError, ValueError):
    """A message that cannot be understood; `reason` is a fixed code fit for a metric label."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


# --- catalog objects


class NoSuchViewError(IcemvError, LookupError):
    """The named view does not exist."""


class ViewAlreadyExistsError(IcemvError, ValueError):
    """A view (or table) of that name exists already."""


class ViewCommitConflictError(IcemvError, RuntimeError):
    """Another writer replaced the view first; reload and retry."""


class NotAMaterializedViewError(IcemvError, LookupError):
    """The name is not an MV (no view, or a plain view without a storage table)."""


class MaterializedViewExistsError(IcemvError, ValueError):
    """An MV of that name exists already."""


class MaterializedViewPropertyError(IcemvError, ValueError):
    """An `icemv.*` view property whose value icemv cannot use."""


# --- engines and servers


class EmbeddedPostgresError(IcemvError, RuntimeError):
    """The embedded server could not be prepared, started or stopped."""


class SparkSetupError(IcemvError, RuntimeError):
    """Spark cannot be started as configured (missing jar, driver, setting)."""


# --- refresh


class FullRefreshRequiredError(IcemvError):
    """The delta cannot (or should not) be computed; `reason` is the recorded reason code."""

    def __init__(self, reason: str, detail: str = "", rule: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        # The delta rule whose result was found wrong (`storage-inconsistent`), if any.
        self.rule = rule


class EngineRefusedError(IcemvError, ValueError):
    """The embedded engine does not compute this delta: the portability gate
    (sql/portable/) refused a construct, its change read (refresh/embedded/) cannot apply
    a delete or met more rows than its limits, or DuckDB raised. The one refusal: Spark
    computes the delta, and the message is the refresh's `engine_reason`."""


class SparkUnavailableError(IcemvError, RuntimeError):
    """This process has no Spark (a refresh worker process): the refresh that asked for it
    is handed back to the daemon's own process, which runs it with Spark."""


class StorageCommitConflictError(IcemvError, RuntimeError):
    """The storage table moved since the refresh was planned."""


class RefreshFailedError(IcemvError, RuntimeError):
    """A refresh that cannot succeed as asked (policy, conflicts); the message says why."""


class SourceSchemaIncompatibleError(RefreshFailedError):
    """A source no longer has a column the MV's SQL reads (dropped or renamed)."""

    reason = "source-schema-incompatible"


class SourceNotRefreshedError(RefreshFailedError):
    """A source MV has never been refreshed, so there is no snapshot of it to record."""

    reason = "source-never-refreshed"


class RestCatalogError(IcemvError, RuntimeError):
    """A REST catalog answered an unexpected status; the message has the server's own words."""
