"""Airflow provider for snapshot-based reverse ETL and wide tables on Spark + Delta Lake.

This package is the Airflow side. It never imports pyspark at import time; the Spark work lives in
:mod:`spark_jobs` and runs under spark-submit or over Spark Connect. Of :mod:`spark_jobs` it imports
only the contract (:mod:`spark_jobs.contract`) and the driver-side lake I/O (:mod:`spark_jobs.lake_io`).

* :mod:`.operators` — the operators a DAG is built from (snapshot, diff, sink, widen, backfill,
  history, restore, savepoint, maintenance, retention);
* :mod:`.sensors` — :class:`~airflow_reverse_etl.sensors.snapshot.SnapshotSensor`;
* :mod:`.triggers` — what waits in the triggerer: a version, a source's commits, a cluster driver;
* :mod:`.hooks` — running a job (spark-submit, Spark Connect, a cluster driver) and the destination
  connection types;
* :mod:`.ui` — the sync history and rejects view in Airflow's UI;
* :mod:`.planning` — a wide-table spec as a task tree (join priority as dependencies);
* :mod:`.lineage` — OpenLineage datasets and Assets of a job's tables; :mod:`.links` — extra links;
* :mod:`.live` — pipelines scheduled on a Delta source's commits;
* :mod:`.alerts` — notifications on rejects; :mod:`.exceptions` — what the provider raises;
* :mod:`.connections` — Airflow connections as job settings plus secrets; :mod:`.config` — the
  ``[reverse_etl]`` settings; :mod:`.sink_templates` — a REST destination's own templates kept from
  Airflow's rendering;
* :mod:`.delta_log` — a Delta table's log as the Airflow side reads it; :mod:`.storage` — telling a
  storage outage from a storage problem;
* :mod:`.get_provider_info` — the provider's metadata (Airflow's ``apache_airflow_provider`` entry point).
"""

__version__ = "0.1.0"
