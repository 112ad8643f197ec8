"""The HTTP plumbing every REST destination shares: where requests go, the session with the
connection's headers, one request with its redirect policy, and what a failure to get an answer means.

* Base URL: ``base_url`` (or ``url``) as given, else the Airflow connection's ``schema://host:port``.
* Headers: the connection's extras, the Airflow ``HttpHook`` convention (every extra that is not a
  request setting is a header), or an extra named ``headers``; the extras are secrets and reach the
  executors only through the environment.
* Redirects: a 307/308 to the same origin is followed with the same method and body (at most
  :data:`MAX_REDIRECTS`); any other redirect fails the sync naming the status and the ``Location``:
  requests would follow a 301/302/303 as a GET without the body, whose 2xx would count as delivered
  although the server received nothing, and another origin would get the connection's credentials.
* Failures to get an answer are transient (:class:`~spark_jobs.errors.RetryableError`): a timeout, a
  refused connection, or a connection closed after the request went out — which the message says may
  have been applied (it is sent again, which is safe since records are applied by key, or carry an
  idempotency key).
"""

from __future__ import annotations

import email.utils
import http.client
import time
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

from spark_jobs.contract.rest import connection_url as connection_url
from spark_jobs.errors import DestinationError, RetryableError

#: 307/308 redirects a write follows (same origin only) before it gives up.
MAX_REDIRECTS = 5
#: HttpHook extras that are request settings, not headers.
NOT_HEADERS = frozenset({"headers", "auth_type", "verify", "timeout", "proxies", "cert", "stream",
                         "allow_redirects", "max_redirects", "trust_env", "check_response"})


def joined(base: str, url: str) -> str:
    """``url`` as it is when absolute, else appended to ``base`` (``/contacts`` under
    ``https://api.example.com/v2`` is ``https://api.example.com/v2/contacts``, not RFC 3986's join,
    which would drop ``/v2``)."""
    if urlsplit(url).scheme:
        return url
    return base.rstrip("/") + "/" + url.lstrip("/") if url else base


def as_sent(url: str) -> str:
    """``url`` as the HTTP client (requests, urllib3) prepares it — its path normalised, its escapes
    re-quoted —, compared with the URL rendered: scheme and host as the rendered URL spells them when
    they differ only in case (a host is case-insensitive); "" when the client refuses it as no URL."""
    from requests.exceptions import RequestException
    from requests.models import PreparedRequest

    prepared = PreparedRequest()
    try:
        prepared.prepare_url(url, None)
    except (RequestException, ValueError):
        return ""
    sent, rendered = urlsplit(prepared.url or ""), urlsplit(url)
    if (sent.scheme, sent.netloc) == (rendered.scheme.lower(), rendered.netloc.lower()):
        sent = sent._replace(scheme=rendered.scheme, netloc=rendered.netloc)
    if sent.path == "/" and not rendered.path:  # the client asks for "/" where the URL names no path
        sent = sent._replace(path="")
    return sent.geturl()


def connection_headers(extra: dict[str, Any]) -> dict[str, str]:
    """The headers a connection's extras give (the module docstring)."""
    headers = extra.get("headers")
    if isinstance(headers, dict):
        return {str(k): str(v) for k, v in headers.items()}
    return {k: str(v) for k, v in extra.items() if k not in NOT_HEADERS and not isinstance(v, (dict, list))}


def same_origin(url: str, other: str) -> bool:
    a, b = urlsplit(url), urlsplit(other)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: either a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def connection_failure(exc: Exception) -> str:
    """What a connection error means for the request: refused before it went out (nothing was
    applied), or the connection closed after it was sent — the server may have applied it."""
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


def send(session: Any, method: str, url: str, *, timeout: Any, redact: Callable[[str], str] = str,
         **request: Any) -> Any:
    """One request, following only redirects that keep the method and the body, and only to the same
    origin (the module docstring). A timeout or a connection error is a RetryableError whose message
    went through ``redact`` (requests' own messages quote the URL with its query string, where an API
    key may be): one that lost a secret is raised without the original error chained to it."""
    import requests

    target = url
    try:
        for _ in range(MAX_REDIRECTS + 1):
            response = session.request(method, target, timeout=timeout, allow_redirects=False, **request)
            if not response.is_redirect:
                return response
            location = urljoin(target, response.headers["Location"])
            if response.status_code not in (307, 308) or not same_origin(target, location):
                raise DestinationError(
                    f"HTTP {response.status_code} from {method} {target} redirects to {location}: a write is "
                    "not followed there (301/302/303 would resend it as a GET without its records, another "
                    "origin would get the connection's credentials). Nothing of this batch was delivered; "
                    "point the destination's url or endpoint at the redirect's target.")
            target = location
    except requests.Timeout as exc:
        raise RetryableError(f"{method} {url} timed out after {timeout}s") from exc
    except requests.ConnectionError as exc:
        message = f"{method} {url} {connection_failure(exc)}: {exc}"
        if redact(message) != message:
            raise RetryableError(redact(message)) from None
        raise RetryableError(message) from exc
    raise DestinationError(f"{method} {url} redirected more than {MAX_REDIRECTS} times "
                           f"(last to {target}); nothing of this batch was delivered")
