#!/usr/bin/env bash
# The screenshot of the Airflow UI's "Reverse ETL syncs" view for the docs (docs/operations/ui.md):
# runs the test that starts a real `airflow standalone`, writes three days of syncs (with rejects)
# into its warehouse and opens the view in headless Chromium, which leaves the PNG in
# .cache/test-output/. Takes a few minutes (Airflow and a Spark Connect server start).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export SPARK_LOCAL_IP=127.0.0.1
bash scripts/install_chromium.sh
test=test_the_view_in_airflow_shows_syncs_counts_and_rejects
.venv/bin/python -m pytest "tests/airflow_reverse_etl/ui/test_plugin.py::$test" -q -p no:cacheprovider "$@"
echo "ui-screenshot: $repo/.cache/test-output/$test/reverse-etl-view.png"
