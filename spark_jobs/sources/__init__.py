"""Reading what a snapshot records: a JDBC table or query, a Delta table, Parquet/CSV files
(:mod:`.read`), or an upsert-kafka topic read on from recorded offsets (:mod:`.upsert_kafka`).
Builds on :mod:`spark_jobs.delta`; the snapshot job (:mod:`spark_jobs.jobs.snapshot`) is its reader.
"""
