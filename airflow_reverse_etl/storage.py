"""Telling a storage outage from a storage problem, for code that reads the warehouse through fsspec.

An outage passes by itself: the object store refused the connection, reset it, timed out, answered
5xx or throttled (429, ``SlowDown``). A problem does not: access denied, a path that is a file, a
corrupt file. Each fsspec backend reports these its own way (s3fs maps S3 codes to ``OSError``
errnos and keeps the botocore error as the cause; aiohttp and botocore have their own connection
errors; the local filesystem raises ``OSError`` with an errno), so the whole exception chain is
looked at, by class name and errno, and by the HTTP status or throttling words in the message.
"""

from __future__ import annotations

import errno
import re
from contextlib import contextmanager
from typing import Iterator

from airflow_reverse_etl.exceptions import (
    ReverseEtlConfigError,
    ReverseEtlError,
    ReverseEtlInfrastructureError,
)
from spark_jobs.errors import exception_chain

#: errnos of a connection or a service that is down or busy (s3fs: 409/503/SlowDown are EBUSY, 500 is
#: EREMOTEIO), as opposed to EACCES, ENOTDIR, EISDIR, ... which stay until someone fixes them.
TRANSIENT_ERRNOS = frozenset({
    errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH,
    errno.EHOSTDOWN, errno.ENETUNREACH, errno.ENETDOWN, errno.ENETRESET, errno.EPIPE, errno.EAGAIN,
    errno.EBUSY, errno.EREMOTEIO,
})

#: Connection and timeout errors of the HTTP clients fsspec backends use (builtin, botocore, aiohttp,
#: urllib3/requests, fsspec), matched by name so that none of them has to be installed.
TRANSIENT_CLASSES = frozenset({
    "ConnectionError", "TimeoutError", "EndpointConnectionError", "ConnectTimeoutError",
    "ReadTimeoutError", "ConnectionClosedError", "HTTPClientError", "ResponseStreamingError",
    "ClientConnectionError", "ServerDisconnectedError", "ClientPayloadError", "IncompleteRead",
    "FSTimeoutError", "ProtocolError", "RemoteDisconnected",
})

#: Errors that carry an HTTP response (botocore, gcsfs, aiohttp, requests): their text holds the status.
HTTP_ERROR_CLASSES = frozenset({"ClientError", "HttpError", "HTTPError", "ClientResponseError"})

_TRANSIENT_TEXT = re.compile(
    r"\b(?:429|500|502|503|504)\b|too many requests|slow ?down|reduce your request rate|throttl|"
    r"service unavailable|temporarily unavailable|connection (?:refused|reset|aborted)", re.IGNORECASE)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a storage outage that a later attempt can get past. Access denied is never
    transient, whatever else the chain holds."""
    chain = list(exception_chain(exc))
    if any(isinstance(error, PermissionError) for error in chain):
        return False
    for error in chain:
        if not TRANSIENT_CLASSES.isdisjoint(cls.__name__ for cls in type(error).__mro__):
            return True
        if isinstance(error, OSError) and error.errno in TRANSIENT_ERRNOS:
            return True
        if (isinstance(error, OSError) or type(error).__name__ in HTTP_ERROR_CLASSES) and \
                _TRANSIENT_TEXT.search(str(error)):
            return True
    return False


@contextmanager
def reading_log(uri: str) -> Iterator[None]:
    """Raise what reading the log of ``uri`` ran into as a provider error that says whether a later
    attempt can succeed; errors nobody recognises pass through unchanged."""
    try:
        yield
    except ReverseEtlError:
        raise
    except Exception as exc:
        if is_transient(exc):
            raise ReverseEtlInfrastructureError(f"Storage unavailable while reading the Delta log of {uri}: "
                                                f"{type(exc).__name__}: {exc}") from exc
        if isinstance(exc, PermissionError):
            raise ReverseEtlConfigError(f"Permission denied reading the Delta log of {uri}: {exc}. Check the "
                                        "warehouse storage's credentials and permissions.") from exc
        if isinstance(exc, NotADirectoryError):
            raise ReverseEtlConfigError(f"{uri} is not a Delta table: {exc}") from exc
        raise
