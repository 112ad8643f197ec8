"""Destinations that fail on purpose, for commit-protocol tests. They wrap the real SQLite sink, so
what reaches the database before the failure is really there."""

from spark_jobs.sinks.sqlite import SqliteSink


class FailingSqliteSink(SqliteSink):
    """Goes down (a non-retryable connection error) once ``fail_after`` records were written."""

    name = "failing-sqlite"

    def write_batch(self, records):
        written = getattr(self, "_written", 0)
        if written + len(records) > int(self.config.options["fail_after"]):
            raise ConnectionError(f"destination went down after {written} records")
        outcomes = super().write_batch(records)
        self._written = written + len(records)
        return outcomes
