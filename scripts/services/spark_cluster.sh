#!/usr/bin/env bash
# A real Spark standalone cluster for the test suite: one master and one worker on 127.0.0.1, both
# started from the jars of the installed pyspark (no separate Spark download).
#
#   scripts/services/spark_cluster.sh start    start master + worker, wait until the worker registered,
#                                              print the master URL
#   scripts/services/spark_cluster.sh stop     stop both (logs are kept)
#   scripts/services/spark_cluster.sh status   exit 0 and print the master URL if both run, exit 3 if not
#
# Environment (all optional):
#   ARETL_SPARK_MASTER_PORT        master RPC port (default 57077)
#   ARETL_SPARK_MASTER_UI_PORT     master web UI port, bound to 127.0.0.1 (default 58080)
#   ARETL_SPARK_MASTER_REST_PORT   master REST submission server, bound to 127.0.0.1 (default 56066): the
#                                  status and kill of drivers in cluster deploy mode
#   ARETL_SPARK_WORKER_PORT        worker RPC port (default 57078)
#   ARETL_SPARK_WORKER_UI_PORT     worker web UI port, bound to 127.0.0.1 (default 58081)
#   ARETL_SPARK_WORKER_CORES       cores the worker offers (default 2)
#   ARETL_SPARK_WORKER_MEMORY      memory the worker offers (default 2g)
#   ARETL_SPARK_DIR                logs, pid files, work dir (default <repo>/.cache/services/spark)
#   PYTHON                         python with pyspark installed (default <repo>/.venv/bin/python)
#
# Everything binds to loopback (SPARK_LOCAL_IP=127.0.0.1). The daemons run with PYTHONPATH unset so
# that executors see only what an application ships (--py-files), as on a real cluster.
# Idempotent: `start` on a running cluster only prints the master URL. Works from any cwd, no stdin.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=lib.sh
source "$repo/scripts/services/lib.sh"
host=127.0.0.1
master_port=${ARETL_SPARK_MASTER_PORT:-57077}
master_ui_port=${ARETL_SPARK_MASTER_UI_PORT:-58080}
master_rest_port=${ARETL_SPARK_MASTER_REST_PORT:-56066}
worker_port=${ARETL_SPARK_WORKER_PORT:-57078}
worker_ui_port=${ARETL_SPARK_WORKER_UI_PORT:-58081}
worker_cores=${ARETL_SPARK_WORKER_CORES:-2}
worker_memory=${ARETL_SPARK_WORKER_MEMORY:-2g}
dir=${ARETL_SPARK_DIR:-"$repo/.cache/services/spark"}
python=${PYTHON:-"$repo/.venv/bin/python"}
master_url="spark://$host:$master_port"
master_class=org.apache.spark.deploy.master.Master
worker_class=org.apache.spark.deploy.worker.Worker

log() { echo "spark_cluster.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The pid in $1's pid file, if that process is alive and still runs the daemon class $2 (a stale pid
# file whose pid was reused by another process must not make us kill or trust that process).
running_pid() {
  local pidfile="$dir/$1.pid" class=$2 pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$class" || return 1
  echo "$pid"
}

spark_home() {
  [ -x "$python" ] || python=$(command -v python3) || die "no python found (set PYTHON)"
  "$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null \
    || die "pyspark is not importable by $python (run scripts/bootstrap.sh or set PYTHON)"
}

# Start daemon $1 (master|worker) running class $2 with arguments $3..., in the background.
launch() {
  local name=$1 class=$2; shift 2
  local out="$dir/logs/$name.out"
  : > "$out"
  (
    cd "$dir"
    unset PYTHONPATH SPARK_CONF_DIR
    export SPARK_HOME="$home" SPARK_LOCAL_IP=$host SPARK_LOCAL_HOSTNAME=$host SPARK_PUBLIC_DNS=$host
    export SPARK_CONF_DIR="$dir/conf" SPARK_LOG_DIR="$dir/logs" SPARK_WORKER_DIR="$dir/work"
    export SPARK_NO_DAEMONIZE=1
    # The REST submission server answers the state of a cluster-mode driver and kills it (the
    # operators' durable and deferrable cluster mode); loopback only, like everything here.
    export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=true -Dspark.master.rest.port=$master_rest_port -Dspark.master.rest.host=$host"
    exec nohup "$home/bin/spark-class" "$class" "$@" >> "$out" 2>&1 < /dev/null
  ) &
  echo $! > "$dir/$name.pid"
}

# Wait up to $3 seconds for the line $2 in daemon $1's log; fail with the log's tail otherwise.
wait_for_log() {
  local name=$1 pattern=$2 timeout=$3 class=$4 i
  for ((i = 0; i < timeout * 2; i++)); do
    grep -q -- "$pattern" "$dir/logs/$name.out" 2>/dev/null && return 0
    running_pid "$name" "$class" >/dev/null || { tail -n 30 "$dir/logs/$name.out" >&2; die "the $name exited during start-up (log: $dir/logs/$name.out)"; }
    sleep 0.5
  done
  tail -n 30 "$dir/logs/$name.out" >&2
  die "the $name did not log '$pattern' within ${timeout}s (log: $dir/logs/$name.out)"
}

# Fail early and clearly when another process (e.g. a cluster of another checkout) holds a port:
# Spark would otherwise silently move to the next free port.
check_port_free() {
  local port=$1 what=$2
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    die "port $port ($what) on $host is already in use; stop that process or set the ARETL_SPARK_*_PORT variables"
  fi
}

stop_daemon() {
  local name=$1 class=$2 pid
  if pid=$(running_pid "$name" "$class"); then
    stop_process "$name" "$pid"
  fi
  rm -f "$dir/$name.pid"
}

start() {
  if running_pid master "$master_class" >/dev/null && running_pid worker "$worker_class" >/dev/null; then
    echo "$master_url"
    return 0
  fi
  command -v java >/dev/null || [ -n "${JAVA_HOME:-}" ] || die "Java is required (Spark 4 needs Java 17 or 21)"
  home=$(spark_home)
  mkdir -p "$dir/logs" "$dir/work" "$dir/conf"
  if ! running_pid master "$master_class" >/dev/null; then
    check_port_free "$master_port" "master"
    check_port_free "$master_ui_port" "master web UI"
    check_port_free "$master_rest_port" "master REST submission server"
    log "starting the master on $master_url (web UI http://$host:$master_ui_port)"
    launch master "$master_class" --host "$host" --port "$master_port" --webui-port "$master_ui_port"
    wait_for_log master "Starting Spark master at $master_url" 60 "$master_class"
  fi
  if ! running_pid worker "$worker_class" >/dev/null; then
    check_port_free "$worker_port" "worker"
    check_port_free "$worker_ui_port" "worker web UI"
    log "starting a worker with $worker_cores cores and $worker_memory"
    launch worker "$worker_class" --host "$host" --port "$worker_port" --webui-port "$worker_ui_port" \
      --cores "$worker_cores" --memory "$worker_memory" --work-dir "$dir/work" "$master_url"
    wait_for_log worker "Successfully registered with master $master_url" 60 "$worker_class"
  fi
  log "ready: master $master_url, worker registered"
  echo "$master_url"
}

status() {
  local master worker
  master=$(running_pid master "$master_class") || { log "the master is not running"; exit 3; }
  worker=$(running_pid worker "$worker_class") || { log "the worker is not running (master pid $master)"; exit 3; }
  log "master pid $master, worker pid $worker"
  echo "$master_url"
}

case "${1:-}" in
  start) start ;;
  stop) stop_daemon worker "$worker_class"; stop_daemon master "$master_class" ;;
  status) status ;;
  *) echo "usage: $0 {start|stop|status}" >&2; exit 2 ;;
esac
