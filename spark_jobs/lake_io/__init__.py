"""Delta tables from a driver process, without Spark: the one API through which the jobs' drivers and
the Airflow side (sensor, triggers, UI) read a table's log, and read and write the warehouse's small
tables. Spark stays the engine for data (snapshots, wide tables, change sets); a driver reaches Delta
through this package alone (an import rule: nothing else imports ``deltalake``). Both sides import it;
it imports neither (only the contract's plain data, for the commit metadata it parses).

Two engines, each for what it answers best, chosen here once, one module each:

* :mod:`.log` — a table's log from its commit files with fsspec: versions, commits, the table's id;
* :mod:`.tables` — the small tables' rows through delta-rs: read, append, compare-and-set, merge,
  and how delta-rs names and reaches the warehouse on an object store.

Both execution modes have a driver process that reaches the warehouse: the spark-submit driver, and
the Spark Connect client (the Airflow task). Callers use the names below as ``lake_io.<name>``.
"""

from spark_jobs.lake_io.log import (
    DamagedCommit,
    LogListing,
    commit_versions,
    commits,
    head_version,
    list_log,
    table_history,
    table_id,
)
from spark_jobs.lake_io.tables import (
    CHECKPOINT_INTERVAL,
    VersionTaken,
    append,
    commit_after,
    merge,
    open_table,
    read_rows,
    replace_with_nothing,
    storage_options,
    storage_uri,
)

__all__ = [
    "CHECKPOINT_INTERVAL", "DamagedCommit", "LogListing", "VersionTaken", "append", "commit_after",
    "commit_versions", "commits", "head_version", "list_log", "merge", "open_table", "read_rows",
    "replace_with_nothing", "storage_options", "storage_uri", "table_history", "table_id",
]
