"""The REST destination: any JSON API, described by :class:`~spark_jobs.contract.rest.RestOptions`.

A batch the delivery core hands over (:meth:`RestSink.write_batch`) becomes requests: its records
grouped by operation, each group sent one record per request (``per: record``) or in requests of at
most ``batch_size`` records (``per: batch``), in order, one after the other on this sink's thread
(the core's ``concurrency`` runs several sinks side by side). Each request waits for the sync's
``requests_per_second`` share first (:meth:`~spark_jobs.sinks.base.Sink.request_slot`) and retries
included. Outcomes come from the response (:mod:`.responses`), one per record, each proven by it; a
template value that cannot be placed (a null or ``..`` in the URL, a control character in a header, a
NaN in the body) rejects that record alone. What is wrong for every record — a template, a header of
the configuration or the connection, the credentials — fails the sync before anything is sent
(:meth:`RestSink.prepare`, and the sink's construction on the driver).

Transient failures: when the first request of a batch fails transiently (429, 5xx, timeout, refused
connection) the whole batch is retried by the core — the destination is down or overloaded, and when
it stays so the sync fails with a retryable error, nothing committed. When a later one does, the
requests already answered keep their outcomes and the rest are retried (``Retry``, with the
``Retry-After`` the API gave), so no record that got through is sent twice.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Sequence

from jinja2.exceptions import SecurityError, UndefinedError

from spark_jobs.contract.rest import MODE_OPERATIONS, RestOptions
from spark_jobs.contract.catalogue import REST
from spark_jobs.contract.templating import TemplateValueError, header_problem
from spark_jobs.errors import ConfigError, RetryableError
from spark_jobs.sinks.base import ChangeBatch, ChangeRecord, Outcome, Rejected, Retry, Sink, SinkCapabilities
from spark_jobs.sinks.base import SinkConfig
from spark_jobs.sinks.rest import rendering, responses
from spark_jobs.sinks.rest.auth import Authenticator
from spark_jobs.sinks.rest.rendering import RestRequest, Run
from spark_jobs.sinks.rest.transport import connection_headers, connection_url, send

#: A value of each Spark type for the templates' check on the driver (:meth:`RestSink.prepare`).
_SAMPLE = {"boolean": True, "tinyint": 1, "smallint": 1, "int": 1, "bigint": 1, "float": 1.5, "double": 1.5}


def _sample(kind: str) -> Any:
    """A made-up value of Spark type ``kind`` (a decimal is one, as records read it: :mod:`..json_numbers`)."""
    return Decimal("1.5") if kind.startswith("decimal") else _SAMPLE.get(kind, "x")


class RestSink(Sink):
    """The ``rest`` destination, and the base of every preset (see :mod:`spark_jobs.sinks.rest`)."""

    record = REST
    capabilities = SinkCapabilities(batch_size=100, wants_json=True, paces_requests=True)

    def __init__(self, config: SinkConfig):
        super().__init__(config)
        self.rest = self.rest_options()
        base = self.rest.base_url or connection_url(config.connection)
        missing = [op for op in MODE_OPERATIONS[config.mode] if op not in self.rest.operations]
        if missing:
            raise ConfigError(f"The {self.name} destination cannot take a {config.mode!r} sync: it declares no "
                              f"{' or '.join(missing)} operation (it declares {sorted(self.rest.operations)})")
        if base is None and any("://" not in op.url.split("{")[0] for op in self.rest.operations.values()):
            raise ConfigError(f"The {self.name} destination needs 'base_url' or a connection with a host: its "
                              "operation URLs are relative")
        self.base_url = base or ""
        secrets = {"password": config.password, "extra": config.connection_extra()}
        self.run = Run(config.table, config.consumer, config.to_version, dict(self.rest.vars),
                       {k: v for k, v in secrets.items() if v is not None})
        self.timeout = tuple(self.rest.timeout) if isinstance(self.rest.timeout, list) else self.rest.timeout
        self.session: Any = None  # a requests.Session, opened per sending thread
        self.auth = Authenticator(self.rest.auth, config.connection.get("login"), config.password,
                                  config.connection_extra(), self.timeout, self.rest.verify, self.base_url)

    # --- what a preset overrides ----------------------------------------------------------------
    def rest_options(self) -> RestOptions:
        """The REST description of this destination. The ``rest`` sink's options are it; a preset
        builds it from its own typed options."""
        assert isinstance(self.options, RestOptions)
        return self.options

    def render_body(self, request: RestRequest) -> bytes | None:
        """The body of ``request``: its operation's template (or the default body) rendered."""
        return rendering.body(request.op, request.operation, request.context)

    def read_response(self, request: RestRequest, response: Any) -> list[Outcome]:
        """One outcome per record of ``request`` from the API's ``response`` (a ``requests.Response``),
        as the operation's response options say; raise RetryableError / DestinationError for the
        whole request."""
        return responses.outcomes(request.response, responses.Reply.of(response), request.records, self.name,
                                  request.described, self.auth.redact)

    # --- driver side ----------------------------------------------------------------------------
    def prepare(self, schema: dict[str, str]) -> None:
        """Render every operation's templates for a made-up record of the sync's fields (plain values:
        ``x``, ``1``, ``Decimal("1.5")``), so that a template naming a field the records lack, or one that places even a
        plain value where it cannot go (a URL the client would send elsewhere), fails now, before
        anything is sent."""
        self._check_constant_headers()
        key = {name: _sample(schema.get(name, "")) for name in self.config.key_fields}
        data = {name: _sample(schema.get(name, "")) for name in self.config.fields}
        for op in self.rest.operations:
            record = ChangeRecord(op=op, key=key, data=key if op == "delete" else {**data, **key},
                                  change="delete" if op == "delete" else "insert", id="{}")
            try:
                self._request(op, [record])
            except (TemplateValueError, TypeError) as exc:  # TypeError: a decimal times a float, text plus a number
                raise ConfigError(f"The {self.name} destination's {op} operation: its templates cannot place a plain "
                                  f"made-up record ({key}): {exc}") from None
            except ConfigError as exc:
                raise ConfigError(f"{exc} (checked before sending, with the sync's fields {self.config.fields})") \
                    from None

    def _check_constant_headers(self) -> None:
        """The headers every request carries (the options', the connection's extras, the credentials a
        header holds) are configuration: one a client cannot send fails the sync, naming it (never its
        value, which may be a secret)."""
        constant = {**self._constant_headers(), **self.auth.constant_headers()}
        for name, value in constant.items():
            problem = header_problem(value)
            if problem:
                raise ConfigError(f"The {self.name} destination's header {name!r} (from its options, its connection's "
                                  f"extras or its credentials) {problem}; a header carries visible ASCII text")

    def _constant_headers(self) -> dict[str, str]:
        """The options' headers and the connection's extras that are headers."""
        return {**(self.rest.headers or {}), **connection_headers(self.config.connection_extra())}

    # --- executor side --------------------------------------------------------------------------
    def open(self) -> None:
        import requests

        session = requests.Session()
        session.headers.update({"Content-Type": "application/json", **self._constant_headers()})
        session.verify = self.rest.verify
        self.auth.prepare(session)
        self.session = session

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        batch = self.as_batch(records)
        outcomes: list[Outcome] = [None] * len(batch)
        plan = self._plan(batch)
        for number, positions in enumerate(plan):
            part = batch.take(positions)
            try:
                answered = self._send(part.ops[0], part)
            except RetryableError as exc:
                if number == 0:
                    raise  # nothing got through: the core retries the whole batch
                for rest in plan[number:]:
                    for position in rest:
                        outcomes[position] = Retry(str(exc), exc.retry_after)
                break
            for position, outcome in zip(positions, answered):
                outcomes[position] = outcome
        return outcomes

    def _plan(self, batch: ChangeBatch) -> list[list[int]]:
        """The batch's records as requests (positions in the batch), in order of first appearance: one
        per request (``per: record``), or up to ``batch_size`` per request of records whose operations
        share one request description (a preset that sends every operation alike, as ``http`` does,
        sends a mirror batch's upserts and deletes together)."""
        groups: dict[int, list[int]] = {}
        for position, op in enumerate(batch.ops):
            groups.setdefault(id(self.rest.operations[op]), []).append(position)
        plan = []
        for positions in groups.values():
            operation = self.rest.operations[batch.ops[positions[0]]]
            size = 1 if operation.per == "record" else operation.batch_size or len(positions)
            plan += [positions[i:i + size] for i in range(0, len(positions), size)]
        return plan

    def _send(self, op: str, records: Sequence[ChangeRecord]) -> list[Outcome]:
        try:
            request = self._request(op, records)
        except TemplateValueError as exc:
            return [Rejected(f"{self.name}: {exc}", sent=False)] * len(records)
        return self.read_response(request, self._exchange(request.method, request.url, request.headers, request.body))

    def _request(self, op: str, records: Sequence[ChangeRecord]) -> RestRequest:
        operation = self.rest.operations[op]
        values = rendering.context(self.run, op, operation, records)
        try:
            headers = rendering.headers(operation, values)
            if self.rest.idempotency_header:
                headers[self.rest.idempotency_header] = values["idempotency_key"]
            request = RestRequest(op, operation, operation.response or self.rest.response, records, values,
                                  operation.method, rendering.url(self.base_url, operation, values), headers)
            request.body = self.render_body(request)
        except (UndefinedError, SecurityError) as exc:
            raise ConfigError(f"The {self.name} destination's {op} operation: a template failed: {exc}") from None
        return request

    def _exchange(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Any:
        """Send one request (paced, authenticated); after a 401 to an OAuth2 token, once more with a new one."""
        sent = {**headers, **self.auth.headers()}
        response = self._sent(method, url, sent, body)
        if response.status_code == 401 and self.auth.refresh_after_401(sent):
            response = self._sent(method, url, {**headers, **self.auth.headers()}, body)
        return response

    def _sent(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Any:
        assert self.session is not None, "the sink is not open"
        with self.request_slot():
            return send(self.session, method, url, timeout=self.timeout, redact=self.auth.redact, data=body,
                        headers=headers)
