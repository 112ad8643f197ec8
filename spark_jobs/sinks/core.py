"""The shared delivery machinery every sink runs under: batching, retries with exponential backoff and
jitter (honouring ``Retry-After``), per-record outcomes and stats.

:func:`deliver_partition` runs on an executor over one partition of the change set and yields
*outcome rows* — one stats row per partition plus one row per rejected record — which the sync job
writes out once and aggregates. Nothing proportional to the data ever reaches the driver.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Iterator

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from spark_jobs.sinks.base import ChangeRecord, Rejected, Retry, RetryableError, Sink
from spark_jobs.errors import DestinationError

log = logging.getLogger("airflow_reverse_etl.sink")

OUTCOME_DDL = "kind STRING, op STRING, key STRING, error STRING, attempts INT, stats STRING"


@dataclass(frozen=True)
class DeliveryPolicy:
    batch_size: int = 500
    max_attempts: int = 6
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    progress_every: float = 10.0  # seconds between progress lines in the log


@dataclass
class Stats:
    sent: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    rejected: int = 0
    retried: int = 0
    batches: int = 0

    def delivered(self, record: ChangeRecord) -> None:
        self.sent += 1
        if record.change == "delete":
            self.deleted += 1
        elif record.change == "update":
            self.updated += 1
        else:
            self.inserted += 1

    def add(self, other: dict[str, int]) -> None:
        for name, value in other.items():
            setattr(self, name, getattr(self, name) + int(value or 0))


class _PendingRecords(RetryableError):
    """Some records of a batch asked to be retried; raised so tenacity schedules the next attempt."""


class _WaitHonouringRetryAfter:
    """Exponential backoff with jitter, unless the destination said how long to wait."""

    def __init__(self, policy: DeliveryPolicy):
        self._backoff = wait_exponential_jitter(initial=policy.backoff_initial, max=policy.backoff_max)
        self._max = policy.backoff_max

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return min(float(retry_after), self._max)
        return self._backoff(state)


def send_batch(sink: Sink, batch: list[ChangeRecord], policy: DeliveryPolicy, stats: Stats) -> list[tuple]:
    """Deliver one batch; return (record, reason, attempts) for each record rejected for good."""
    pending = list(batch)
    rejects: list[tuple] = []
    attempts = 0

    def attempt() -> None:
        nonlocal pending, attempts
        attempts += 1
        outcomes = sink.write_batch(pending)
        if len(outcomes) != len(pending):
            raise DestinationError(
                f"Sink {sink.name!r} returned {len(outcomes)} outcomes for {len(pending)} records"
            )
        again = []
        for record, outcome in zip(pending, outcomes):
            if outcome is None:
                stats.delivered(record)
            elif isinstance(outcome, Rejected):
                rejects.append((record, outcome.reason, attempts))
            elif isinstance(outcome, Retry):
                if attempts >= policy.max_attempts:
                    rejects.append((record, f"still failing after {attempts} attempts: {outcome.reason}", attempts))
                else:
                    again.append(record)
        pending = again
        if pending:
            raise _PendingRecords(f"{len(pending)} record(s) to retry")

    def before_sleep(state: RetryCallState) -> None:
        stats.retried += len(pending)
        exc = state.outcome.exception()
        log.warning("%s: attempt %d failed (%s); retrying %d record(s)", sink.name, state.attempt_number,
                    exc, len(pending))

    retrying = Retrying(
        retry=retry_if_exception_type(RetryableError),
        wait=_WaitHonouringRetryAfter(policy),
        stop=stop_after_attempt(policy.max_attempts),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        retrying(attempt)
    except RetryableError as exc:
        raise DestinationError(
            f"Sink {sink.name!r} still failing after {attempts} attempts: {exc}"
        ) from exc
    stats.batches += 1
    stats.rejected += len(rejects)
    return rejects


def chunks(records: Iterable[ChangeRecord], size: int) -> Iterator[list[ChangeRecord]]:
    batch: list[ChangeRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def deliver_partition(
    rows: Iterable[Any],
    make_sink: Callable[[], Sink],
    to_record: Callable[[Any], ChangeRecord],
    policy: DeliveryPolicy,
) -> Iterator[tuple]:
    """Executor entry: send one partition's rows, yield outcome rows (see ``OUTCOME_DDL``)."""
    stats = Stats()
    sink = make_sink()
    sink.open()
    started = last_report = time.monotonic()
    try:
        for batch in chunks((to_record(r) for r in rows), policy.batch_size):
            for record, reason, attempts in send_batch(sink, batch, policy, stats):
                yield ("reject", record.op, json.dumps(record.key, sort_keys=True, default=str),
                       str(reason)[:2000], attempts, None)
            now = time.monotonic()
            if now - last_report >= policy.progress_every:
                last_report = now
                log.info("%s: %d records sent in %d batches (%.0f records/s)", sink.name, stats.sent,
                         stats.batches, stats.sent / max(now - started, 1e-9))
    finally:
        sink.close()
    yield ("stats", None, None, None, None, json.dumps(asdict(stats)))
