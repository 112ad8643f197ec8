#!/usr/bin/env bash
# Run the whole test suite: first the static checks (ruff, then mypy on the two packages; seconds,
# so a typo fails before any service starts), then pytest. Starts the real services the tests need
# (Postgres, Kafka) with the project's own scripts and stops them afterwards. Extra arguments go to
# pytest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export SPARK_LOCAL_IP=127.0.0.1
export PATH="$repo/.venv/bin:$PATH"

echo "test: ruff"
ruff check .
echo "test: mypy"
mypy

started=()
cleanup() {
  for service in "${started[@]}"; do
    bash "scripts/services/$service.sh" stop >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT
for service in postgres kafka; do
  echo "test: starting $service"
  bash "scripts/services/$service.sh" start
  started+=("$service")
done
# The services stay up for the whole session; the fixtures find them running and leave them be.
python -m pytest "$@"
