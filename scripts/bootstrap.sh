#!/usr/bin/env bash
# Everything a fresh machine needs before the demo or the tests: a virtual environment with the
# package installed (editable, with the test and docs extras: `make test` also builds the docs) and the
# Spark runtime jars. Idempotent and quick when already done. Nothing here needs root: the headless
# Chromium of the browser tests is installed by `make test` (scripts/test.sh), not by the set-up the
# demo shares.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv="$repo/.venv"
python_bin=${PYTHON_BIN:-python3}

if [ ! -x "$venv/bin/python" ]; then
  echo "bootstrap: creating $venv"
  "$python_bin" -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
fi
# Install with the published constraints (constraints/constraints-<python>.txt), as users are told
# to, so the tests run against exactly those versions.
py_version=$("$venv/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
constraints="$repo/constraints/constraints-$py_version.txt"
constraint_args=(-c "$constraints")
if [ ! -f "$constraints" ]; then
  echo "bootstrap: WARNING: no constraints for Python $py_version (tested: constraints/); installing unconstrained" >&2
  constraints=/dev/null
  constraint_args=()
fi
stamp="$venv/.installed-from"
want=$(cat "$repo/setup.cfg" "$repo/pyproject.toml" "$constraints" | sha1sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing airflow-reverse-etl and its dependencies (first run takes a few minutes)"
  "$venv/bin/pip" install -q -e "$repo[test,docs]" "${constraint_args[@]}"
  echo "$want" > "$stamp"
fi
# The editable install leaves setuptools' airflow_reverse_etl.egg-info in the repository root. With
# the root on sys.path (the tests' PYTHONPATH, `python -c` run from here) Python then finds the
# package's entry points twice, and the task SDK's plugin loader stops at the first repeated plugin
# name (Airflow 3.3): the OpenLineage listener was never registered and tasks emitted no events.
# The installed metadata is the .dist-info in the venv; the build leftover is not needed.
rm -rf "$repo"/*.egg-info
PYTHON="$venv/bin/python" "$repo/scripts/fetch_jars.sh"
