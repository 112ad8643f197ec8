"""The jobs the entry point runs, one module each (its ``run_<job>`` function takes the session and
the job's typed spec from :mod:`spark_jobs.contract` and returns its result): snapshot (with
rebuild, its forward replay of a past date, and backfill, several dates in one application), diff,
history, restore, savepoint, retention and maintenance. The sync and wide-table jobs live with what
they drive, in :mod:`spark_jobs.sinks.job` and :mod:`spark_jobs.widen.job`.
"""
