#!/usr/bin/env bash
# Run the demo pipeline end to end on the embedded default: local Spark, a local Delta warehouse,
# Airflow with SQLite metadata, a SQLite destination. State lives in .cache/demo (fresh each time).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
demo="$repo/.cache/demo"
rm -rf "$demo" && mkdir -p "$demo"

export AIRFLOW_HOME="$demo/airflow_home"
export AIRFLOW__CORE__DAGS_FOLDER="$repo/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__REVERSE_ETL__WAREHOUSE="$demo/warehouse"
export AIRFLOW__REVERSE_ETL__JARS_DIR="$repo/.cache/jars"
export ARETL_DEMO_DIR="$demo"
export SPARK_LOCAL_IP=127.0.0.1
export PATH="$repo/.venv/bin:$PATH"

echo "demo: initialising Airflow's metadata database in $AIRFLOW_HOME"
airflow db migrate >/dev/null
python scripts/demo.py
