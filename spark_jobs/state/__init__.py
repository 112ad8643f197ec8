"""The lake's own state, in Delta tables under ``<warehouse>/_system``, written with the driver-side
Delta API (:mod:`spark_jobs.lake_io`). Jobs read and write it; it builds on :mod:`spark_jobs.delta`
and knows no job.

* :mod:`.consumers` — consumer positions, the commit protocol's compare-and-set;
* :mod:`.runs` — the run history of syncs; :mod:`.lineage` — what each job read and wrote;
* :mod:`.rejects` — the rejected-record ledger;
* :mod:`.system_tables` — the append-only writing and "latest per key" reading they share;
* :mod:`.pruning` — which of the warehouse's leftovers may go.
"""
