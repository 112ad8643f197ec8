"""What this provider raises, and whether Airflow should retry the task.

Like the official providers, every error is a :class:`ReverseEtlError` (an ``AirflowException``).
Configuration, data and defect errors are also an ``AirflowFailException``: the task fails at once,
without using its retries, since running the same spec on the same data fails the same way (a bad
option, a duplicate key, a destination whose schema does not match, SQL the product generated that
Spark refuses). Infrastructure errors (a storage or destination outage, a Spark job that died) and
concurrent-write conflicts stay a plain ``AirflowException``, which Airflow retries.

A failed Spark job reports its error's ``category`` in its result (:mod:`spark_jobs.errors`);
:func:`job_failure` turns that into the matching class here.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from spark_jobs import errors


class ReverseEtlError(AirflowException):
    """Base of the provider's errors. ``error`` is the failed job's result ``error`` (type, message,
    category, retryable), when the error comes from a Spark job."""

    category: ClassVar[str] = "infrastructure"

    def __init__(self, message: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.error = error or {}

    def raised_as(self, job_error: type[errors.JobError]) -> bool:
        """Whether the Spark job failed with ``job_error`` or one of its subclasses. The job's error
        crosses the process boundary as its class name, which names a class of :mod:`spark_jobs.errors`."""
        raised = getattr(errors, str(self.error.get("type")), None)
        return isinstance(raised, type) and issubclass(raised, job_error)

    @classmethod
    def explanation(cls, error: dict[str, Any]) -> str | None:
        """What the task log should add to a failed job's own message of this class, if anything."""
        return None


class ReverseEtlConfigError(ReverseEtlError, AirflowFailException):
    """The DAG, an operator's arguments, a connection or the job spec ask for something impossible."""

    category = "config"


class ReverseEtlDataError(ReverseEtlError, AirflowFailException):
    """The data breaks a rule the job relies on (null or duplicate keys, a drifted schema, a corrupt
    Delta log): fix the data or the options, then run again."""

    category = "data"


class ReverseEtlDefectError(ReverseEtlError, AirflowFailException):
    """Spark refused SQL or a plan the job generated (an analysis, parse or plan error), or the job's
    own code failed: a defect of this provider, or a configuration it should have refused before
    running. A retry meets the same error, so the task fails at once; the message names the error
    condition (:mod:`spark_jobs.error_conditions`) and asks for a report."""

    category = "defect"

    @classmethod
    def explanation(cls, error: dict[str, Any]) -> str | None:
        condition = error.get("condition")
        return ("This is a defect of airflow-reverse-etl, or a configuration it should have refused before running"
                f"{f' (error condition {condition})' if condition else ''}: running the task again meets the same "
                "error, so it is not retried. Please report it with this log.")


class ReverseEtlInfrastructureError(ReverseEtlError):
    """Something the data and the DAG do not control failed (storage, destination, the Spark job's
    process); a retry can succeed."""


class ReverseEtlConcurrentWriteError(ReverseEtlInfrastructureError):
    """Another run committed to the same Delta table at the same time; a retry after it finishes
    succeeds."""

    category = "conflict"


def error_class(category: str | None) -> type[ReverseEtlError]:
    """The class for a category (``spark_jobs.errors.Category``). An unknown or missing one (an error
    nobody classified, a result from an older job library) is an infrastructure error, retried as
    Airflow always did."""
    classes = (ReverseEtlConfigError, ReverseEtlDataError, ReverseEtlDefectError, ReverseEtlInfrastructureError,
               ReverseEtlConcurrentWriteError)
    return next((cls for cls in classes if cls.category == category), ReverseEtlInfrastructureError)


def job_failure(job: str, error: dict[str, Any]) -> ReverseEtlError:
    """The exception for a failed job result's ``error``."""
    cls = error_class(error.get("category"))
    if error.get("retryable") and not issubclass(cls, ReverseEtlInfrastructureError):
        cls = ReverseEtlInfrastructureError  # the job said a retry can help: never forbid it
    message = f"{job} job failed: {error.get('type')}: {error.get('message')}"
    explanation = cls.explanation(error)
    if explanation:
        message += f"\n{explanation}"
    if error.get("traceback"):
        message += f"\n{error['traceback']}"
    return cls(message, error)


@contextmanager
def spec_validation() -> Iterator[None]:
    """Raise the Spark side's validation errors (:class:`spark_jobs.errors.JobError`, from a spec
    checked on the Airflow side, e.g. when the DAG is parsed) as :class:`ReverseEtlConfigError`."""
    from spark_jobs.errors import JobError

    try:
        yield
    except JobError as exc:
        raise ReverseEtlConfigError(str(exc)) from exc
