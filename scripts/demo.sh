#!/usr/bin/env bash
# Run the demo pipeline end to end on the embedded default: local Spark, a local Delta warehouse,
# Airflow with SQLite metadata, a SQLite destination. State lives in .cache/demo (fresh each time).
#
# The warm mode: the demo starts the project's local Spark Connect server (scripts/services/
# spark_connect.sh, local[*], its own port and directory under .cache/demo), runs every job of the DAG
# as a client of it (Airflow's `spark_default` connection of type `spark_connect`, as a deployment
# would configure it: docs/guides/spark-connect.md) and stops it at the end, also when the demo fails
# or is interrupted. A Spark job then costs its own work, not a JVM start per task.
#
#   ARETL_DEMO_SPARK=submit make demo   every job a cold spark-submit on local[*] instead: what the
#                                       operators do without a connection
#   AIRFLOW_CONN_SPARK_DEFAULT=... make demo   your own connection (a cluster, a server you run): the
#                                       demo starts no server and uses it
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

mode=${ARETL_DEMO_SPARK:-connect}
case "$mode" in connect|submit) ;; *) echo "demo: ARETL_DEMO_SPARK must be connect or submit, not '$mode'" >&2; exit 2 ;; esac

server_env=()
stop_server() {
  env "${server_env[@]}" bash scripts/services/spark_connect.sh stop >/dev/null 2>&1 || true
}

if [ -n "${AIRFLOW_CONN_SPARK_DEFAULT:-}" ]; then
  echo "demo: using your spark_default connection (AIRFLOW_CONN_SPARK_DEFAULT); no server started"
elif [ "$mode" = connect ]; then
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  server_env=(ARETL_TEST_SPARK_CONNECT_PORT="$port" ARETL_SPARK_CONNECT_DIR="$demo/spark-connect"
              ARETL_SPARK_CONNECT_UI_PORT=off PYTHON="$repo/.venv/bin/python")
  trap stop_server EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  echo "demo: starting a local Spark Connect server (the warm mode; log in $demo/spark-connect)"
  started=$(date +%s)
  url=$(env "${server_env[@]}" bash scripts/services/spark_connect.sh start)
  echo "demo: $url ready in $(( $(date +%s) - started )) s"
  export AIRFLOW_CONN_SPARK_DEFAULT="{\"conn_type\": \"spark_connect\", \"host\": \"sc://127.0.0.1\", \"port\": $port}"
else
  echo "demo: every job a spark-submit on local[*] (no spark_default connection)"
fi

echo "demo: initialising Airflow's metadata database in $AIRFLOW_HOME"
airflow db migrate >/dev/null
python scripts/demo.py
