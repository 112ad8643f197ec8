"""Errors a user can act on, each saying whether trying again can help.

A :class:`JobError` is reported as the job result's ``error`` (type, message, ``category``,
``retryable``) and becomes the Airflow task's failure message verbatim, so its text must name the
problem (the table, the column, the key values) and, where there is one, the option that changes the
behaviour. The Airflow side maps ``category`` to an exception class: ``config``, ``data`` and
``defect`` errors fail the task without retries (the same spec on the same data fails the same way),
``infrastructure`` and ``conflict`` errors are retried by Airflow. Anything that is not a
:class:`JobError` is looked up in the catalogue of Spark, Delta, JVM and Python failures
(:mod:`spark_jobs.error_conditions`): SQL the product generated that Spark refuses (an analysis, parse
or plan error) is a ``defect``, a lost executor ``infrastructure``; what the catalogue does not know is
reported with its traceback and treated as retryable.

The taxonomy::

    JobError                        permanent unless a subclass says otherwise
    ├── ConfigError                 config: the spec asks for something impossible
    │   ├── AlreadyDeliveredError   nothing left to deliver: another run delivered it (not a failure)
    │   └── PastDateRefusedError    a logical date older than the newest recorded one
    ├── DataQualityError            data: null or duplicate primary keys
    ├── SchemaDriftError            data: the source's columns moved
    ├── CorruptTableError           data: a Delta log is damaged
    ├── DestinationError            config: the destination refused the sync
    ├── ReadOnlyStorageError        config: the warehouse's file system is read-only
    ├── StaleCommitError            config: a consumer commit over one it did not start from
    └── RetryableError              infrastructure: transient, try again (with ``retry_after``)
        ├── DestinationUnreachableError   the destination could not be reached
        ├── ConcurrentWriteError          conflict: another run committed to the same Delta table
        └── StorageFullError              the warehouse's file system is full
"""

from __future__ import annotations

import re
from typing import ClassVar, Iterator, Literal

#: What kind of failure an error is; ``defect``: SQL or code of the product failed (a bug, or a
#: configuration the product should have refused before running it), which no retry fixes.
Category = Literal["config", "data", "infrastructure", "conflict", "defect"]


class JobError(Exception):
    """A failure the job explains in its message (no traceback needed).

    ``category`` says what kind of problem it is; ``retryable`` whether running the same job again
    unchanged can succeed."""

    category: ClassVar[Category] = "config"
    retryable: ClassVar[bool] = False


class ConfigError(JobError):
    """The job spec asks for something impossible (unknown column, bad option, missing table)."""


class AlreadyDeliveredError(ConfigError):
    """What a run would deliver was already delivered by another run, so nothing is left to send:

    * a diff asked for a version older than the one its consumer already committed (a re-run of an
      older logical date after later runs delivered its changes): the Airflow DiffOperator skips its
      sync on it rather than failing the run;
    * a sync's target version is exactly the one its consumer has committed, by another run (an older
      task cleared after a newer run delivered the same version): the sync job reports it as delivered
      instead of failing, with the reason in its result's ``already_delivered``. Raised only where that
      answer is known before anything is sent."""


class PastDateRefusedError(ConfigError):
    """A snapshot's logical date is older than the newest recorded one and the run did not ask to
    rebuild forward (``on_past_date="rebuild"``). Nothing was written. The Airflow SnapshotOperator
    skips its task on it (with the reason and the command to rebuild) instead of failing it: a failed
    task of a ``depends_on_past`` operator would hold every later date of a backfill waiting forever."""


class DataQualityError(JobError):
    """The source data breaks a rule the job relies on (null or duplicate primary keys)."""

    category = "data"


class SchemaDriftError(JobError):
    """The source's columns no longer match the table they are recorded into."""

    category = "data"


class DestinationError(JobError):
    """The destination refused the sync: its schema does not match (missing table, column or type), a
    safety limit tripped (mass delete, too many rejects), or it rejected a batch for good. Sending the
    same changes again fails the same way until someone changes the destination or the options."""


class CorruptTableError(JobError):
    """A Delta log the jobs read is damaged (a commit file truncated, emptied or failing its
    checksum). Reading it again finds the same damage, so it is not retried; someone must repair or
    restore the table first."""

    category = "data"


class RetryableError(JobError):
    """A transient failure (HTTP 429/5xx, lock timeout, broker busy, storage hiccup): the same work
    can succeed later. Sinks raise it for a whole batch, which the delivery core retries with backoff,
    honouring ``retry_after`` (seconds) when the destination said how long to wait; one that escapes
    the job makes Airflow retry the task."""

    category: ClassVar[Category] = "infrastructure"
    retryable = True

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DestinationUnreachableError(DestinationError, RetryableError):
    """The destination could not be reached or kept failing transiently (connection refused, timeouts,
    5xx after every retry): nothing is wrong with the sync itself, so a later run can succeed."""

    category = "infrastructure"
    retryable = True


#: Delta's commit-conflict exceptions (``delta.exceptions`` in Python, ``io.delta.exceptions`` in the
#: JVM). Under Spark Connect the client only sees their names and error classes in the message.
DELTA_CONFLICTS = (
    "ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException", "ConcurrentWriteException", "MetadataChangedException",
    "ProtocolChangedException", "DeltaConcurrentModificationException",
)
_CONFLICT_TEXT = re.compile(r"DELTA_(?:CONCURRENT_[A-Z_]+|METADATA_CHANGED|PROTOCOL_CHANGED)\b|"
                            + "|".join(rf"\b{name}\b" for name in DELTA_CONFLICTS))
_DELTA_TABLE = re.compile(r"delta\.`([^`]+)`")


def is_write_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is Delta refusing a commit that lost an optimistic-concurrency race, told by its
    class (delta-spark's Python classes, where a classic session registers them) or by the error
    condition in its text (``[DELTA_CONCURRENT_APPEND] ...``), which classic and Spark Connect
    sessions both report. The one test every conflict retry and classification uses."""
    classes = {cls.__name__ for cls in type(exc).__mro__}
    return not classes.isdisjoint(DELTA_CONFLICTS) or bool(_CONFLICT_TEXT.search(str(exc)))


class ConcurrentWriteError(RetryableError):
    """Another run committed to the same Delta table while this one was writing it (Delta's
    optimistic concurrency refused this commit). Nothing of this run was committed; run it again
    once the other run has finished."""

    category = "conflict"

    @classmethod
    def from_delta(cls, exc: BaseException, warehouse: str | None = None) -> ConcurrentWriteError | None:
        """The conflict ``exc`` (or an exception it was raised from) reports, or None if it is not a
        Delta commit conflict. The table is named relative to ``warehouse`` when Delta names it."""
        for error in exception_chain(exc):
            if not is_write_conflict(error):
                continue
            text = str(error)
            table = _DELTA_TABLE.search(text)
            where = _relative(table.group(1), warehouse) if table else "a table this job writes"
            reason = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
            conflict = cls(f"Another run is writing {where} at the same time; retry after it finishes. "
                           f"Delta refused this run's commit: {reason[:500]}")
            conflict.__cause__ = exc
            return conflict
        return None


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _relative(table_path: str, warehouse: str | None) -> str:
    """``file:/wh/snapshots/customers`` -> ``snapshots/customers`` for warehouse ``/wh``."""
    if warehouse:
        root = re.sub(r"^[a-z][a-z0-9+.-]*:/*", "/", warehouse.rstrip("/"))
        path = re.sub(r"^[a-z][a-z0-9+.-]*:/*", "/", table_path)
        if path.startswith(root + "/"):
            return path[len(root) + 1:]
    return table_path


def spark_condition(exc: BaseException) -> str | None:
    """The error condition Spark reports for ``exc`` without its sub-condition
    (``DELTA_MISSING_DELTA_TABLE``, ``COLUMN_ALREADY_EXISTS``, ...), in a classic session and over
    Spark Connect alike; None for an exception that is not Spark's."""
    condition = getattr(exc, "getCondition", None)
    try:
        full = condition() if callable(condition) else None
    except Exception:  # an exception from the JVM whose condition cannot be read
        return None
    return full.split(".")[0] if full else None


class StorageFullError(RetryableError):
    """The file system the job wrote to is full. Nothing of the run was committed (a Delta commit is
    written last, whole or not at all); once space is freed the same run succeeds."""


class ReadOnlyStorageError(JobError):
    """The file system the job writes to is mounted read-only: the same run fails the same way until
    someone makes it writable (or points the warehouse elsewhere)."""


#: What the JVM or Python says of a file system that refused a write: (text, error class, what it means).
_STORAGE_REFUSALS = (
    ("No space left on device", StorageFullError, "the file system is full; free space and run it again"),
    ("Read-only file system", ReadOnlyStorageError,
     "the file system is mounted read-only; make it writable (or point the warehouse elsewhere) and run it again"),
)


def storage_refusal(exc: BaseException, warehouse: str | None) -> JobError | None:
    """The :class:`StorageFullError` or :class:`ReadOnlyStorageError` a write refused by the file
    system is (an ``IOException`` deep in a Spark task failure reaches here as text), else None."""
    for error in exception_chain(exc):
        text = str(error)
        for phrase, error_cls, meaning in _STORAGE_REFUSALS:
            if phrase in text:
                line = next(line.strip() for line in text.splitlines() if phrase in line)
                where = f" under the warehouse {warehouse}" if warehouse else ""
                refusal = error_cls(f"Writing{where} failed: {meaning}. Nothing of this run was committed. "
                                    f"({line[:300]})")
                refusal.__cause__ = exc
                return refusal
    return None


def explain(exc: BaseException, warehouse: str | None = None) -> JobError | None:
    """The :class:`JobError` that explains ``exc``: itself, the :class:`ConcurrentWriteError` a
    Delta commit conflict becomes, or the storage refusal a full or read-only file system is; None
    when nothing explains it (a bug or an unexpected failure)."""
    if isinstance(exc, JobError):
        return exc
    return ConcurrentWriteError.from_delta(exc, warehouse) or storage_refusal(exc, warehouse)


class StaleCommitError(JobError):
    """A sync would commit a consumer version over a commit it did not start from (a stale re-run, or
    two syncs of one consumer at once): refused, so the committed version never moves backwards. A
    retry of the same task fails the same way (its change set starts from the old position), so it is
    not retryable (a permanent error: the task fails without retries): run the DAG for the current date,
    whose diff starts from the committed version."""
