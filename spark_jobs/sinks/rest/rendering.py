"""Turning records into requests: the template context of a record or a batch, the URL, headers and
body each operation's templates give (:mod:`spark_jobs.contract.templating` escapes every value for
its place), and the idempotency key.

A rendered URL is the URL sent: after the templates' own checks (no value makes a path segment empty,
``.`` or ``..``) it is compared with the URL the HTTP client prepares from it
(:func:`~spark_jobs.sinks.rest.transport.as_sent`), and any difference refuses the record — a client
that normalises a path would send it elsewhere. A header is refused unless the client sends it as it
is (:func:`~spark_jobs.contract.templating.header_problem`).

The idempotency key of a request is a UUID derived from (snapshot table, consumer, change-set
version, and the operation and ledger name of each record it carries — sorted for a batch). A resend of
the same records of the same change set — the core retrying a batch whose response was lost, an
Airflow retry of the sync after a crash — carries the same key, so an API that honours the key
applies the request once, even an ``insert``. A later run that folds more versions into its change
set sends a new key: its records are of another version.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

from spark_jobs.contract.rest import RestOperation, RestResponse
from spark_jobs.contract.templating import Place, TemplateValueError, body_json, compiled, header_problem, placed_url
from spark_jobs.errors import ConfigError
from spark_jobs.sinks.base import ChangeRecord
from spark_jobs.sinks.rest.transport import as_sent, joined

#: The namespace of idempotency keys (a fixed UUID: keys are the same on every machine and run).
IDEMPOTENCY_NAMESPACE = uuid.UUID("5d9c3c1e-0b7a-4c3e-9a56-7e1f2b8d4a10")


@dataclass(frozen=True)
class Run:
    """What every request of a sync shares: the change set it delivers, the templates' ``vars`` and
    ``secrets`` (the connection's password and extras, as the executor read them)."""

    table: str
    consumer: str
    version: int | None
    vars: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class RestRequest:
    """One request of an operation, rendered: what a preset's hooks receive."""

    op: str
    operation: RestOperation
    response: RestResponse  # how its response is read (the operation's own, or the destination's)
    records: Sequence[ChangeRecord]
    context: dict[str, Any]  # the template context it was rendered with
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None = None

    @property
    def described(self) -> str:
        """``METHOD url``, for messages."""
        return f"{self.method} {self.url}"


def idempotency_key(run: Run, records: Sequence[ChangeRecord]) -> str:
    ids = "\n".join(sorted(f"{record.op} {record.id}" for record in records))
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{run.table}\n{run.consumer}\n{run.version}\n{ids}"))


def as_dict(record: ChangeRecord) -> dict[str, Any]:
    return {"op": record.op, "change": record.change, "key": record.key, "data": record.data}


def context(run: Run, op: str, operation: RestOperation, records: Sequence[ChangeRecord]) -> dict[str, Any]:
    """The names a template of ``operation`` is given (:data:`~spark_jobs.contract.templating.RECORD_NAMES`,
    :data:`~spark_jobs.contract.templating.BATCH_NAMES`)."""
    shared = {"op": op, "vars": run.vars, "secrets": run.secrets, "table": run.table, "consumer": run.consumer,
              "version": run.version, "idempotency_key": idempotency_key(run, records)}
    if operation.per == "record":
        [record] = records
        return {**shared, "change": record.change, "key": record.key, "data": record.data, "record": as_dict(record)}
    return {**shared, "records": [as_dict(r) for r in records], "keys": [r.key for r in records]}


def render(source: str, place: Place, values: dict[str, Any]) -> str:
    text: str = compiled(source, place).render(values)
    return text


def url(base: str, operation: RestOperation, values: dict[str, Any]) -> str:
    """The operation's URL for ``values``, as the HTTP client will send it (the module docstring)."""
    rendered = joined(base, placed_url(render(operation.url, "url", values)))
    sent = as_sent(rendered)
    if sent != rendered:
        raise TemplateValueError(f"the URL {rendered} would be sent as {sent or 'nothing: it is no URL'}")
    return rendered


def headers(operation: RestOperation, values: dict[str, Any]) -> dict[str, str]:
    rendered = {}
    for name, template in operation.headers.items():
        text = render(template, "header", values)
        problem = header_problem(text)
        if problem:
            raise TemplateValueError(f"the value of header {name!r} {problem}; a header carries visible ASCII text")
        rendered[name] = text
    return rendered


def body(op: str, operation: RestOperation, values: dict[str, Any]) -> bytes | None:
    """The request body: the operation's template rendered (and checked to be JSON), or the default
    (:class:`~spark_jobs.contract.rest.RestOperation`'s ``body``)."""
    if operation.body is None:
        if operation.method in ("DELETE", "GET"):
            return None
        data = values["data"] if operation.per == "record" else [r["data"] for r in values["records"]]
        return body_json(data).encode()
    text = render(operation.body, "body", values)
    try:
        json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"The rest destination's {op} body template gave text that is not JSON ({exc}); a "
                          "{{ … }} is written as a JSON value already, so it takes no quotes around it") from None
    return text.encode()
