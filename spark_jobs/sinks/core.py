"""The shared delivery machinery every sink runs under: batching, concurrency and rate limiting inside a
partition, retries with exponential backoff and jitter (honouring ``Retry-After``), per-record
outcomes, stats and progress lines.

:func:`deliver_partition` runs on an executor over one partition of the change set (``mapInArrow``:
Arrow record batches in, Arrow record batches out) and yields *outcome rows* — one stats row per
partition plus one row per rejected record — which the sync job writes out once and aggregates.
Nothing proportional to the data ever reaches the driver. Rows stay columnar on the way: the core
re-cuts the Arrow input into :class:`~spark_jobs.sinks.batch.ChangeBatch` es of the policy's size and
does its bookkeeping (outcomes, stats, retry subsets) per batch, so the only per-record Python left
is whatever the sink itself chooses to do.

What leaves a partition — its outcome rows, its exceptions, its log lines — is redacted of every secret
the process knows (:mod:`spark_jobs.redaction`): an OAuth2 token an executor fetched is known there only.

Concurrency: with ``concurrency > 1`` a partition keeps that many batches in flight on a thread pool,
each thread with its own sink instance (sinks need not be thread-safe). This is safe because a change
set holds one net change per key, so no two in-flight batches touch the same key.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from spark_jobs import redaction
from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.sinks.base import Outcome, Rejected, Retry, Sink
from spark_jobs.sinks.batch import ChangeBatch
from spark_jobs.sinks.pacing import RateLimiter
from spark_jobs.errors import DestinationError, DestinationUnreachableError, RetryableError

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("airflow_reverse_etl.sink")

OUTCOME_DDL = "kind STRING, op STRING, change STRING, key STRING, error STRING, attempts INT, stats STRING"
OUTCOME_COLUMNS = ("kind", "op", "change", "key", "error", "attempts", "stats")
#: Reject rows buffered before they are yielded as one Arrow batch.
OUTCOME_BATCH = 10_000


@dataclass
class Stats:
    sent: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    rejected: int = 0
    #: of the rejected, those the sink refused to send as they are (never sent: Rejected(sent=False))
    unsent: int = 0
    retried: int = 0
    batches: int = 0
    #: records per destination operation and outcome, e.g. {"upsert.ok": 9, "upsert.rejected": 1}
    outcomes: dict[str, int] = field(default_factory=dict)

    def delivered(self, op: str, change: str, n: int = 1) -> None:
        self.sent += n
        if change == "delete":
            self.deleted += n
        elif change == "update":
            self.updated += n
        else:
            self.inserted += n
        self.count(op, "ok", n)

    def count(self, op: str, outcome: str, n: int = 1) -> None:
        name = f"{op}.{outcome}"
        self.outcomes[name] = self.outcomes.get(name, 0) + n

    def add(self, other: dict[str, Any]) -> None:
        for name, value in other.items():
            if name == "outcomes":
                for outcome, n in (value or {}).items():
                    self.outcomes[outcome] = self.outcomes.get(outcome, 0) + int(n)
            else:
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


def retrying(policy: DeliveryPolicy, before_sleep: Callable[[RetryCallState], None]) -> Retrying:
    """The core's retry schedule (tenacity): a :class:`~spark_jobs.errors.RetryableError` is tried again
    up to the policy's attempts, after a wait the destination named or the policy's backoff with
    jitter; the last one is raised. ``before_sleep`` is called before each wait (a log line)."""
    return Retrying(retry=retry_if_exception_type(RetryableError), wait=_WaitHonouringRetryAfter(policy),
                    stop=stop_after_attempt(policy.max_attempts), before_sleep=before_sleep, reraise=True)


class Reject(NamedTuple):
    """A record the destination refused for good, as the reject ledger records it."""

    op: str
    change: str
    key: str
    reason: str
    attempts: int


def send_batch(sink: Sink, batch: ChangeBatch, policy: DeliveryPolicy, stats: Stats) -> list[Reject]:
    """Deliver one batch; return a :class:`Reject` for each record rejected for good."""
    return _BatchDelivery(sink, policy, stats, batch).run()


class _BatchDelivery:
    """One batch on its way: the records still pending, the rejects so far, the attempts made. Each
    attempt sends the pending records; those the sink asks to retry stay pending for the next one
    (tenacity schedules it, with the policy's backoff), the rest are counted or rejected."""

    def __init__(self, sink: Sink, policy: DeliveryPolicy, stats: Stats, batch: ChangeBatch):
        self.sink, self.policy, self.stats = sink, policy, stats
        self.attempts = 0
        self.rejects: list[Reject] = []
        # its records' numbers read by the fields' Spark types the sink was configured with
        self.pending = self._without_bad_text(batch.typed(sink.config.field_types))

    def _without_bad_text(self, batch: ChangeBatch) -> ChangeBatch:
        """The batch less its records whose text is not UTF-8: the destination would get them altered,
        so the ledger keeps them and the rest goes on."""
        not_utf8 = batch.not_utf8()
        if not not_utf8:
            return batch
        reason = "{}: the text in {} is not valid UTF-8 (JSON cannot carry it as it is)"
        self.rejects = [Reject(batch.ops[i], batch.changes[i], batch.ids[i], reason.format(self.sink.name, names), 1)
                        for i, names in not_utf8.items()]
        self.stats.unsent += len(self.rejects)
        return batch.take(i for i in range(len(batch)) if i not in not_utf8)

    def run(self) -> list[Reject]:
        try:
            if len(self.pending):
                retrying(self.policy, self._before_sleep)(self._attempt)
        except RetryableError as exc:
            # transient every time: the destination is down or overloaded, not refusing this sync
            raise DestinationUnreachableError(
                f"Sink {self.sink.name!r} still failing after {self.attempts} attempts: {exc}") from exc
        self.stats.batches += 1
        self.stats.rejected += len(self.rejects)
        for refused in self.rejects:
            self.stats.count(refused.op, "rejected")
        return self.rejects

    def _attempt(self) -> None:
        self.attempts += 1
        pending = self.pending
        # a sink that paces its own requests holds their slots; otherwise one attempt is one request
        with nullcontext() if self.sink.capabilities.paces_requests else self.sink.request_slot():
            outcomes = self.sink.write_batch(pending)
        if len(outcomes) != len(pending):
            raise DestinationError(
                f"Sink {self.sink.name!r} returned {len(outcomes)} outcomes for {len(pending)} records")
        if outcomes.count(None) == len(outcomes):  # the usual case: count the batch, not its records
            for (op, change), n in Counter(zip(pending.ops, pending.changes)).items():
                self.stats.delivered(op, change, n)
            self.pending = pending[:0]
            return
        again = [i for i, outcome in enumerate(outcomes) if not self._settled(i, outcome)]
        self.pending = pending.take(again)
        if again:
            waits = [w for i in again if (w := getattr(outcomes[i], "retry_after", None)) is not None]
            raise _PendingRecords(f"{len(again)} record(s) to retry", retry_after=max(waits) if waits else None)

    def _settled(self, i: int, outcome: Outcome) -> bool:
        """Count or reject pending record ``i`` by its outcome; False: it is to be sent again."""
        pending = self.pending
        if outcome is None:
            self.stats.delivered(pending.ops[i], pending.changes[i])
        elif isinstance(outcome, Rejected):
            self._reject(i, outcome.reason)
            self.stats.unsent += not outcome.sent
        elif isinstance(outcome, Retry):
            if self.attempts < self.policy.max_attempts:
                return False
            self._reject(i, f"still failing after {self.attempts} attempts: {outcome.reason}")
        else:
            raise DestinationError(f"Sink {self.sink.name!r} returned {outcome!r}, not None/Rejected/Retry")
        return True

    def _reject(self, i: int, reason: str) -> None:
        pending = self.pending
        self.rejects.append(Reject(pending.ops[i], pending.changes[i], pending.ids[i], reason, self.attempts))

    def _before_sleep(self, state: RetryCallState) -> None:
        self.stats.retried += len(self.pending)
        exc = state.outcome.exception() if state.outcome else None
        log.warning("%s: attempt %d failed (%s); retrying %d record(s)", self.sink.name, state.attempt_number,
                    exc, len(self.pending))


def chunks(arrow_batches: Iterable[pa.RecordBatch], size: int, key_fields: list[str], fields: list[str]
           ) -> Iterator[ChangeBatch]:
    """Re-cut a partition's Arrow record batches into ChangeBatches of ``size`` rows (zero-copy
    slices; only what is left over waits for the next input batch)."""
    import pyarrow as pa

    buffered: list[pa.RecordBatch] = []
    rows = 0
    for arrow_batch in arrow_batches:
        if not arrow_batch.num_rows:
            continue
        buffered.append(arrow_batch)
        rows += arrow_batch.num_rows
        if rows < size:
            continue
        table = pa.Table.from_batches(buffered)
        start = 0
        while rows - start >= size:
            yield ChangeBatch(table.slice(start, size), key_fields, fields)
            start += size
        rest = table.slice(start)
        buffered, rows = (rest.to_batches() if rest.num_rows else []), rest.num_rows
    if rows:
        yield ChangeBatch(pa.Table.from_batches(buffered), key_fields, fields)


class _Lanes:
    """One sink and one Stats per sending thread, opened on first use and all closed at the end. The
    sinks share their config, and with it the partition's requests-per-second pacer
    (:meth:`~spark_jobs.sinks.base.SinkConfig.request_slot`)."""

    def __init__(self, make_sink: Callable[[], Sink], policy: DeliveryPolicy):
        self.make_sink = make_sink
        self.policy = policy
        self.local = threading.local()
        self.opened: list[tuple[Sink, Stats]] = []
        self.lock = threading.Lock()

    def _lane(self) -> tuple[Sink, Stats]:
        lane = getattr(self.local, "lane", None)
        if lane is None:
            sink = self.make_sink()
            lane = (sink, Stats())
            with self.lock:
                self.opened.append(lane)
            sink.open()
            self.local.lane = lane
        return lane

    def send(self, batch: ChangeBatch) -> list[Reject]:
        sink, stats = self._lane()
        return send_batch(sink, batch, self.policy, stats)

    @property
    def name(self) -> str:
        return self.opened[0][0].name if self.opened else "sink"

    def stats(self) -> Stats:
        total = Stats()
        for _, stats in list(self.opened):
            total.add(asdict(stats))
        return total

    def close(self) -> None:
        for sink, _ in self.opened:
            sink.close()


def _executor_logging() -> None:
    """Python workers have no logging set up: send our progress lines to stderr, which lands in the
    executor's log (the task log itself when Spark runs in local mode)."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(redaction.FILTER)
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _partition_id() -> int | None:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context else None


def _sent_batches(batches: Iterator[ChangeBatch], lanes: _Lanes, policy: DeliveryPolicy,
                  limiter: RateLimiter | None) -> Iterator[list[Reject]]:
    """Send every batch, yielding each batch's rejects; up to ``concurrency`` batches in flight, at
    most twice that many read ahead (so memory stays bounded whatever the partition's size)."""
    if policy.concurrency <= 1:
        for batch in batches:
            if limiter:
                limiter.acquire(len(batch))
            yield lanes.send(batch)
        return
    pool = ThreadPoolExecutor(max_workers=policy.concurrency, thread_name_prefix="aretl-sink")
    inflight: deque[Future[list[Reject]]] = deque()
    try:
        for batch in batches:
            if limiter:
                limiter.acquire(len(batch))
            inflight.append(pool.submit(lanes.send, batch))
            while inflight and (len(inflight) >= 2 * policy.concurrency or inflight[0].done()):
                yield inflight.popleft().result()
        while inflight:
            yield inflight.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _outcome_batch(rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    import pyarrow as pa

    columns = list(zip(*rows))
    types = [pa.string()] * 5 + [pa.int32(), pa.string()]
    return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, types)], names=list(OUTCOME_COLUMNS))


def deliver_partition(
    arrow_batches: Iterable[Any],
    make_sink: Callable[[], Sink],
    policy: DeliveryPolicy,
    key_fields: list[str],
    fields: list[str],
) -> Iterator[Any]:
    """Executor entry (``mapInArrow``): send one partition's rows, yield outcome rows (see
    ``OUTCOME_DDL``) as Arrow record batches — redacted, as are its log lines and what it raises.
    ``policy`` is this partition's share of the sync's; the sinks ``make_sink`` builds pace their own
    requests by the same share (their config's ``delivery``)."""
    _executor_logging()
    with redaction.redacting_logs():
        try:
            yield from _delivered(arrow_batches, make_sink, policy, key_fields, fields)
        except Exception as exc:
            clean = redaction.redacted_error(exc)
            if clean is exc:
                raise
            raise clean from None


def _delivered(arrow_batches: Iterable[Any], make_sink: Callable[[], Sink], policy: DeliveryPolicy,
               key_fields: list[str], fields: list[str]) -> Iterator[Any]:
    lanes = _Lanes(make_sink, policy)
    limiter = RateLimiter(policy.rate_limit) if policy.rate_limit else None
    partition = _partition_id()
    started = last_report = time.monotonic()
    refused: list[tuple[Any, ...]] = []
    try:
        batches = chunks(arrow_batches, policy.size, key_fields, fields)
        for rejects in _sent_batches(batches, lanes, policy, limiter):
            for op, change, ident, reason, attempts in rejects:
                refused.append(("reject", op, change, ident, redaction.excerpt(str(reason), 2000), attempts, None))
            if len(refused) >= OUTCOME_BATCH:
                yield _outcome_batch(refused)
                refused = []
            now = time.monotonic()
            if now - last_report >= policy.progress_every:
                last_report = now
                stats = lanes.stats()
                log.info("%s partition %s: %d records sent in %d batches, %d rejected (%.0f records/s)",
                         lanes.name, partition, stats.sent, stats.batches, stats.rejected,
                         stats.sent / max(now - started, 1e-9))
    finally:
        lanes.close()
    yield _outcome_batch([*refused, ("stats", None, None, None, None, None, json.dumps(asdict(lanes.stats())))])
