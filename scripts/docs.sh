#!/usr/bin/env bash
# Build the documentation site (docs/, Sphinx + MyST + furo) into .cache/docs/html. `make docs` runs it;
# `make test` runs it with --strict among its static checks: warnings are errors (-W --keep-going, so one
# run lists them all) and nitpicky (-n), so a broken page link, a missing include or an autodoc reference
# to something that does not exist fails the build. Offline and a few seconds: no intersphinx (docs/conf.py).
# Airflow is imported by autodoc, so it gets a throw-away AIRFLOW_HOME instead of writing ~/airflow.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-$repo/.venv/bin/python}
strict=()
if [ "${1:-}" = "--strict" ]; then
  strict=(-W --keep-going -n)
fi
out="$repo/.cache/docs"
mkdir -p "$out/airflow_home"
# -E: read every page again, so a strict build reports every warning, not only those of changed pages
AIRFLOW_HOME="$out/airflow_home" AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__LOGGING__LOGGING_LEVEL=WARNING \
  "$python" -m sphinx -b html -E -q "${strict[@]}" -d "$out/doctrees" docs "$out/html"
echo "docs: $out/html/index.html"
