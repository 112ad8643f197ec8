"""The jobs the entry point runs, one module each (its ``run_<job>`` function takes the session and
the job's typed spec from :mod:`spark_jobs.contract` and returns its result): snapshot (with
rebuild, its forward replay of a past date, and backfill, several dates in one application), diff,
sync (a change set through a sink, then the consumer's commit), widen (a wide table's step),
history, restore, savepoint, retention and maintenance. The jobs are the top layer: they drive the
sinks, the wide-table library, the sources and the lake's state, and nothing below imports them.
"""
