"""Errors a user can act on.

A :class:`JobError` is reported as the job result's ``error`` and becomes the Airflow task's failure
message verbatim, so its text must name the problem (the table, the column, the key values) and, where
there is one, the option that changes the behaviour. Anything else is a bug or an infrastructure
failure and is reported with its type and traceback.
"""


class JobError(Exception):
    """A failure caused by configuration or data, explained in the message."""


class ConfigError(JobError):
    """The job spec asks for something impossible (unknown column, bad option, missing table)."""


class DataQualityError(JobError):
    """The source data breaks a rule the job relies on (null or duplicate primary keys)."""


class SchemaDriftError(JobError):
    """The source's columns no longer match the table they are recorded into."""


class DestinationError(JobError):
    """The destination refused the sync as a whole (unreachable, schema mismatch, safety limit)."""


class StaleCommitError(JobError):
    """A sync would commit a consumer version over a commit it did not start from (a stale re-run, or
    two syncs of one consumer at once): refused, so the committed version never moves backwards."""
