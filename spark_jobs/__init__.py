"""The Spark side of airflow-reverse-etl.

Everything here runs under ``spark-submit`` (driver and executors) and never imports Airflow: a job
reads a JSON spec, does its work on Spark + Delta Lake and writes a JSON result. The Airflow side
(:mod:`airflow_reverse_etl`) builds the specs and reads the results.

The folders are the architecture, each building only on those listed after it:

* :mod:`.jobs` — the job entry points: snapshot (with rebuild and backfill), diff, sync, widen,
  history, restore, savepoint, retention, maintenance;
* :mod:`.sinks` — destinations and the shared delivery core the sync job drives them with;
* :mod:`.widen` — wide tables: several sources merged by partial update and a reverse index;
* :mod:`.sources` — reading what a snapshot records (JDBC, Delta, files, a Delta source's Change
  Data Feed, upsert-kafka topics);
* :mod:`.state` — the lake's own tables under ``_system``: consumer positions, runs, lineage, rejects;
* :mod:`.delta` — Delta and Spark primitives every job shares (commit metadata and own-commit checks,
  time travel, change detection and change sets, renames, MERGE pruning, the row hash, column and key
  checks, Hadoop file I/O for specs and results);
* :mod:`.lake_io` — the driver-side Delta API through which a driver (a job's, or the Airflow side's
  sensor, triggers and UI) reads a table's log and reads and writes the small tables without Spark
  (fsspec, delta-rs); both sides import it;
* :mod:`.contract` — the contract both sides share, plain data (no pyspark, no airflow): the specs and
  results (each job's spec names the function that runs it), the options, the lake's layout and its
  system tables' columns, the wide-table spec with its aggregates.

At the top level stays only the package's own plumbing, which any of those may use and which
belongs to none of them: :mod:`.entry` (the spark-submit application: parse the spec, run the job
its spec names, write the result), :mod:`.session` (building the SparkSession), :mod:`.errors` (the
error taxonomy every layer raises and the Airflow side maps) with :mod:`.error_conditions` (the
Spark, Delta, JVM and Python failures it explains), :mod:`.column_lineage` (which input
columns each output column of a job came from, derived by the entry point from the job's spec and
result), :mod:`.env_secrets` and :mod:`.kafka_clients` (connection settings and secrets from the
environment, shared by a source and a sink alike) with :mod:`.redaction` (those secrets, and the
tokens a job fetches, replaced in every wire form wherever a job's outputs leave it),
:mod:`.progress` (progress lines in the task log) and :mod:`.crashpoints` (the named points where
tests kill a job). ``log4j2.properties`` is the
driver's logging configuration, shipped as package data.
"""
