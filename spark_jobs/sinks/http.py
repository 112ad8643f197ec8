"""HTTP / webhook destination: JSON batches POSTed to an API.

Wire format (one request per batch)::

    POST <url>
    {"records": [{"op": "upsert", "key": {"id": 1}, "data": {"id": 1, "name": "ann"}},
                 {"op": "delete", "key": {"id": 2}, "data": {"id": 2}}]}

How responses are read:

* 2xx — delivered, except the records the body reports as failed. The body's first list under one
  of the ``record_errors`` fields (default ``["errors", "results"]``; ``[]`` turns parsing off) is
  read: either only the failures, ``{"errors": [{"index": 3, "error": "email invalid"}]}``, or one
  result per record, ``{"results": [{"index": 0, "status": "ok"}, {"index": 1, "status": "error",
  "error": "busy", "retryable": true}]}``. An item with an ``error`` (or ``status: error``) is a
  failure of the record at ``index`` (its position in the batch; for a full result list, the
  item's own position by default). A failed record is rejected into the ledger, or retried when
  ``retryable`` is true.
* 408, 429, 5xx, connection errors and timeouts — transient: the core retries the batch with
  backoff, waiting ``Retry-After`` (seconds or an HTTP date) when the server sends one.
* 401/403 (credentials), 404/405 (wrong URL or method) — the destination is unusable: the sync fails.
* 3xx — a 307/308 to the same origin is followed with the same method and body; any other redirect
  fails the sync naming the status and the ``Location``: nothing of the batch counts as delivered.
* Other 4xx — per-record errors from the body when present, else every record of the batch is
  rejected with the status and the start of the body.

A record whose text is not UTF-8 is rejected before the request (JSON cannot carry it as it is).

Connection: an Airflow HTTP connection gives the base URL (``schema://host:port``), basic auth
(login/password; ``auth_type: bearer`` sends the password as a bearer token instead) and headers:
its extras, the Airflow HttpHook convention, or an extra named ``headers``. Extras and password are
secrets and reach the executors only through the environment.
Options: :class:`HttpOptions` — ``url`` (full) or ``endpoint`` (joined to the connection's base URL),
``method``, ``headers`` (non-secret ones), ``timeout``, ``record_errors``, ``verify``.
"""

from __future__ import annotations

import email.utils
import http.client
import time
from typing import Any, Sequence
from urllib.parse import urljoin, urlsplit

from spark_jobs.errors import ConfigError, DestinationError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry, Sink, SinkCapabilities, SinkConfig
from spark_jobs.contract.destinations import HttpOptions

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
FATAL_STATUSES = frozenset({401, 403, 404, 405})
#: HttpHook extras that are request settings, not headers.
NOT_HEADERS = frozenset({"headers", "auth_type", "verify", "timeout", "proxies", "cert", "stream",
                         "allow_redirects", "max_redirects", "trust_env", "check_response"})


#: 307/308 redirects a write follows (same origin only) before it gives up.
MAX_REDIRECTS = 5


def same_origin(url: str, other: str) -> bool:
    a, b = urlsplit(url), urlsplit(other)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def connection_failure(exc: Exception) -> str:
    """What a connection error means for the batch: refused before the request went out (nothing
    was applied), or the connection closed after it was sent — the server may have applied the
    batch, which is sent again (safely: records are applied by key)."""
    if any(isinstance(e, (http.client.RemoteDisconnected, ConnectionResetError)) for e in _causes(exc)):
        return ("lost its connection after sending the batch (the server may have applied it; it is sent "
                "again, which is safe since records are applied by key)")
    return "failed to connect"


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: requests and urllib3 pass the socket's error on as an argument."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 20:
        error = pending.pop()
        seen.append(error)
        pending += [a for a in error.args if isinstance(a, BaseException)]
        pending += [e for e in (error.__cause__, error.__context__) if e is not None]
    return seen


def retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: either a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


class HttpSink(Sink):
    name = "http"
    capabilities = SinkCapabilities(wants_json=True)
    options_class = HttpOptions
    options: HttpOptions

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        options = self.options
        self.url = options.url or self._join(options.endpoint)
        if not self.url:
            raise ConfigError("The http destination needs 'url', or 'endpoint' with an HTTP connection")
        self.method = options.method.upper()
        self.timeout = tuple(options.timeout) if isinstance(options.timeout, list) else options.timeout
        fields = options.record_errors
        self.record_error_fields = [fields] if isinstance(fields, str) else fields
        self.session: Any = None  # a requests.Session, opened per partition

    def _join(self, endpoint: str | None) -> str | None:
        conn = self.config.connection
        host = conn.get("host")
        if not host:
            return None
        if "://" not in host:
            host = f"{conn.get('schema') or 'http'}://{host}"
        if conn.get("port"):
            host = f"{host.rstrip('/')}:{conn['port']}"
        return host.rstrip("/") + "/" + (endpoint or "").lstrip("/")

    def _headers(self) -> dict[str, str]:
        extra = self.config.connection_extra()
        headers = extra.get("headers")
        if not isinstance(headers, dict):
            headers = {k: str(v) for k, v in extra.items() if k not in NOT_HEADERS and not isinstance(v, (dict, list))}
        return {"Content-Type": "application/json", **(self.options.headers or {}), **headers}

    def open(self) -> None:
        import requests

        session = requests.Session()
        session.headers.update(self._headers())
        login, password = self.config.connection.get("login"), self.config.password
        if self.config.connection_extra().get("auth_type") == "bearer" and password:
            session.headers["Authorization"] = f"Bearer {password}"
        elif login:
            session.auth = (login, password or "")
        session.verify = self.options.verify
        self.session = session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def payload(self, records: Sequence[ChangeRecord]) -> bytes:
        """The request body, assembled from the JSON Spark already wrote for each key and row: one
        vectorised string join per batch, no per-record serialisation in Python."""
        import pyarrow.compute as pc

        table = self.as_batch(records).table
        items = pc.binary_join_element_wise('{"op":"', table["_op"], '","key":', table["_key_json"], ',"data":',
                                            table["_data_json"], "}", "")
        return ('{"records":[' + ",".join(items.to_pylist()) + "]}").encode()

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        import requests

        assert self.session is not None, "the sink is not open"
        try:
            response = self._send(self.payload(records))
        except requests.Timeout as exc:
            raise RetryableError(f"{self.method} {self.url} timed out after {self.timeout}s") from exc
        except requests.ConnectionError as exc:
            raise RetryableError(f"{self.method} {self.url} {connection_failure(exc)}: {exc}") from exc
        status = response.status_code
        if status in TRANSIENT_STATUSES:
            raise RetryableError(f"HTTP {status} from {self.url}: {response.text[:200]}",
                                 retry_after=retry_after(response.headers.get("Retry-After")))
        if status in FATAL_STATUSES:
            raise DestinationError(f"HTTP {status} {response.reason} from {self.method} {self.url}: "
                                   f"{response.text[:500]} (check the URL, method and the connection's credentials)")
        per_record = self._record_errors(response, len(records))
        if per_record is not None:
            return per_record
        if 200 <= status < 300:
            return [None] * len(records)
        return [Rejected(f"HTTP {status}: {response.text[:500]}")] * len(records)

    def _send(self, body: bytes) -> Any:
        """One request of ``body``, following only redirects that keep the method and the body (307,
        308) and only to the same origin, where the connection's credentials belong. Any other
        redirect is refused: requests would follow a 301/302/303 as a GET without the body, whose 2xx
        counted as delivered although the server received nothing."""
        assert self.session is not None and self.url, "the sink is not open"
        url: str = self.url
        for _ in range(MAX_REDIRECTS + 1):
            response = self.session.request(self.method, url, data=body, timeout=self.timeout,
                                            allow_redirects=False)
            if not response.is_redirect:
                return response
            location = urljoin(url, response.headers["Location"])
            if response.status_code not in (307, 308) or not same_origin(url, location):
                raise DestinationError(
                    f"HTTP {response.status_code} from {self.method} {url} redirects to {location}: a write is "
                    "not followed there (301/302/303 would resend it as a GET without its records, another "
                    "origin would get the connection's credentials). Nothing of this batch was delivered; "
                    "point the destination's url or endpoint at the redirect's target.")
            url = location
        raise DestinationError(f"{self.method} {self.url} redirected more than {MAX_REDIRECTS} times "
                               f"(last to {url}); nothing of this batch was delivered")

    def _record_errors(self, response: Any, size: int) -> list[Outcome] | None:
        """Outcomes from the body's per-record errors, or None when the body reports none."""
        if not self.record_error_fields or not response.content:
            return None
        try:
            body = response.json()
        except ValueError:
            return None
        if not isinstance(body, dict):
            return None
        items = next((body[f] for f in self.record_error_fields if isinstance(body.get(f), list)), None)
        if items is None:
            return None
        full = len(items) == size  # one result per record: position is the index by default
        outcomes: list[Outcome] = [None] * size
        failures = 0
        for position, item in enumerate(items):
            if not isinstance(item, dict) or not (item.get("error") or item.get("status") == "error"):
                continue
            index = item.get("index", position if full else None)
            if not isinstance(index, int) or not 0 <= index < size:
                raise DestinationError(f"{self.url} reported an error for record index {index!r} of a batch of "
                                       f"{size}: {item!r}")
            reason = str(item.get("error") or item.get("message") or item)
            outcomes[index] = Retry(reason) if item.get("retryable") else Rejected(f"http: {reason}")
            failures += 1
        if response.status_code >= 300 and not failures:
            return None
        return outcomes
