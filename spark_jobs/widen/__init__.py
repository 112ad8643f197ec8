"""Wide tables: several sources merged into ``<warehouse>/wide/<name>`` by partial update (full joins on
the wide key) and through a reverse index (left joins on a foreign key). The job that runs a step
is :mod:`spark_jobs.jobs.widen`."""
