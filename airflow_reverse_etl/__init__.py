"""Airflow provider for snapshot-based reverse ETL and wide tables on Spark + Delta Lake.

This package is the Airflow side: operators, sensors, triggers, hooks, lineage and planning. It never
imports pyspark at import time; the Spark work lives in :mod:`spark_jobs` and runs under spark-submit.
"""

__version__ = "0.1.0"
