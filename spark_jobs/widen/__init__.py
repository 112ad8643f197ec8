"""Wide tables: several sources merged into ``<warehouse>/wide/<name>`` by partial update (full joins on
the wide key) and through a reverse index (left joins on a foreign key). The job that runs a step is
:mod:`spark_jobs.jobs.widen`.

* :mod:`.changes` — a source's changes between two exact versions; :mod:`.events` — the events a
  step folds;
* :mod:`.full_join` — the full-join part of a step; :mod:`.partial_update` — Paimon's partial update
  as one fold per key, with the aggregates' expressions (:mod:`.aggregate_columns`);
* :mod:`.reverse_index` — left joins whose late, changed or deleted right rows reach every left row;
* :mod:`.schema` — the step's column types (the data checks that ride along its writes are
  :mod:`spark_jobs.delta.guards`).
"""
