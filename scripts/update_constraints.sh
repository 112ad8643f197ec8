#!/usr/bin/env bash
# Regenerate constraints/constraints-<python>.txt from the working virtual environment, the way
# Airflow publishes its own constraints: every package pinned to the version the test suite ran
# against. Run after changing dependencies and a green test run; commit the file.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
version=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
target="$repo/constraints/constraints-$version.txt"
{
  echo "# Constraints for airflow-reverse-etl on Python $version: the versions its test suite passed with."
  echo "# pip install airflow-reverse-etl -c constraints/constraints-$version.txt   (regenerate: scripts/update_constraints.sh)"
  # the project itself (editable) and the test-only sink plugin are not constraints
  "$python" -m pip freeze --exclude-editable | grep -v -i -e '^airflow-reverse-etl==' -e '^aretl-test-sink' -e ' @ '
} > "$target"
echo "wrote $target ($(grep -vc '^#' "$target") packages)"
