"""Data checks that ride along a write instead of costing a Spark job of their own.

A check is a filter ``when(bad, raise_error(message)).otherwise(true)`` placed in the frame a MERGE
(or append) consumes: on the success path it costs one comparison per row already being written, and a
bad row fails the write before Delta commits anything (a commit is atomic), so nothing is half-done.
:func:`reported` turns the Spark error the filter raises back into the job's own error class with the
message the check built, naming the offending values.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

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


@contextmanager
def reported(error: type[JobError]) -> Iterator[None]:
    """Re-raise a failed :func:`check` inside the block as ``error`` with the check's message."""
    try:
        yield
    except JobError:
        raise
    except Exception as exc:  # Spark's wrapper class differs between classic and Connect sessions
        found = _MESSAGE.search(str(exc))
        if found is None:
            raise
        raise error(f"{found.group(1)} Nothing of this merge was committed.") from None
