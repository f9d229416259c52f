"""Which handler failures hold a record for retry and which dead-letter it; DLQ headers."""

from __future__ import annotations

import errno
from dataclasses import dataclass

import pytest
import sqlalchemy.exc
from kafka.errors import KafkaTimeoutError

from icemv.errors import BadEventError
from icemv.service.consumer import retryable
from icemv.service.dead_letter import MAX_DETAIL_BYTES, dead_letter_headers


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(),
        TimeoutError(),
        OSError(errno.EHOSTUNREACH, "No route to host"),
        sqlalchemy.exc.OperationalError("SELECT", {}, Exception("server closed the connection")),
        KafkaTimeoutError(),
    ],
)
def test_unreachable_peers_are_retried(error: BaseException) -> None:
    assert retryable(error)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("A string literal cannot contain NUL (0x00) characters."),
        BadEventError("not-json"),
        TypeError("unhashable"),
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
        sqlalchemy.exc.DataError("SELECT", {}, Exception("value too long")),
        RecursionError(),
        FileNotFoundError("s3://w/t/metadata/00001.metadata.json"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
)
def test_failures_about_the_record_are_not_retried(error: BaseException) -> None:
    assert not retryable(error)


@dataclass
class Record:
    topic: str = "commits"
    partition: int = 2
    offset: int = 41
    key: bytes | None = b"k"
    value: bytes | None = b"v"
    headers: list[tuple[str, bytes | None]] | None = None


def test_dead_letter_headers_keep_the_originals_and_say_why() -> None:
    record = Record(headers=[("ce_type", b"updateTable"), ("empty", None)])
    headers = dict(dead_letter_headers(record, "bad-identifier", ValueError("x" * 10_000)))
    assert headers["ce_type"] == b"updateTable" and headers["empty"] == b""
    assert headers["icemv-dead-letter-reason"] == b"bad-identifier"
    assert headers["icemv-dead-letter-error"] == b"ValueError"
    assert headers["icemv-dead-letter-topic"] == b"commits"
    assert headers["icemv-dead-letter-partition"] == b"2"
    assert headers["icemv-dead-letter-offset"] == b"41"
    assert len(headers["icemv-dead-letter-detail"]) == MAX_DETAIL_BYTES
