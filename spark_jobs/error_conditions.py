"""The catalogue of failures the jobs can meet that are not their own :class:`~spark_jobs.errors.JobError`:
Spark's and Delta's error conditions, the exception classes of the JVM and of Python, and SQLSTATE
classes — each with its category, so that whether Airflow retries a task is decided here, once, and
tested entry by entry (``tests/spark_jobs/test_error_conditions.py``).

Why it matters: a job fails with an exception nobody wrapped whenever Spark refuses SQL the product
generated (``[DATATYPE_MISMATCH.DATA_DIFF_TYPES] Cannot resolve ...``, issue 33 §1). Reported as an
infrastructure failure it was retried until the task ran out of retries, meeting the same error each
time, and the log said "infrastructure". An analysis, parse or plan error is a **defect** (of the
product, or a configuration it should have refused before writing): the task fails at once, the
message says so and names the condition. Transient conditions (a lost executor, a Connect session the
server dropped, the network) stay retryable.

How an error is looked up (:func:`classify`), in order, along the exception and the ones it was
raised from:

1. its Spark error condition — ``getCondition()`` of a PySpark exception (a classic session's and a
   Spark Connect client's alike), or the ``[CONDITION.SUB]`` a ``Py4JJavaError``'s text starts its
   Java message with — whole (``FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER``), then its class
   (``FAILED_READ_FILE``);
2. its exception class: the Python class or one of its bases (``TypeError``), or the JVM class a
   ``Py4JJavaError`` names, its own or a ``Caused by:`` one (``java.net.ConnectException``);
3. the class of its SQLSTATE (``42`` of ``42K09``: syntax error or access rule violation), from
   ``getSqlState()`` or the ``SQLSTATE: 42K09`` Spark writes into its messages.

What no entry matches stays what it was: an unexplained failure, reported with its traceback and
retried (:func:`spark_jobs.entry.failure`). A Delta commit conflict and a full or read-only disk are
explained before the catalogue is looked at (:func:`spark_jobs.errors.explain`), with messages of
their own; the catalogue lists the conflicts too, so that it is the whole picture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from spark_jobs.errors import Category, exception_chain

#: The categories a retry can help.
RETRIED: frozenset[Category] = frozenset({"infrastructure", "conflict"})


@dataclass(frozen=True)
class Entry:
    """One line of the catalogue: what it matches (exactly one of a Spark/Delta error ``condition``,
    an ``exception`` class name, a ``sqlstate`` class), its ``category`` and why."""

    category: Category
    why: str
    condition: str | None = None
    exception: str | None = None
    sqlstate: str | None = None

    @property
    def retryable(self) -> bool:
        return self.category in RETRIED

    @property
    def key(self) -> str:
        return self.condition or self.exception or f"SQLSTATE {self.sqlstate}"


def _conditions(category: Category, why: str, *names: str) -> tuple[Entry, ...]:
    return tuple(Entry(category, why, condition=name) for name in names)


def _exceptions(category: Category, why: str, *names: str) -> tuple[Entry, ...]:
    return tuple(Entry(category, why, exception=name) for name in names)


CATALOGUE: tuple[Entry, ...] = (
    # --- Spark refused SQL or a plan the job built: the same run meets it again -------------------
    *_conditions("defect", "Spark's analyzer refused SQL or a plan the job generated",
                 "DATATYPE_MISMATCH", "UNRESOLVED_COLUMN", "UNRESOLVED_FIELD", "UNRESOLVED_ROUTINE",
                 "UNRESOLVED_MAP_KEY", "AMBIGUOUS_REFERENCE", "AMBIGUOUS_COLUMN_OR_FIELD", "FIELD_NOT_FOUND",
                 "INVALID_EXTRACT_FIELD", "NUM_COLUMNS_MISMATCH", "INCOMPATIBLE_COLUMN_TYPE", "MISSING_AGGREGATION",
                 "MISSING_GROUP_BY", "WRONG_NUM_ARGS", "INCOMPATIBLE_DATA_FOR_TABLE", "UNSUPPORTED_DATATYPE",
                 "MERGE_INSERT_VALUE_COUNT_MISMATCH", "INVALID_SQL_SYNTAX"),
    *_conditions("defect", "Spark's parser refused SQL the job generated", "PARSE_SYNTAX_ERROR",
                 "PARSE_EMPTY_STATEMENT"),
    *_conditions("defect", "Delta refused a MERGE or a write the job built",
                 "DELTA_MERGE_UNRESOLVED_EXPRESSION", "DELTA_COLUMN_NOT_FOUND_IN_MERGE",
                 "DELTA_MERGE_INCOMPATIBLE_DATATYPE", "DELTA_FAILED_TO_MERGE_FIELDS",
                 "DELTA_NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION", "DELTA_NON_LAST_NOT_MATCHED_CLAUSE_OMIT_CONDITION",
                 "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"),
    *_conditions("defect", "Spark failed on an internal invariant: a bug Spark reports as its own",
                 "INTERNAL_ERROR"),
    # --- the spec names something that is not there, or asks what the table cannot give -----------
    *_conditions("config", "the spec names a path or table that does not exist",
                 "PATH_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND",
                 "DELTA_PATH_DOES_NOT_EXIST", "DELTA_EMPTY_DIRECTORY", "DELTA_NOT_A_DELTA_TABLE"),
    *_conditions("config", "the table cannot give what the spec asks of it (a version or a feed it does not "
                           "keep, a feature this Delta cannot read)",
                 "DELTA_MISSING_CHANGE_DATA", "DELTA_CHANGE_TABLE_FEED_DISABLED", "DELTA_VERSION_NOT_FOUND",
                 "DELTA_TIMESTAMP_GREATER_THAN_COMMIT", "DELTA_UNSUPPORTED_FEATURES_FOR_READ"),
    *_conditions("config", "the source's column names differ only in case", "COLUMN_ALREADY_EXISTS"),
    *_conditions("config", "a Spark setting is too small for the data (spark.kryoserializer.buffer.max)",
                 "KRYO_BUFFER_OVERFLOW"),
    # --- a value the job met breaks a rule of the SQL it runs, or a table's files are damaged ------
    *_conditions("data", "a value does not fit the SQL the job runs on it (ANSI mode)",
                 "CAST_INVALID_INPUT", "CAST_OVERFLOW", "ARITHMETIC_OVERFLOW", "DIVIDE_BY_ZERO",
                 "NUMERIC_VALUE_OUT_OF_RANGE", "MALFORMED_RECORD_IN_PARSING"),
    *_conditions("data", "a Delta table's log or files are damaged or were deleted outside Delta",
                 "DELTA_FILE_NOT_FOUND_DETAILED", "DELTA_MISSING_FILES_UNEXPECTED_VERSION",
                 "DELTA_VERSIONS_NOT_CONTIGUOUS", "DELTA_STATE_RECOVER_ERROR", "DELTA_TXN_LOG_FAILED_INTEGRITY",
                 "DELTA_MISSING_PART_FILES", "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH",
                 "FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER"),
    # --- another writer, or the machinery under the job: a retry can succeed ----------------------
    *_conditions("conflict", "another run committed to the same Delta table (optimistic concurrency)",
                 "DELTA_CONCURRENT_APPEND", "DELTA_CONCURRENT_DELETE_DELETE", "DELTA_CONCURRENT_DELETE_READ",
                 "DELTA_CONCURRENT_TRANSACTION", "DELTA_CONCURRENT_WRITE", "DELTA_METADATA_CHANGED",
                 "DELTA_PROTOCOL_CHANGED"),
    *_conditions("conflict", "another writer kept moving the table or its schema under this one",
                 "DELTA_MAX_COMMIT_RETRIES_EXCEEDED", "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS"),
    *_conditions("infrastructure", "the cluster lost work in flight (an executor, its blocks, memory, the "
                                   "network, a cancelled job)",
                 "SPARK_JOB_CANCELLED", "OPERATION_CANCELED", "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND",
                 "UNABLE_TO_ACQUIRE_MEMORY", "STAGE_MATERIALIZATION_MULTIPLE_FAILURES", "INTERNAL_ERROR_NETWORK",
                 "INTERNAL_ERROR_STORAGE", "INTERNAL_ERROR_SHUFFLE", "INTERNAL_ERROR_MEMORY", "INTERNAL_ERROR_EXECUTOR",
                 "INTERNAL_ERROR_BROADCAST"),
    *_conditions("infrastructure", "reading or writing the warehouse's files failed",
                 "FAILED_READ_FILE", "TASK_WRITE_FAILED", "FAILED_RENAME_TEMP_FILE"),
    *_conditions("infrastructure", "the Spark Connect server dropped the session or operation (a restart), or "
                                   "stayed unreachable through the client's own retries",
                 "INVALID_HANDLE", "RETRIES_EXCEEDED"),
    # --- exception classes: the JVM's (named in a Py4JJavaError) and Python's ---------------------
    *_exceptions("infrastructure", "the network or a remote service failed",
                 "java.net.ConnectException", "java.net.SocketTimeoutException", "java.net.UnknownHostException",
                 "java.net.SocketException", "java.util.concurrent.TimeoutException", "ConnectionError",
                 "TimeoutError", "Py4JNetworkError"),
    *_exceptions("infrastructure", "the JVM ran out of memory", "java.lang.OutOfMemoryError"),
    *_exceptions("defect", "the product's own Python code failed (a programming error)",
                 "TypeError", "AttributeError", "NameError", "KeyError", "IndexError", "AssertionError",
                 "NotImplementedError"),
    # --- SQLSTATE classes: what a condition not listed above means by its class -------------------
    Entry("defect", "syntax error or access rule violation: the analyzer refused the statement", sqlstate="42"),
    Entry("defect", "a feature Spark or Delta does not support was asked for", sqlstate="0A"),
    Entry("defect", "cardinality violation: a subquery or MERGE matched more rows than the SQL allows", sqlstate="21"),
    Entry("defect", "Spark's internal error", sqlstate="XX"),
    Entry("data", "data exception: a value the SQL cannot take", sqlstate="22"),
    Entry("data", "integrity constraint violation", sqlstate="23"),
    Entry("infrastructure", "connection exception", sqlstate="08"),
    Entry("infrastructure", "insufficient resources", sqlstate="53"),
    Entry("infrastructure", "system error (I/O)", sqlstate="58"),
    Entry("conflict", "transaction rollback", sqlstate="40"),
)


@dataclass(frozen=True)
class Classified:
    """What the catalogue says of an exception: the entry that matched and what it matched on (the
    condition as Spark reported it, the class name, or the SQLSTATE)."""

    entry: Entry
    found: str

    @property
    def category(self) -> Category:
        return self.entry.category

    @property
    def retryable(self) -> bool:
        return self.entry.retryable


@lru_cache(maxsize=1)
def _index() -> dict[str, Entry]:
    index: dict[str, Entry] = {}
    for entry in CATALOGUE:
        if entry.key in index:
            raise ValueError(f"{entry.key} is in the error catalogue twice")
        index[entry.key] = entry
    return index


_CONDITION_TEXT = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
_SQLSTATE_TEXT = re.compile(r"SQLSTATE: ([0-9A-Z]{5})")
#: A JVM class a Py4JJavaError names: the one its Java message starts with, and each ``Caused by:``.
_JVM_CLASS = re.compile(r"(?:^|\n)(?::|Caused by:) ((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*)")


def _text(exc: BaseException) -> str:
    """``str(exc)``; a Py4JJavaError asks the JVM for its text, which a dead JVM cannot give."""
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


def _is_py4j(exc: BaseException) -> bool:
    """A Java exception py4j hands over as it is (PySpark converts only the ones it knows)."""
    return any(cls.__name__ == "Py4JJavaError" for cls in type(exc).__mro__)


def _ask(exc: BaseException, method: str) -> str | None:
    """``exc.<method>()`` of a PySpark exception (``getCondition``, ``getSqlState``); None when it has
    none, or when the JVM behind a captured exception is gone (its text still says it)."""
    ask = getattr(exc, method, None)
    try:
        answer = ask() if callable(ask) else None
    except Exception:
        return None
    return str(answer) if answer else None


def _condition(exc: BaseException) -> str | None:
    """The full error condition (``DATATYPE_MISMATCH.DATA_DIFF_TYPES``) of a PySpark exception, or
    the one a Py4JJavaError's Java message starts with."""
    found = _ask(exc, "getCondition")
    if found is None and _is_py4j(exc):
        in_text = _CONDITION_TEXT.search(_text(exc))
        found = in_text.group(1) if in_text else None
    return found


def _class_names(exc: BaseException) -> Iterator[str]:
    """The Python class and its bases, then the JVM classes a Py4JJavaError names."""
    yield from (cls.__name__ for cls in type(exc).__mro__)
    if _is_py4j(exc):
        yield from _JVM_CLASS.findall(_text(exc))


def _sqlstate(exc: BaseException) -> str | None:
    found = _ask(exc, "getSqlState")
    if found is None:
        in_text = _SQLSTATE_TEXT.search(_text(exc))
        found = in_text.group(1) if in_text else None
    return found


def _lookup(exc: BaseException) -> Classified | None:
    index = _index()
    condition = _condition(exc)
    if condition:
        for name in (condition, condition.split(".")[0]):
            if name in index:
                return Classified(index[name], condition)
    for name in _class_names(exc):
        if name in index:
            return Classified(index[name], name)
    state = _sqlstate(exc)
    if state and f"SQLSTATE {state[:2]}" in index:
        return Classified(index[f"SQLSTATE {state[:2]}"], f"SQLSTATE {state}")
    return None


def classify(exc: BaseException) -> Classified | None:
    """The catalogue's entry for ``exc`` or the first exception it was raised from that has one;
    None when the catalogue does not know it."""
    return next((found for error in exception_chain(exc) if (found := _lookup(error)) is not None), None)

