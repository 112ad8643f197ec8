#!/usr/bin/env bash
# A Spark Connect server with Delta Lake on 127.0.0.1, started from the jars of the installed pyspark
# plus the Delta jars fetched by scripts/fetch_jars.sh (no separate Spark download). Airflow tasks
# whose Spark connection has the type `spark_connect` run their jobs as clients of this server.
#
#   scripts/services/spark_connect.sh start [--master URL]   start the server (local[*] unless --master
#                                                             names e.g. the standalone cluster
#                                                             spark://127.0.0.1:57077), wait until it
#                                                             accepts clients, print its sc:// URL
#   scripts/services/spark_connect.sh stop                    stop it (the log is kept)
#   scripts/services/spark_connect.sh status                  exit 0 and print the URL if it runs, 3 if not
#
# Environment (all optional):
#   ARETL_TEST_SPARK_CONNECT_PORT   gRPC port (default 55002)
#   ARETL_SPARK_CONNECT_MASTER      master when --master is not given (default local[*])
#   ARETL_SPARK_CONNECT_DRIVER_MEMORY  driver memory of the server (default 2g)
#   ARETL_SPARK_CONNECT_DIR         log, pid file, scratch dirs (default <repo>/.cache/services/spark-connect-<port>)
#   ARETL_SPARK_CONNECT_CONF        extra "key=value" Spark settings, separated by spaces
#   ARETL_SPARK_CONNECT_CLASSPATH   extra classpath of the server's driver JVM, e.g. "<repo>/.cache/jars-s3/*"
#                                   (the S3A connector for an s3a:// warehouse: `make s3-jars`)
#   ARETL_SPARK_CONNECT_UI_PORT     port of the server's web UI (default: a free port chosen at start;
#                                   printed in the log; "off" turns the UI off)
#   PYTHON                          python with pyspark installed (default <repo>/.venv/bin/python);
#                                   also the executors' Python (PYSPARK_PYTHON), so they have pyarrow
#
# Everything binds to loopback. The web UI runs on an explicit port: a client cannot see the port a UI
# bound, only the configured one, and the jobs link their session's page of it (the "Connect" tab: the
# session's statements with their jobs and SQL plans) as the task's "Spark application" link; it keeps
# the last 200 jobs, statements and sessions, so a long-lived server's memory stays flat. The server runs with PYTHONPATH unset: executors
# import the job library only from what a session ships (addArtifacts(..., pyfile=True)).
#
# Python workers are started per task, not forked from a daemon (spark.python.use.daemon=false):
# Spark 4.2 keys its Python worker factories by the Connect session (SPARK_JOB_ARTIFACT_UUID, which
# every session has, artifacts or not) and never drops them (SPARK-54055), so with the daemon every
# session that ran Python left a ~47 MB pyspark.daemon process behind until the server stopped. A
# worker started per task exits when it is done, and the process count stays flat. What still stays
# per session is a sleeping thread ("Idle Worker Monitor") and a small object in the JVM: restart a
# long-lived server now and then (bench/connect_leak.py measures both; docs/guides/spark-connect.md).
# Idempotent: `start` on a running server only prints its URL. Works from any cwd, no stdin.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=lib.sh
source "$repo/scripts/services/lib.sh"
host=127.0.0.1
port=${ARETL_TEST_SPARK_CONNECT_PORT:-55002}
master=${ARETL_SPARK_CONNECT_MASTER:-"local[*]"}
driver_memory=${ARETL_SPARK_CONNECT_DRIVER_MEMORY:-2g}
dir=${ARETL_SPARK_CONNECT_DIR:-"$repo/.cache/services/spark-connect-$port"}
python=${PYTHON:-"$repo/.venv/bin/python"}
jars_dir="$repo/.cache/jars"
url="sc://$host:$port"
server_class=org.apache.spark.sql.connect.service.SparkConnectServer
pidfile="$dir/server.pid"
logfile="$dir/server.log"

log() { echo "spark_connect.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The server's pid, if the pid file names a live process that still runs the server class (a reused
# pid must not make us trust or kill another process).
running_pid() {
  local pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$server_class" || return 1
  echo "$pid"
}

port_busy() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

spark_home() {
  [ -x "$python" ] || python=$(command -v python3) || die "no python found (set PYTHON)"
  "$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null \
    || die "pyspark is not importable by $python (run scripts/bootstrap.sh or set PYTHON)"
}

start() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --master) [ $# -ge 2 ] || die "--master needs a URL"; master=$2; shift 2 ;;
      *) die "unknown option $1 (usage: start [--master URL])" ;;
    esac
  done
  if running_pid >/dev/null; then
    echo "$url"
    return 0
  fi
  command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || die "Java is required (Spark 4 needs Java 17 or 21)"
  local home jars
  home=$(spark_home)
  [ -f "$home/jars/spark-connect_2.13-$("$python" -c 'import pyspark; print(pyspark.__version__)').jar" ] \
    || die "the installed pyspark ($home) ships no spark-connect jar"
  jars=$(ls "$jars_dir"/*.jar 2>/dev/null | paste -sd, -) || true
  [ -n "$jars" ] || die "no Delta jars in $jars_dir: run scripts/fetch_jars.sh first"
  port_busy "$port" && die "port $port on $host is already in use; stop that process or set ARETL_TEST_SPARK_CONNECT_PORT"
  mkdir -p "$dir/tmp" "$dir/warehouse"
  local extra=() kv
  for kv in ${ARETL_SPARK_CONNECT_CONF:-}; do extra+=(--conf "$kv"); done
  [ -z "${ARETL_SPARK_CONNECT_CLASSPATH:-}" ] || extra+=(--driver-class-path "$ARETL_SPARK_CONNECT_CLASSPATH")

  local ui_port=${ARETL_SPARK_CONNECT_UI_PORT:-$("$python" -c \
    'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
  local ui=(--conf spark.ui.enabled=false)
  [ "$ui_port" = off ] || ui=(--conf spark.ui.port="$ui_port"
    --conf spark.ui.retainedJobs=200 --conf spark.ui.retainedStages=200 --conf spark.sql.ui.retainedExecutions=200
    --conf spark.sql.connect.ui.retainedSessions=200 --conf spark.sql.connect.ui.retainedStatements=200)
  log "starting a Spark Connect server on $url (master $master, UI port $ui_port, log $logfile)"
  : > "$logfile"
  (
    cd "$dir"
    unset PYTHONPATH SPARK_CONF_DIR
    export SPARK_HOME="$home" SPARK_LOCAL_IP=$host SPARK_LOCAL_HOSTNAME=$host SPARK_PUBLIC_DNS=$host
    export PYSPARK_PYTHON="$python" PYSPARK_DRIVER_PYTHON="$python"
    exec nohup "$home/bin/spark-submit" --class "$server_class" --name "Spark Connect server ($url)" \
      --master "$master" --driver-memory "$driver_memory" --jars "$jars" \
      --driver-java-options "-Dlog4j2.configurationFile=file:$repo/spark_jobs/log4j2.properties -Djava.io.tmpdir=$dir/tmp" \
      --conf spark.connect.grpc.binding.address=$host \
      --conf spark.connect.grpc.binding.port="$port" \
      --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
      --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
      --conf spark.sql.warehouse.dir="$dir/warehouse" \
      --conf spark.local.dir="$dir/tmp" \
      "${ui[@]}" \
      --conf spark.ui.showConsoleProgress=false \
      --conf spark.databricks.delta.snapshotPartitions=4 \
      --conf spark.python.sql.dataFrameDebugging.enabled=false \
      --conf spark.pyspark.python="$python" \
      --conf spark.python.use.daemon=false \
      "${extra[@]}" \
      spark-internal >> "$logfile" 2>&1 < /dev/null
  ) 9>&- &  # the server must not inherit (and hold forever) the start lock
  local pid=$! i
  echo "$pid" > "$pidfile"

  for ((i = 0; i < 240; i++)); do
    port_busy "$port" && { log "ready: $url"; echo "$url"; return 0; }
    # kill -0, not running_pid: while nohup, spark-submit and spark-class exec one another the
    # process's command line is briefly empty.
    kill -0 "$pid" 2>/dev/null || { tail -n 30 "$logfile" >&2; die "the server exited during start-up (log: $logfile)"; }
    sleep 0.5
  done
  tail -n 30 "$logfile" >&2
  die "the server did not accept connections on $host:$port within 120s (log: $logfile)"
}

stop() {
  local pid i
  if pid=$(running_pid); then
    stop_process server "$pid"
  else
    log "not running"
  fi
  rm -f "$pidfile"
}

status() {
  local pid
  pid=$(running_pid) || { log "not running"; exit 3; }
  log "running (pid $pid, log $logfile)"
  echo "$url"
}

cmd=${1:-}
case "$cmd" in
  start|stop|status) shift ;;
  *) echo "usage: $0 {start [--master URL]|stop|status}" >&2; exit 2 ;;
esac

lock_for_change "$cmd" "$dir"

case "$cmd" in
  start) start "$@" ;;
  stop) stop ;;
  status) status ;;
esac
