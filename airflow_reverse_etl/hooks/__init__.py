"""How a task runs its Spark job, and the connection types the provider adds:

* :mod:`.spark_job` — :class:`~airflow_reverse_etl.hooks.spark_job.SparkJobHook`: a job through
  spark-submit or Spark Connect, its JSON result back;
* :mod:`.spark_connect_runner` — a job run in the task process as a client of a Spark Connect server;
* :mod:`.cluster_driver` — a job's driver in cluster deploy mode on a standalone cluster (durable:
  a retry reattaches);
* :mod:`.destination` — the connection types of the sink destinations, so the UI offers a form.
"""
