"""The one place that builds a SparkSession with Delta Lake.

Under spark-submit the master, jars and confs come from the command line (the Airflow hook sets them);
this module only makes sure the Delta extension and catalog are on, which every job needs. Tests and
benchmarks build an in-process session through :func:`build_session` with the jars fetched by
``scripts/fetch_jars.sh``. Importing this module does not import pyspark.
"""

from __future__ import annotations

import glob
import os

from spark_jobs.contract import DELTA_CONF


def local_jars(jars_dir: str | None) -> list[str]:
    """The jar files in ``jars_dir`` (as fetched by scripts/fetch_jars.sh), sorted for stable argv.

    Import-safe (no pyspark): the Airflow hook lists the same jars for spark-submit's ``--jars``."""
    if not jars_dir:
        return []
    jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
    if not jars:
        raise FileNotFoundError(
            f"No jars in {jars_dir!r}: run scripts/fetch_jars.sh (or `make setup`) to fetch the Delta jars"
        )
    return jars


def build_session(
    app_name: str | None = None,
    master: str | None = None,
    jars_dir: str | None = None,
    conf: dict[str, str] | None = None,
):
    """Get or create a SparkSession with Delta enabled.

    ``app_name``/``master``/``jars_dir`` are for in-process use (tests, benchmarks); under spark-submit
    leave them unset so the command line decides (``--name`` is the Airflow ``dag.task``).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if app_name:
        builder = builder.appName(app_name)
    if master:
        builder = builder.master(master)
    jars = local_jars(jars_dir)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    for key, value in {**DELTA_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
