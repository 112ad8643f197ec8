"""Reading a REST response into one outcome per record, as :class:`~spark_jobs.contract.rest.RestResponse`
configures it (the order of the four steps: :mod:`spark_jobs.contract.rest`).

Per-record results are found with JMESPath (the ``records`` expressions: the first that gives a list);
each item that ``record_failed`` says failed is matched to its record — by ``match_result`` /
``match_record`` values, else by the item's ``record_index``, else by its own position when the list
holds one item per record — and becomes a :class:`~spark_jobs.sinks.base.Rejected` (into the ledger
with the API's reason) or, when ``record_retryable`` says so, a :class:`~spark_jobs.sinks.base.Retry`.
An item that names no record of the request fails the sync: the API and the configuration disagree,
and guessing would put another record's failure in the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

from spark_jobs.contract.rest import RestResponse, status_in
from spark_jobs.contract.templating import to_json
from spark_jobs.errors import DestinationError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry
from spark_jobs.sinks.rest.transport import retry_after


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


def outcomes(config: RestResponse, reply: Reply, records: Sequence[ChangeRecord], sink: str,
             request: str, redact: Callable[[str], str] = str) -> list[Outcome]:
    """One outcome per record of a request (``request``: ``METHOD url``, for messages). A transient
    status raises :class:`RetryableError`, a fatal one :class:`DestinationError`."""
    status, size = reply.status, len(records)
    if status_in(status, config.success):
        return _per_record(config, reply, records, sink, request) or [None] * size
    if status_in(status, config.retry):
        raise RetryableError(redact(f"HTTP {status} from {request}: {reply.text[:200]}"),
                             retry_after=reply.retry_after)
    if status_in(status, config.fatal):
        raise DestinationError(redact(f"HTTP {status} {reply.reason} from {request}: {reply.text[:500]} (check the "
                                      "URL, method and the connection's credentials)"))
    per_record = _per_record(config, reply, records, sink, request)
    if per_record is not None and any(per_record):
        return per_record
    reason = search(config.error, reply.body) if isinstance(reply.body, (dict, list)) else None
    text = reason if isinstance(reason, str) and reason else reply.text[:500]
    return [Rejected(redact(f"HTTP {status}: {text}"))] * size


def _per_record(config: RestResponse, reply: Reply, records: Sequence[ChangeRecord], sink: str,
                request: str) -> list[Outcome] | None:
    """Outcomes from the body's per-record results, or None when the body has none."""
    items = _items(config, reply.body)
    if items is None:
        return None
    found: list[Outcome] = [None] * len(records)
    locate = _Locator(config, records, len(items) == len(records), request)
    for position, item in enumerate(items):
        if not search(config.record_failed, item):
            continue
        reason = search(config.record_error, item)
        reason = reason if isinstance(reason, str) and reason else to_json(item)
        outcome = Retry(reason) if search(config.record_retryable, item) else Rejected(f"{sink}: {reason}")
        for index in locate(item, position):
            found[index] = outcome
    return found


def _items(config: RestResponse, body: Any) -> list[Any] | None:
    if body is None:
        return None
    for expression in config.records:
        items = search(expression, body)
        if isinstance(items, list):
            return items
    return None


class _Locator:
    """Which records of the request a result item is about (the module docstring)."""

    def __init__(self, config: RestResponse, records: Sequence[ChangeRecord], full: bool, request: str):
        self.config, self.size, self.full, self.request = config, len(records), full, request
        self.by_value: dict[str, list[int]] = {}
        if config.match_record is not None:
            for index, record in enumerate(records):
                value = search(config.match_record, {"op": record.op, "change": record.change, "key": record.key,
                                                     "data": record.data})
                self.by_value.setdefault(_text(value), []).append(index)

    def __call__(self, item: Any, position: int) -> list[int]:
        if self.config.match_result is not None:
            values = search(self.config.match_result, item)
            matched = [i for value in (values if isinstance(values, list) else [values])
                       for i in self.by_value.get(_text(value), [])]
            if not matched:
                raise DestinationError(f"{self.request} reported an error for {values!r}, which matches no record "
                                       f"it was sent (match_record: {self.config.match_record}): {to_json(item)[:500]}")
            return matched
        index = search(self.config.record_index, item) if isinstance(item, dict) else None
        if index is None and self.full:
            index = position
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < self.size:
            raise DestinationError(f"{self.request} reported an error for record index {index!r} of a batch of "
                                   f"{self.size}: {item!r}")
        return [index]


def _text(value: Any) -> str:
    """A matched value as text: APIs often return as a string the id they were sent as a number."""
    return value if isinstance(value, str) else to_json(value)
