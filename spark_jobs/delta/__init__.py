"""Delta Lake and Spark primitives the jobs share: commit metadata and conflict retries (:mod:`.lake`),
logical date <-> version (:mod:`.timetravel`), column renames, partition and key pruning of a MERGE,
the stored row hash, exact SQL literals, key and column-name checks, wide expressions and small-file
I/O. Nothing here is a job, and nothing here knows a job: jobs, sources, sinks and the lake state
tables build on it.
"""
