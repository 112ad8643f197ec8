"""Reading what a snapshot records: a JDBC table or query, a Delta table, Parquet/CSV files
(:mod:`.read`), a Delta source's Change Data Feed since the version recorded last (:mod:`.change_feed`,
the fast path), or an upsert-kafka topic read on from recorded offsets (:mod:`.upsert_kafka`).
Builds on :mod:`spark_jobs.delta`; the snapshot job (:mod:`spark_jobs.jobs.snapshot`) is its reader.
"""
