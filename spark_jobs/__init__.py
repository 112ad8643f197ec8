"""The Spark side of airflow-reverse-etl.

Everything here runs under ``spark-submit`` (driver and executors) and never imports Airflow: a job
reads a JSON spec, does its work on Spark + Delta Lake and writes a JSON result. The Airflow side
(:mod:`airflow_reverse_etl`) builds the specs and reads the results.
"""
