"""Data checks that ride along a write instead of costing a Spark job of their own.

A check is a filter ``when(bad, raise_error(message)).otherwise(true)`` placed in the frame a MERGE
(or append) consumes (:func:`check`), or a MERGE clause whose assignment raises for a row the MERGE's
own join finds where none may be (:func:`failure`): on the success path it costs one comparison per row
already being written, and a bad row fails the write before Delta commits anything (a commit is
atomic), so nothing is half-done.
:func:`reported` turns the Spark error the filter raises back into the job's own error class with the
message the check built, naming the offending values.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from spark_jobs.delta.literals import literal
from spark_jobs.errors import JobError

if TYPE_CHECKING:
    from pyspark.sql import Column

_START, _END = "aretl-check: ", " :aretl-check"
_MESSAGE = re.compile(re.escape(_START) + "(.*?)" + re.escape(_END), re.S)


def check(bad: Column, *message: str | Column) -> Column:
    """A filter condition that keeps every row and fails the query at the first row where ``bad``
    holds; ``message`` parts are strings or columns (the offending values)."""
    from pyspark.sql import functions as F

    parts = [F.lit(p) if isinstance(p, str) else p for p in (_START, *message, _END)]
    return F.when(bad, F.raise_error(F.concat(*parts))).otherwise(F.lit(True))


def failure(*parts: str) -> str:
    """SQL that fails the statement with the message the SQL string expressions ``parts`` make: a
    MERGE clause's assignment for a row the clause must never meet (the check rides on the MERGE's
    own join)."""
    start, end = literal(_START, "string"), literal(_END, "string")
    return f"raise_error(concat({start}, {', '.join(parts)}, {end}))"


@contextmanager
def reported(error: type[JobError], render: Callable[[str], str] | None = None) -> Iterator[None]:
    """Re-raise a failed :func:`check` (or :func:`failure`) inside the block as ``error`` with the
    check's message, as ``render`` words it (by default: the message, and that nothing was committed)."""
    try:
        yield
    except JobError:
        raise
    except Exception as exc:  # Spark's wrapper class differs between classic and Connect sessions
        found = _MESSAGE.search(str(exc))
        if found is None:
            raise
        text = found.group(1)
        raise error(render(text) if render else f"{text} Nothing of this merge was committed.") from None
