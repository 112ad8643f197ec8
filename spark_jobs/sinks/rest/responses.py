"""Reading a REST response into one outcome per record of its request, as
:class:`~spark_jobs.contract.rest.RestResponse` configures it (the decision table:
:mod:`spark_jobs.contract.rest`).

Every record ends with one outcome the response proves (design.md §9): acknowledged (``None``),
rejected into the ledger with the API's reason (:class:`~spark_jobs.sinks.base.Rejected`) or sent again
(:class:`~spark_jobs.sinks.base.Retry`). A response that does not account for a record — a results list
that does not name it, a body that is not the one configured — never counts it as sent: it is sent
again, and after the delivery's last attempt rejected with :data:`UNANSWERED`.

Per-record results are found with JMESPath (the ``records`` expressions: the first that gives a list);
each item is matched to its record — by ``match_result`` / ``match_record`` values (a number by its
value, ``12.34`` naming ``12.3400``; text by its text, a number's as it was sent), else by the item's
``record_index``, else by its own position when the list holds one item per record — and an item that
``record_failed`` says failed becomes a Rejected, or a Retry when ``record_retryable`` says so. An item
that names no record of the request accounts for none: the API and the configuration disagree about
it, and guessing would give another record its outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Sequence

from spark_jobs.contract.rest import RestResponse, status_in
from spark_jobs.contract.templating import to_json
from spark_jobs.errors import DestinationError, RetryableError
from spark_jobs.redaction import excerpt
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry
from spark_jobs.sinks.rest.transport import retry_after

#: The reason of a record a response did not account for (sent again, then rejected with it).
UNANSWERED = "the API did not answer for this record"


@lru_cache(maxsize=256)
def _compiled(expression: str) -> Any:
    import jmespath

    return jmespath.compile(expression)


def search(expression: str | None, value: Any) -> Any:
    """The JMESPath ``expression`` applied to ``value`` (None for no expression)."""
    return None if expression is None else _compiled(expression).search(value)


@dataclass(frozen=True)
class Reply:
    """What a response says, read once: its status, its text, and its JSON body (None when not JSON)."""

    status: int
    reason: str
    text: str
    body: Any
    retry_after: float | None

    @classmethod
    def of(cls, response: Any) -> Reply:
        body = None
        if response.content:
            try:
                body = response.json()
            except ValueError:
                body = None
        return cls(response.status_code, response.reason or "", response.text,
                   body, retry_after(response.headers.get("Retry-After")))

    @property
    def unreadable(self) -> bool:
        """A body that is there but is not JSON (an HTML page from a proxy, a truncated answer)."""
        return self.body is None and bool(self.text.strip())


def outcomes(config: RestResponse, reply: Reply, records: Sequence[ChangeRecord], sink: str,
             request: str, redact: Callable[[str], str] = str) -> list[Outcome]:
    """One outcome per record of a request (``request``: ``METHOD url``, for messages). A transient
    status raises :class:`RetryableError`, a fatal one :class:`DestinationError` (their messages pass
    through ``redact`` too, a preset's). Every text taken from the response is redacted before it is
    cut (:func:`spark_jobs.redaction.excerpt`)."""
    status = reply.status
    if status_in(status, config.success):
        if config.failed is not None and reply.unreadable:
            return [Retry(f"{UNANSWERED} (HTTP {status} from {request}: the body is not JSON)")] * len(records)
        if config.failed is None or not _true(search(config.failed, reply.body)):
            return _answered(config, reply, records, sink, request)
    elif status_in(status, config.retry):
        raise RetryableError(redact(f"HTTP {status} from {request}: {excerpt(reply.text, 200)}"),
                             retry_after=reply.retry_after)
    elif status_in(status, config.fatal):
        raise DestinationError(redact(f"HTTP {status} {reply.reason} from {request}: {excerpt(reply.text, 500)} "
                                      "(check the URL, method and the connection's credentials)"))
    return _refused(config, reply, records, sink)


def _true(value: Any) -> bool:
    return value is not None and value is not False and value != [] and value != {} and value != ""


def _answered(config: RestResponse, reply: Reply, records: Sequence[ChangeRecord], sink: str,
              request: str) -> list[Outcome]:
    """A request that succeeded: each record as its result says; one without a result is sent again
    when the results list every record (or a failure names none)."""
    if not config.records:
        return [None] * len(records)
    results = _Results.read(config, reply.body, records, sink)
    unanswered = Retry(f"{UNANSWERED} (HTTP {reply.status} from {request})")
    if results is None:
        return [unanswered if config.lists_all else None] * len(records)
    missing = unanswered if config.lists_all or results.orphan_failure else None
    return [results.named.get(i, missing) for i in range(len(records))]


def _refused(config: RestResponse, reply: Reply, records: Sequence[ChangeRecord], sink: str) -> list[Outcome]:
    """A request the API refused (a status that is no success, or a success the ``failed`` flag says
    refused): the records its results say failed get their outcome; the others are sent again (those
    a full results list says succeeded are acknowledged). Without a failure of its own in the results,
    every record is rejected with the status and the API's ``error``."""
    results = _Results.read(config, reply.body, records, sink) if config.records else None
    if results is not None and any(o is not None for o in results.named.values()):
        again = Retry(f"the request was refused (HTTP {reply.status}) for other records; sent again without them")
        return [results.named[i] if i in results.named and (results.named[i] or config.lists_all) else again
                for i in range(len(records))]
    reason = search(config.error, reply.body) if isinstance(reply.body, (dict, list)) else None
    text = excerpt(reason, 500) if isinstance(reason, str) and reason else excerpt(reply.text, 500)
    return [Rejected(f"HTTP {reply.status}: {text}")] * len(records)


@dataclass
class _Results:
    """The per-record results of a body: the outcome of each record they name (a record named failed
    and not failed counts as failed), and whether a failed result named no record of the request."""

    named: dict[int, Outcome]
    orphan_failure: bool

    @classmethod
    def read(cls, config: RestResponse, body: Any, records: Sequence[ChangeRecord], sink: str) -> _Results | None:
        """None when the body has no results list."""
        items = _items(config, body)
        if items is None:
            return None
        results = cls({}, False)
        locate = _Locator(config, records, len(items) == len(records))
        for position, item in enumerate(items):
            outcome = _failure(config, item, sink) if _true(search(config.record_failed, item)) else None
            indices = locate(item, position)
            results.orphan_failure |= outcome is not None and not indices
            for index in indices:
                if outcome is not None or index not in results.named:
                    results.named[index] = outcome
        return results


def _failure(config: RestResponse, item: Any, sink: str) -> Outcome:
    reason = search(config.record_error, item)
    text = excerpt(reason if isinstance(reason, str) and reason else to_json(item), 500)
    return Retry(text) if _true(search(config.record_retryable, item)) else Rejected(f"{sink}: {text}")


def _items(config: RestResponse, body: Any) -> list[Any] | None:
    if body is None:
        return None
    for expression in config.records:
        items = search(expression, body)
        if isinstance(items, list):
            return items
    return None


class _Locator:
    """Which records of the request a result item is about (the module docstring); none when it names
    no record of the request."""

    def __init__(self, config: RestResponse, records: Sequence[ChangeRecord], full: bool):
        self.config, self.size, self.full = config, len(records), full
        self.by_value: dict[str, list[int]] = {}
        self.by_number: dict[Decimal, list[int]] = {}
        if config.match_record is not None:
            for index, record in enumerate(records):
                value = search(config.match_record, {"op": record.op, "change": record.change, "key": record.key,
                                                     "data": record.data})
                self.by_value.setdefault(_text(value), []).append(index)
                number = _number(value)
                if number is not None:
                    self.by_number.setdefault(number, []).append(index)

    def __call__(self, item: Any, position: int) -> list[int]:
        if self.config.match_result is not None:
            values = search(self.config.match_result, item)
            return [i for value in (values if isinstance(values, list) else [values]) for i in self._named(value)]
        index = search(self.config.record_index, item) if isinstance(item, dict) else None
        if index is None and self.full:
            index = position
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < self.size:
            return []
        return [index]


    def _named(self, value: Any) -> list[int]:
        """The records a result's ``value`` names: a number names those whose number has its value (an API
        that reads ``12.3400`` as a double answers ``12.34``), else text the records' text."""
        number = _number(value)
        named = self.by_number.get(number) if number is not None else None
        return named or self.by_value.get(_text(value), [])


def _text(value: Any) -> str:
    """A matched value as text: APIs often return as a string the id they were sent as a number (a
    decimal's text as sent: ``12.3400``)."""
    return value if isinstance(value, str) else to_json(value)


def _number(value: Any) -> Decimal | None:
    """A matched number's exact value (a double's as its shortest text reads); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return number if number.is_finite() else None
