"""How the CLI reports a failure: one line, the exit code telling whose fault it was."""

from __future__ import annotations

import re

from icemv.errors import IcemvError


def user_errors() -> tuple[type[BaseException], ...]:
    """Errors whose message is the whole story for a user: printed as one line, exit 2."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    return (IcemvError, NoSuchTableError, NoSuchNamespaceError)


def runtime_message(exc: BaseException) -> str:
    """One line for a failure of something icemv depends on (catalog database, broker).

    Such messages come from drivers and may be long or quote connection strings: the
    first meaningful line is kept and any URL password masked.
    """
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return f"catalog database unavailable: {one_line(str(exc.orig))}"
    if isinstance(exc, SQLAlchemyError):
        return f"catalog database unavailable: {one_line(str(exc))}"
    import requests

    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        reason = _connection_reason(exc)
        return f"REST catalog unreachable (catalog.uri): {reason}"
    import kafka.errors

    # kafka-python 2.x says "no brokers" with NoBrokersAvailable, 3.x with a bootstrap timeout.
    no_brokers = getattr(kafka.errors, "NoBrokersAvailable", kafka.errors.KafkaTimeoutError)
    if isinstance(exc, no_brokers) and (
        not isinstance(exc, kafka.errors.KafkaTimeoutError) or "bootstrap" in str(exc)
    ):
        return "Kafka broker unreachable (kafka.bootstrap_servers): no broker answered"
    if isinstance(exc, kafka.errors.KafkaError):
        return f"Kafka: {one_line(str(exc))}"
    return f"{type(exc).__name__}: {one_line(str(exc))}"


def _connection_reason(exc: BaseException) -> str:
    """The URL asked and the innermost cause of a failed HTTP request, on one line."""
    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    cause = str(exc)
    for marker in ("Caused by ", "Failed to establish a new connection: "):
        cause = cause.split(marker)[-1]
    cause = cause.strip("()\"' ")
    return one_line(f"{url}: {cause}" if url else cause)


def one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith("(Background on")]
    joined = "".join(line + (" " if line.endswith(":") else "; ") for line in kept[:-1]) + (
        kept[-1] if kept else ""
    )
    return _URL_PASSWORD.sub(r"\1******@", joined) or "(no message)"


_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+@")
