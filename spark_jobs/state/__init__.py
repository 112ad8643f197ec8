"""The lake's own state, in Delta tables under ``<warehouse>/_system``: consumer positions (the commit
protocol, :mod:`.consumers`), run history, lineage, the rejected-record ledger, and the append-only
writing they share (:mod:`.system_tables`). Jobs read and write it; it builds on :mod:`spark_jobs.delta`
and knows no job.
"""
