"""What the built-in SaaS destinations (Salesforce, HubSpot, Braze) add to the REST core
(:mod:`spark_jobs.sinks.rest`): each is a :class:`~spark_jobs.sinks.rest.RestSink` preset — its
requests and the reading of their responses are REST options built from its own typed options — and
this base adds the three things configuration cannot say:

* **values in the vendor's types.** Before a request is rendered, each record's values are converted
  by the destination's own field types (:meth:`SaasSink.converted`, read from the vendor's schema
  endpoint); a value that cannot be said faithfully rejects its record alone, naming the field —
  never a whole request of records, never a rounded or shifted value;
* **several requests for one operation** (:meth:`SaasSink.send_operation`): a delete by a key the API
  cannot delete by looks the API's own ids up first; a large batch becomes an asynchronous job;
* **auxiliary requests** (:meth:`SaasSink.auxiliary_request`): lookups, schema reads and job steps go through the
  same core as every request — authenticated (OAuth2 tokens shared by the process and renewed after a
  401), paced to the sync's requests per second, redirects refused, secrets kept out of messages —
  and a transient answer raises :class:`~spark_jobs.errors.RetryableError` for the delivery core to
  retry, a refused credential :class:`~spark_jobs.errors.DestinationError`.

What an answer means is the vendor's to say, for the operations and the auxiliary requests alike: a
429 or 5xx is transient, and so is what the vendor documents as passing (:meth:`SaasSink.transient`:
Salesforce's 403 for too many long requests at once); a limit the vendor documents as lasting past the
run (:meth:`SaasSink.exhausted`: HubSpot's DAILY 429, Salesforce's 24-hour allocation) fails the sync at
once, naming it, instead of being retried for minutes. The schema reads that happen outside a batch —
on the driver before anything is sent (``prepare``) and when a worker opens its sink — are retried as
the delivery core retries a batch (:meth:`SaasSink.waited_out`): a 429 on a sync's first request is
waited out, not a failed sync.

Records reach these sinks as Python values from the Arrow batch (``wants_json`` off), so a
``DECIMAL`` is a ``Decimal`` and a ``DATE`` a ``date`` when converted, not their JSON renderings.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Generic, Hashable, Sequence, TypeVar

from tenacity import RetryCallState

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.contract.rest import RETRY_STATUSES
from spark_jobs.errors import DestinationError, DestinationUnreachableError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, SinkCapabilities, SinkConfig
from spark_jobs.sinks.core import retrying
from spark_jobs.sinks.rest import RestRequest, RestSink
from spark_jobs.sinks.rest.responses import Reply
from spark_jobs.sinks.rest.transport import connection_headers
from spark_jobs.sinks.saas.values import Unconvertible

T = TypeVar("T")
log = logging.getLogger("airflow_reverse_etl.sink")


class SchemaCache(Generic[T]):
    """What a destination says about its schema (HubSpot's properties, a Salesforce describe), kept per
    process for ``ttl`` seconds: the lanes and partitions of one sync on a Spark worker ask once, and a
    worker that lives on (Spark reuses them) sees a change to the destination within minutes. The
    driver's check before a sync (``prepare``) always asks afresh (``fresh=True``)."""

    def __init__(self, ttl: float = 300.0):
        self.ttl = ttl
        self._entries: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, fetch: Callable[[], T], fresh: bool = False) -> T:
        with self._lock:
            entry = self._entries.get(key)
            if fresh or entry is None or time.monotonic() - entry[0] > self.ttl:
                entry = self._entries[key] = (time.monotonic(), fetch())
            return entry[1]


class SaasSink(RestSink):
    """Base of the SaaS presets (the module docstring)."""

    capabilities = SinkCapabilities(wants_json=False, paces_requests=True)

    def __init__(self, config: SinkConfig):
        """The options are checked first — a misspelt option is the first thing a sync is told — then
        what the vendor needs of the sync (:meth:`precondition`), then the REST core builds the rest."""
        if self.options_class is not None:
            self.options_class.parse(config.destination, self.name)
        self.precondition(config)
        super().__init__(self.signed_in(config))

    # --- what a vendor module defines ---------------------------------------------------------------
    def precondition(self, config: SinkConfig) -> None:
        """Raise :class:`~spark_jobs.errors.ConfigError` for a sync this destination cannot take (its key,
        its mode, its connection), before anything else."""

    def signed_in(self, config: SinkConfig) -> SinkConfig:
        """``config`` as the REST core's auth reads it (by default as it is)."""
        return config

    def converted(self, record: ChangeRecord) -> dict[str, Any]:
        """``record.data`` in the destination's types; :class:`Unconvertible` naming the field."""
        return dict(record.data)

    def send_operation(self, op: str, records: list[ChangeRecord]) -> list[Outcome]:
        """Send records whose values are converted: by default the operation's one request."""
        return super()._send(op, records)

    def retry_wait(self, reply: Reply, headers: Any) -> float | None:
        """How long a transient answer asks to wait when it has no ``Retry-After`` (vendor headers)."""
        return None

    def transient(self, reply: Reply) -> bool:
        """Whether an answer that is no 429 or 5xx is one the vendor documents as passing."""
        return False

    def exhausted(self, reply: Reply) -> str | None:
        """What a limit the vendor documents as lasting past this run says (None: the answer is no such
        limit): the sync fails with it rather than retrying for nothing."""
        return None

    def api_base(self) -> str:
        """Where the API is, once signed in (by default the configured base URL)."""
        return str(self.base_url)

    # --- the REST core's hooks -----------------------------------------------------------------------
    def open(self) -> None:
        """The REST core's session, less the headers it makes of the connection's extras: a SaaS
        connection's extras are its settings (Salesforce's consumer key and secret, its instance URL),
        never headers to send to the API."""
        super().open()
        for name in connection_headers(self.config.connection_extra()):
            self.session.headers.pop(name, None)
        self.base_url = self.waited_out(self.api_base)

    def read_response(self, request: RestRequest, response: Any) -> list[Outcome]:
        """As the operation's response options say; a transient answer without ``Retry-After`` waits what
        the vendor's own headers say (:meth:`retry_wait`)."""
        reply = Reply.of(response)
        self._judge(reply, request.described)
        try:
            return super().read_response(request, response)
        except RetryableError as exc:
            if exc.retry_after is not None:
                raise
            raise RetryableError(str(exc), retry_after=self.retry_wait(reply, response.headers)) from None

    def _send(self, op: str, records: Sequence[ChangeRecord]) -> list[Outcome]:
        outcomes: list[Outcome] = [None] * len(records)
        ready, where = [], []
        for i, record in enumerate(records):
            try:
                ready.append(replace(record, data=self.converted(record)))
                where.append(i)
            except Unconvertible as exc:
                outcomes[i] = Rejected(f"{self.name}: {exc}")
        if ready:
            for i, outcome in zip(where, self.send_operation(op, ready)):
                outcomes[i] = outcome
        return outcomes

    # --- auxiliary requests --------------------------------------------------------------------------
    def asked_on_the_driver(self, ask: Callable[[], T]) -> T:
        """What ``ask`` gets from the destination in :meth:`prepare`, on the driver, where the sink is not
        open: a session for it (this base's, not a vendor's ``open``, which reads the schema), closed after."""
        SaasSink.open(self)
        try:
            return self.waited_out(ask)
        finally:
            self.close()

    def waited_out(self, ask: Callable[[], T]) -> T:
        """``ask()``, its transient failures retried as the delivery core retries a batch
        (:func:`spark_jobs.sinks.core.retrying` with the default delivery policy: its attempts and
        backoff, a wait the vendor names honoured): for the requests outside a batch, which no core retries."""
        policy = DeliveryPolicy()

        def warn(state: RetryCallState) -> None:
            failure = state.outcome.exception() if state.outcome else None
            log.warning("%s: attempt %d failed (%s); trying again", self.name, state.attempt_number, failure)

        try:
            return retrying(policy, warn)(ask)
        except RetryableError as exc:
            raise DestinationUnreachableError(f"{self.name}: still failing after {policy.max_attempts} attempts: "
                                              f"{exc}") from exc

    def auxiliary_request(self, method: str, url: str, *, json_body: Any = None, data: bytes | None = None,
             headers: dict[str, str] | None = None, ok: Sequence[int] = (200,)) -> Any:
        """One request outside the operations (module docstring); the response (``requests``') when its
        status is in ``ok``, else :class:`DestinationError` with the vendor's answer."""
        body = data if json_body is None else json.dumps(json_body).encode()
        send_headers = {"Content-Type": "application/json", **(headers or {})} if json_body is not None \
            else dict(headers or {})
        response = self._exchange(method, url if "://" in url else self.base_url.rstrip("/") + url, send_headers, body)
        reply = Reply.of(response)
        if reply.status in ok:
            return response
        self._judge(reply, f"{method} {url}")
        said = self.auth.redact(reply.text[:500])
        if reply.status in RETRY_STATUSES:
            wait = reply.retry_after if reply.retry_after is not None else self.retry_wait(reply, response.headers)
            raise RetryableError(f"{self.name}: HTTP {reply.status} from {method} {url}: {said}", retry_after=wait)
        raise DestinationError(f"{self.name}: HTTP {reply.status} from {method} {url}: {said}"
                               + (" (check the destination connection's credentials and what they may do)"
                                  if reply.status in (401, 403) else ""))

    def _judge(self, reply: Reply, described: str) -> None:
        """Raise what the vendor says an answer is, when it is a limit (the module docstring)."""
        said = self.auth.redact(reply.text[:500])
        used_up = self.exhausted(reply)
        if used_up is not None:
            raise DestinationError(f"{self.name}: {used_up}. HTTP {reply.status} from {described}: {said}. Nothing "
                                   "more was sent; the next run sends what this one did not.")
        if self.transient(reply):
            raise RetryableError(f"{self.name}: HTTP {reply.status} from {described}: {said}",
                                 retry_after=reply.retry_after)
