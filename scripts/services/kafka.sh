#!/usr/bin/env bash
# A throwaway single-node Apache Kafka broker (KRaft: one process is both broker and controller)
# for the test suite, on 127.0.0.1 only.
#
#   scripts/services/kafka.sh start    fetch the jars if needed, format fresh storage, start, wait, print
#                                      bootstrap.servers=HOST:PORT
#   scripts/services/kafka.sh stop     stop it and delete its data (topics do not outlive a stop)
#   scripts/services/kafka.sh status   exit 0 and print bootstrap.servers if it runs, exit 3 if not
#
# Environment:
#   ARETL_TEST_KAFKA_PORT              client (PLAINTEXT) port (default 59092)
#   ARETL_TEST_KAFKA_CONTROLLER_PORT   KRaft controller port (default client port + 1)
#   ARETL_TEST_KAFKA_START_TIMEOUT     seconds to wait for the broker (default 120)
#   ARETL_TEST_KAFKA_JVM_OPTS          extra JVM options for the broker, after ours (later ones win)
#   ARETL_MAVEN_REPO                   Maven local repository (default <repo>/.cache/m2)
#   PYTHON                             a Python with confluent-kafka for the readiness check (default
#                                      <repo>/.venv/bin/python, then python3; skipped if neither has it)
#
# The broker's jars come from Maven Central through `mvn dependency:copy-dependencies` on
# scripts/services/kafka-pom.xml (Maven's default repository configuration), into
# .cache/services/kafka/libs; they are fetched again only when that pom changes. Logs go to
# .cache/services/kafka/logs. Idempotent: `start` on a running broker only prints its address.
# Works from any cwd and needs no stdin.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=lib.sh
source "$repo/scripts/services/lib.sh"
here="$repo/scripts/services"
pom="$here/kafka-pom.xml"
# realpath: .cache may be a symlink (a git worktree sharing it); the broker is recognised by this path
base=$(realpath -m "$repo/.cache/services/kafka")
libs="$base/libs"
logs="$base/logs"
data="$base/data"
conf="$base/config"
pidfile="$base/kafka.pid"
addrfile="$base/bootstrap"
host=127.0.0.1
port=${ARETL_TEST_KAFKA_PORT:-59092}
cport=${ARETL_TEST_KAFKA_CONTROLLER_PORT:-$((port + 1))}
timeout=${ARETL_TEST_KAFKA_START_TIMEOUT:-120}
maven_repo=${ARETL_MAVEN_REPO:-"$repo/.cache/m2"}

log() { echo "kafka.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"; return 0; fi
  command -v java
}

ensure_tools() {
  local missing=()
  java_bin >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  [ ${#missing[@]} = 0 ] && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    || die "missing ${missing[*]} (Java 17+ and Maven are needed to run the test broker)"
  log "installing ${missing[*]} from Debian packages"
  { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >&2 \
    || die "apt-get install ${missing[*]} failed"
}

fetch_libs() {
  local want stamp="$libs/.fetched-from"
  want=$(sha1sum "$pom" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  log "fetching the Kafka broker jars with mvn (scripts/services/kafka-pom.xml) into $libs"
  local staging="$base/libs.staging"
  rm -rf "$staging"
  mkdir -p "$staging" "$maven_repo"
  if ! mvn -q -B -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$maven_repo" \
      dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$staging" >&2; then
    rm -rf "$staging"
    die "mvn could not fetch the Kafka jars"
  fi
  ls "$staging"/kafka_2.13-*.jar >/dev/null 2>&1 || die "mvn produced no kafka_2.13 jar in $staging"
  rm -rf "$libs"
  mv "$staging" "$libs"
  echo "$want" > "$stamp"
  log "$(ls "$libs"/*.jar | wc -l) jars, $(du -sh "$libs" | cut -f1)"
}

kafka_version() {
  local j; j=$(ls "$libs"/kafka_2.13-*.jar 2>/dev/null | head -1)
  [ -n "$j" ] && basename "$j" .jar | sed 's/^kafka_2\.13-//'
}

# The pid in our pid file, if that process is alive and is our broker (its command line names our
# config file), else nothing.
broker_pid() {
  [ -f "$pidfile" ] || return 1
  local pid; pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$conf/server.properties" || return 1
  echo "$pid"
}

port_busy() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

write_config() {
  mkdir -p "$conf"
  cat > "$conf/server.properties" <<EOF
# Written by scripts/services/kafka.sh on every start. Single node, test-only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$host:$cport
listeners=PLAINTEXT://$host:$port,CONTROLLER://$host:$cport
advertised.listeners=PLAINTEXT://$host:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data
num.partitions=4
default.replication.factor=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
log.retention.hours=24
EOF
  cat > "$conf/log4j2.properties" <<'EOF'
# Written by scripts/services/kafka.sh. Everything into logs/server.log.
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
}

# C1 only (TieredStopAtLevel=1): the broker starts about twice as fast on a busy 2-core machine and
# test traffic is small. For throughput work pass ARETL_TEST_KAFKA_JVM_OPTS="-XX:TieredStopAtLevel=4"
# (later flags win).
java_opts=(-Xmx512m -Xms128m -XX:TieredStopAtLevel=1 -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError
  -Djava.awt.headless=true)
# shellcheck disable=SC2206  # word splitting of the extra options is intended
[ -n "${ARETL_TEST_KAFKA_JVM_OPTS:-}" ] && java_opts+=(${ARETL_TEST_KAFKA_JVM_OPTS})

run_tool() { # kafka.tools.StorageTool ARGS...
  "$(java_bin)" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j2.configurationFile="$conf/log4j2.properties" -Dkafka.logs.dir="$logs" \
    -cp "$libs/*" "$@"
}

# Is the broker answering metadata requests? Uses confluent-kafka when a Python has it; otherwise
# the log line plus an open port has to do.
metadata_ok() {
  local py
  for py in "${PYTHON:-}" "$repo/.venv/bin/python" python3; do
    [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
    "$py" -c 'import confluent_kafka' >/dev/null 2>&1 || continue
    "$py" - "$host:$port" <<'EOF' >/dev/null 2>&1
import sys
from confluent_kafka.admin import AdminClient
md = AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=5)
sys.exit(0 if md.brokers else 1)
EOF
    return
  done
  return 0
}

do_start() {
  local pid
  if pid=$(broker_pid); then
    if [ "$(cat "$addrfile" 2>/dev/null)" = "$host:$port $host:$cport" ]; then
      metadata_ok || die "broker pid $pid runs but does not answer on $host:$port (see $logs/server.log)"
      log "already running (pid $pid)"
      echo "bootstrap.servers=$host:$port"
      return 0
    fi
    log "running with other ports ($(cat "$addrfile" 2>/dev/null)): restarting"
    do_stop
  fi

  ensure_tools
  fetch_libs
  mkdir -p "$logs"
  local p
  for p in "$port" "$cport"; do
    port_busy "$p" && die "port $host:$p is already in use by another process (set ARETL_TEST_KAFKA_PORT / ARETL_TEST_KAFKA_CONTROLLER_PORT)"
  done
  write_config

  # Fresh storage every start: no topics or offsets leak from an earlier run.
  rm -rf "$data"
  # A cluster id is a base64url UUID (22 chars); one not starting with "-" (what StorageTool
  # random-uuid would also give), made here to save a JVM start.
  local cluster_id=-
  while [ "${cluster_id:0:1}" = - ]; do
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
  done
  run_tool kafka.tools.StorageTool format -t "$cluster_id" -c "$conf/server.properties" >>"$logs/tool.log" 2>&1 \
    || { tail -n 20 "$logs/tool.log" >&2; die "StorageTool format failed"; }

  [ -f "$logs/server.log" ] && mv -f "$logs/server.log" "$logs/server.log.1"
  log "starting Kafka $(kafka_version) on $host:$port (controller $host:$cport), logs in $logs"
  # setsid + nohup: the broker outlives this script and its terminal; 9>&-: it must not hold our lock.
  setsid nohup "$(java_bin)" "${java_opts[@]}" \
    -Dkafka.logs.dir="$logs" -Dlog4j2.configurationFile="$conf/log4j2.properties" \
    -cp "$libs/*" kafka.Kafka "$conf/server.properties" \
    </dev/null >"$logs/stdout.log" 2>&1 9>&- &
  pid=$!
  echo "$pid" > "$pidfile"
  echo "$host:$port $host:$cport" > "$addrfile"

  local deadline=$((SECONDS + timeout))
  while :; do
    # kill -0, not broker_pid: until the exec the child's command line is still this script's.
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$logs/stdout.log" "$logs/server.log" >&2 2>/dev/null || true
      rm -f "$pidfile" "$addrfile"
      die "the broker exited during start-up"
    fi
    if grep -q 'Kafka Server started' "$logs/server.log" 2>/dev/null && port_busy "$port" && metadata_ok; then
      break
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 40 "$logs/server.log" >&2 2>/dev/null || true
      do_stop
      die "the broker did not become ready within ${timeout}s"
    fi
    sleep 0.25
  done
  log "ready (pid $pid)"
  echo "bootstrap.servers=$host:$port"
}

do_stop() {
  local pid
  if pid=$(broker_pid); then
    stop_process broker "$pid" 30  # a controlled shutdown takes a few seconds
  else
    log "not running"
  fi
  rm -f "$pidfile" "$addrfile"
  rm -rf "$data"
}

do_status() {
  local pid
  if pid=$(broker_pid); then
    log "running (pid $pid, Kafka $(kafka_version))"
    echo "bootstrap.servers=$(cut -d' ' -f1 "$addrfile")"
    return 0
  fi
  log "not running"
  return 3
}

cmd=${1:-}
case "$cmd" in
  start|stop|status) ;;
  *) echo "usage: $0 {start|stop|status}" >&2; exit 2 ;;
esac

mkdir -p "$base"
lock_for_change "$cmd" "$base"

case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
esac
