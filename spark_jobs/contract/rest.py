"""What a REST destination may say: per operation the request (method, URL, body, headers, records per
request), how to read the response, the auth, and the idempotency key — data, checked like every
option (at DAG parse time for a built-in destination), so any JSON API is reachable without code.

A destination is ``{"type": "rest", ...}`` with :class:`RestOptions`::

    {"type": "rest",
     "base_url": "https://api.example.com/v2",          # or the Airflow connection's host
     "auth": {"type": "oauth2_client_credentials", "token_url": "https://api.example.com/oauth/token"},
     "operations": {
         "upsert": {"method": "PUT", "url": "/contacts/{{ key.email }}", "per": "record",
                    "body": '{"name": {{ data.name }}, "plan": {{ data.plan }}}'},
         "delete": {"method": "DELETE", "url": "/contacts/{{ key.email }}", "per": "record",
                    "response": {"success": ["2xx", 404]}}}}

Templates are Jinja in a sandbox (:mod:`.templating`: what each place escapes, which names a
template is given). Response paths are `JMESPath <https://jmespath.org>`_ expressions (the query
language of the AWS CLI): ``results``, ``data.items``, ``errors[0].message``, ``status >= `300```.

How a response is read (:class:`RestResponse`): every record of a request ends with one outcome the
response proves — acknowledged, rejected into the ledger with the API's reason, or sent again (and
after the delivery's last attempt rejected with that reason) — never counted as sent unless the
response says so for it. By the response's status and body:

============================================  =================================================================
the response                                  each record of the request
============================================  =================================================================
status in ``retry``                           sent again after a backoff (``Retry-After`` honoured)
status in ``fatal``                           the sync fails, nothing committed (credentials, URL, method)
status in ``success``, ``failed`` true        as a refused request (below); a body ``failed`` cannot read
                                              (not JSON): sent again, "the API did not answer for this record"
status in ``success``, no ``records``         acknowledged
status in ``success``, results found          its result's outcome: acknowledged, rejected (``record_failed``),
                                              or sent again (``record_retryable``); without a result
                                              (``records_listed: all``, or a failure naming no record):
                                              sent again, "the API did not answer for this record";
                                              without a result, ``records_listed: failed``: acknowledged
status in ``success``, no results list        ``records_listed: all``: sent again, "the API did not answer
                                              for this record"; ``failed``: acknowledged
any other status (a refused request)          results that fail records: those records get their outcome,
                                              the others are sent again without them (a full list's
                                              successes acknowledged); else every record rejected with the
                                              status and the API's ``error``
============================================  =================================================================

A result names its record by ``match_result``/``match_record``, else by ``record_index``, else by its
position when there is one result per record; a result naming no record of the request accounts for
none. A ``2xx`` whose body says the request was refused (``{"status": 0, "error": ...}``, ``{"ok":
false}``) is configured with ``failed``, a JMESPath predicate on the body: ``"failed": "status ==
`0`"``.

Redirects are the shared core's (:mod:`spark_jobs.sinks.rest.transport`): a 307/308 to the same
origin is followed with the same method and body, any other redirect fails the sync.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from spark_jobs.contract.options import Invalid, Options, at_least_one, checked, mapping, option, optional
from spark_jobs.contract.sink_options import SinkOptions
from spark_jobs.contract.templating import BATCH_NAMES, RECORD_NAMES, Place, template_problem
from spark_jobs.errors import ConfigError

#: The destination operations a sync sends (:mod:`spark_jobs.jobs.sync`'s modes pick among them).
REST_OPERATIONS = ("upsert", "insert", "update", "delete")
#: The operations each sync mode sends (:mod:`spark_jobs.jobs.sync`): the ones a destination must declare.
MODE_OPERATIONS = {"upsert": ("upsert",), "insert": ("insert",), "update": ("update",),
                   "mirror": ("upsert", "delete")}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: Statuses that say "try again later" (HTTP semantics; 425 Too Early is RFC 8470).
RETRY_STATUSES = (408, 425, 429, 500, 502, 503, 504)
#: Statuses that say the request cannot succeed as configured: credentials (401, 403), URL (404) or
#: method (405). A 404 of a per-record DELETE usually means "already gone": list it in that
#: operation's ``success``.
FATAL_STATUSES = (401, 403, 404, 405)
_STATUS_CLASS = re.compile(r"^[1-5]xx$")


def connection_url(connection: dict[str, Any], path: str | None = "") -> str | None:
    """``path`` joined to the connection's ``schema://host:port`` (None: the connection has no host)."""
    host = connection.get("host")
    if not host:
        return None
    if "://" not in host:
        host = f"{connection.get('schema') or 'http'}://{host}"
    if connection.get("port"):
        host = f"{host.rstrip('/')}:{connection['port']}"
    return host.rstrip("/") + "/" + (path or "").lstrip("/")


def statuses(value: Any) -> list[int | str]:
    """HTTP statuses: numbers (``404``) or classes (``"2xx"``)."""
    if not isinstance(value, (list, tuple)):
        value = [value]
    checked: list[int | str] = []
    for item in value:
        if isinstance(item, str) and _STATUS_CLASS.match(item.strip().lower()):
            checked.append(item.strip().lower())
        elif isinstance(item, (int, str)) and not isinstance(item, bool) and str(item).strip().isdigit() \
                and 100 <= int(item) <= 599:
            checked.append(int(item))
        else:
            raise Invalid("HTTP statuses: numbers 100-599 or classes such as '2xx'")
    return checked


def status_in(status: int, allowed: list[int | str]) -> bool:
    return status in allowed or f"{status // 100}xx" in allowed


def jmespath_expression(value: Any) -> str:
    """A JMESPath expression (compiled once here to refuse a bad one early)."""
    import jmespath
    from jmespath.exceptions import JMESPathError

    if not isinstance(value, str) or not value.strip():
        raise Invalid("a JMESPath expression")
    try:
        jmespath.compile(value)
    except JMESPathError as exc:
        raise Invalid(f"a JMESPath expression ({str(exc).splitlines()[0]})") from None
    return value


def jmespath_list(value: Any) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)):
        raise Invalid("a JMESPath expression or a list of them")
    return [jmespath_expression(v) for v in values]


def http_method(value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in METHODS:
        raise Invalid(f"one of {', '.join(METHODS)}")
    return value.upper()


def header_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", value):
        raise Invalid("an HTTP header name")
    return value


def _nested(cls: type[Any]) -> Any:
    """The check of an option that is itself a set of options, given as a mapping."""
    def check(value: Any) -> Any:
        return value if isinstance(value, cls) else cls.from_dict(mapping(value))
    return check


@dataclass(frozen=True, kw_only=True)
class RestResponse(Options):
    """How a response is read (the module docstring's decision table). The ``record_*`` expressions are
    evaluated on each item of the per-record results."""

    success: list[int | str] = option(factory=lambda: ["2xx"], check=statuses,
                                      doc="statuses of a request that succeeded (numbers, or classes like '2xx')")
    retry: list[int | str] = option(factory=lambda: list(RETRY_STATUSES), check=statuses,
                                    doc="statuses of a transient failure: sent again after a backoff")
    fatal: list[int | str] = option(factory=lambda: list(FATAL_STATUSES), check=statuses,
                                    doc="statuses that fail the sync (the destination is unusable as configured)")
    failed: str | None = option(None, optional(jmespath_expression),
                                doc="true for the body of a success status that says the request was refused "
                                    "(e.g. status == `0`): read as a refused request")
    records: list[str] = option(factory=list, check=jmespath_list,
                                doc="where the per-record results are: JMESPath expression(s), the first that "
                                    "gives a list is used; [] reads none")
    records_listed: Literal["all", "failed"] | None = option(
        None, doc="which records the results list: all (a record without a result is sent again) or only the "
                  "failed ones (a record without one was applied); default: failed when record_failed is `true`, "
                  "else all")
    record_failed: str = option("error || status == 'error'", jmespath_expression,
                                doc="true for an item whose record failed")
    record_error: str = option("error || message", jmespath_expression,
                               doc="the reason of a failed item (default: the item itself)")
    record_retryable: str | None = option("retryable", optional(jmespath_expression),
                                          doc="true for a failed item worth sending again")
    record_index: str | None = option("index", optional(jmespath_expression),
                                      doc="the item's record as its position in the request; an item without "
                                          "one is matched by its own position when there is one item per record")
    match_result: str | None = option(None, optional(jmespath_expression),
                                      doc="match items to records by value instead: the item's value(s)...")
    match_record: str | None = option(None, optional(jmespath_expression),
                                      doc="...equal to this in the record ({op, change, key, data}), e.g. key.email")
    error: str | None = option("error || message", optional(jmespath_expression),
                               doc="the reason in the body of a refused request (default: the body's start)")

    def validate(self) -> None:
        if (self.match_result is None) != (self.match_record is None):
            raise ConfigError(f"{self.where()}: match_result and match_record go together (the item's value and "
                              "the record's value that must be equal)")

    @property
    def lists_all(self) -> bool:
        """Whether the results list every record of a request (``records_listed``; a list whose every item
        is a failure can only list the failures)."""
        if self.records_listed is not None:
            return self.records_listed == "all"
        return self.record_failed.strip() != "`true`"

    @classmethod
    def static_where(cls) -> str:
        return "The rest destination's response"


#: The options of an operation that are templates the sink renders per record (the rest are options
#: like any other, which Airflow renders when the task runs).
SINK_TEMPLATES = ("url", "body", "headers")


def _template(place: Place, names: frozenset[str]) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise Invalid("a template (text)")
        problem = template_problem(value, place, names)
        if problem:
            raise Invalid(f"a template that compiles; this one {problem}")
        return value
    return check


@dataclass(frozen=True, kw_only=True)
class RestOperation(Options):
    """One destination operation as requests: sent one record at a time (``per: record``: the URL,
    body and headers may use the record's ``key`` and ``data``) or as batches of records (``per:
    batch``: they may use ``records``)."""

    method: str = option("POST", http_method, doc="the HTTP method")
    url: str = option(doc="URL template: absolute, or a path joined to base_url (or the connection's URL)")
    per: Literal["record", "batch"] = option("batch", doc="one request per record, or per batch of records")
    body: str | None = option(None, doc="body template (JSON); default: per record {{ data }}, per batch "
                                        "{{ records | map(attribute='data') | list }}; none for DELETE and GET")
    batch_size: int | None = option(None, optional(at_least_one),
                                    doc="most records per request (per batch; default: the delivery's batch)")
    headers: dict[str, str] = option(factory=dict, doc="header templates (non-secret)")
    response: RestResponse | None = option(None, optional(_nested(RestResponse)),
                                           doc="how this operation's responses are read (default: the destination's)")

    def validate(self) -> None:
        names = RECORD_NAMES if self.per == "record" else BATCH_NAMES
        where = self.where()
        url_check, body_check, header_check = (_template(p, names) for p in ("url", "body", "header"))
        checked(where, "url", url_check, self.url)
        if self.body is not None:
            checked(where, "body", body_check, self.body)
        for name, value in self.headers.items():
            checked(where, f"headers[{name!r}]", header_name, name)
            checked(where, f"headers[{name!r}]", header_check, value)

    @classmethod
    def static_where(cls) -> str:
        return "The rest destination's operation"


AUTH_TYPES = ("connection", "none", "basic", "bearer", "api_key", "oauth2_client_credentials")


@dataclass(frozen=True, kw_only=True)
class RestAuth(Options):
    """How requests authenticate. The secret is always the Airflow connection's password (a token, an
    API key, an OAuth2 client secret), which reaches the Spark side through the environment only;
    ``login`` is the user name or the OAuth2 client id.

    * ``connection`` (default): as the ``http`` destination always did — ``auth_type: bearer`` in the
      extras sends the password as a bearer token, otherwise a login makes it basic auth;
    * ``basic``, ``bearer``: login/password, or the password as ``Authorization: Bearer``;
    * ``api_key``: the password in the ``header`` (``prefix`` before it), or as the query parameter
      ``query``;
    * ``oauth2_client_credentials``: a token from ``token_url`` (RFC 6749 §4.4), fetched once per
      process and shared by its sending threads, refreshed before it expires and once on a 401."""

    type: Literal["connection", "none", "basic", "bearer", "api_key", "oauth2_client_credentials"] = option(
        "connection", doc=f"one of {', '.join(AUTH_TYPES)}")
    header: str = option("X-API-Key", header_name, doc="api_key: the header that carries the key")
    prefix: str = option("", doc="api_key: text before the key in the header (e.g. 'Token ')")
    query: str | None = option(None, doc="api_key: send the key as this query parameter instead of a header")
    token_url: str | None = option(None, doc="oauth2_client_credentials: the token endpoint (absolute, or a "
                                             "path joined to the base URL)")
    scope: str | None = option(None, doc="oauth2_client_credentials: the scope asked for")
    token_params: dict[str, str] = option(factory=dict, doc="oauth2_client_credentials: more form fields of the "
                                                            "token request (e.g. audience)")
    client_auth: Literal["basic", "body"] = option(
        "basic", doc="oauth2_client_credentials: client id and secret as basic auth, or in the form body")

    def validate(self) -> None:
        if self.type == "oauth2_client_credentials" and not self.token_url:
            raise ConfigError(f"{self.where()}: type 'oauth2_client_credentials' needs token_url")

    @classmethod
    def static_where(cls) -> str:
        return "The rest destination's auth"


def operations(value: Any) -> dict[str, RestOperation]:
    """``{operation: request}``; a refused request is named by its operation."""
    given = mapping(value)
    if not given or not set(given) <= set(REST_OPERATIONS):
        raise Invalid(f"a mapping of operations ({', '.join(REST_OPERATIONS)}) to their requests")
    built = {}
    for name, request in given.items():
        where = f"The rest destination's {name} operation"
        try:
            built[name] = request if isinstance(request, RestOperation) else \
                RestOperation.from_dict(mapping(request), where)
        except ConfigError as exc:  # its own response options name themselves: name them under the operation
            response = RestResponse.static_where()
            if not str(exc).startswith(response):
                raise
            raise ConfigError(f"{where}'s response{str(exc).removeprefix(response)}") from None
    return built


@dataclass(frozen=True, kw_only=True)
class RestOptions(SinkOptions):
    """The ``rest`` destination (the module docstring)."""

    operations: dict[str, RestOperation] = option(
        check=operations, doc="the requests of each operation: {upsert|insert|update|delete: {method, url, ...}}")
    base_url: str | None = option(None, doc="the URL relative operation URLs are joined to (default: the "
                                            "connection's schema://host:port)")
    headers: dict[str, str] | None = option(None, doc="non-secret headers of every request (secret ones belong "
                                                      "in the connection's extras)")
    auth: RestAuth = option(factory=RestAuth, check=_nested(RestAuth), doc="how requests authenticate")
    response: RestResponse = option(factory=RestResponse, check=_nested(RestResponse),
                                    doc="how responses are read (an operation may override it)")
    timeout: float | list[float] = option(30.0, doc="seconds to wait for the server, or [connect, read]")
    verify: bool | str = option(True, doc="verify TLS certificates (or the path of a CA bundle)")
    idempotency_header: str | None = option(None, optional(header_name),
                                            doc="send an idempotency key in this header (e.g. Idempotency-Key)")
    vars: dict[str, Any] = option(factory=dict, doc="constants the templates read as vars.<name>")
