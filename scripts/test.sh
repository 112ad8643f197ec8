#!/usr/bin/env bash
# Run the whole test suite: first the static checks (ruff, mypy on the two packages, the import rules, the
# docs built strictly; seconds, so a typo fails before any service starts), then pytest. Starts the real
# services the tests need (Postgres, Kafka) with the project's own scripts and stops them afterwards; a service that was
# already running is used and left running. The Spark Connect server is started by its pytest fixture
# on first use (test-sized settings; the first worker that needs it starts it, the others wait on the
# script's lock and reuse it) and stopped when the run ends; this script picks its port,
# so that it can stop that server even when pytest dies before its fixtures finalise. Extra arguments
# go to pytest.
#
# pytest runs on two xdist workers (ARETL_TEST_WORKERS overrides; never more than the cores): the
# tests spend much of their time waiting on JVM start-ups, servers and schedulers, so two workers
# overlap that waiting, and each gets its own in-process Spark session and Airflow home. Tests that
# share a server or a module fixture stay together (--dist loadgroup; tests_common/parallel.py).
# --durations=25 puts where the time goes into every CI log.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export SPARK_LOCAL_IP=127.0.0.1
export PATH="$repo/.venv/bin:$PATH"

echo "test: ruff"
ruff check .
echo "test: mypy"
mypy
echo "test: import rules (lint-imports)"
lint-imports
echo "test: docs (strict: warnings and broken references fail)"
bash scripts/docs.sh --strict
# The browser tests' headless Chromium (apt, root or sudo): only the tests need it, `make demo` never does.
bash scripts/install_chromium.sh

started=()  # the services this script is responsible for stopping
cleanup() {
  for service in "${started[@]}"; do
    bash "scripts/services/$service.sh" stop >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT
for service in postgres kafka; do
  if bash "scripts/services/$service.sh" status >/dev/null 2>&1; then
    echo "test: $service is already running (left running)"
    continue
  fi
  echo "test: starting $service"
  started+=("$service")
  bash "scripts/services/$service.sh" start
done
export ARETL_TEST_SPARK_CONNECT_PORT=${ARETL_TEST_SPARK_CONNECT_PORT:-$(python -c \
  'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
bash scripts/services/spark_connect.sh status >/dev/null 2>&1 || started+=(spark_connect)
# The services stay up for the whole session; the fixtures find them running and leave them be.
workers=${ARETL_TEST_WORKERS:-2}
cores=$(nproc)
[ "$workers" -le "$cores" ] || workers=$cores
python -m pytest -n "$workers" --dist loadgroup --durations=25 "$@"
