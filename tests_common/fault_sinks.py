"""Destinations that fail on purpose, for commit-protocol tests. They wrap the real SQLite sink, so
what reaches the database before the failure is really there."""

from dataclasses import dataclass

from spark_jobs.contract.destinations import SqliteOptions
from spark_jobs.contract.options import option
from spark_jobs.sinks.sqlite import SqliteSink


@dataclass(frozen=True, kw_only=True)
class FailingSqliteOptions(SqliteOptions):
    fail_after: int = option(doc="records written before the destination goes down")


class FailingSqliteSink(SqliteSink):
    """Goes down (a non-retryable connection error) once ``fail_after`` records were written."""

    name = "failing-sqlite"
    options_class = FailingSqliteOptions
    options: FailingSqliteOptions

    def write_batch(self, records):
        written = getattr(self, "_written", 0)
        if written + len(records) > self.options.fail_after:
            raise ConnectionError(f"destination went down after {written} records")
        outcomes = super().write_batch(records)
        self._written = written + len(records)
        return outcomes
