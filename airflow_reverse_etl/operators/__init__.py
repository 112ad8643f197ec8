"""The operators a DAG is built from, one module each, all on the shared base (:mod:`.base`: build the
job's spec, run it, return its result as the XCom):

* :mod:`.snapshot` — :class:`~airflow_reverse_etl.operators.snapshot.SnapshotOperator`; :mod:`.backfill` —
  several logical dates in one job;
* :mod:`.diff` — :class:`~airflow_reverse_etl.operators.diff.DiffOperator`;
* :mod:`.sink` — :class:`~airflow_reverse_etl.operators.sink.SinkOperator`;
* :mod:`.widen` — :class:`~airflow_reverse_etl.operators.widen.WidenTableOperator`;
* :mod:`.history` — an SCD type-2 history of a snapshot;
* :mod:`.restore`, :mod:`.savepoint` — one version of one table (what they share: :mod:`.table_version`);
* :mod:`.maintenance` — OPTIMIZE and VACUUM; :mod:`.retention` — deleting what is kept only for a while.
"""
