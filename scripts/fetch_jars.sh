#!/usr/bin/env bash
# Resolve the Spark runtime jars (Delta Lake + JDBC drivers, jars/pom.xml) with the machine's own Maven
# into .cache/jars, keeping only what pyspark does not already ship (Hadoop, Jackson, Parquet and Scala
# come with pyspark; a second copy on the classpath breaks Spark). Idempotent: a stamp file records the
# pom it was resolved from.
#
#   scripts/fetch_jars.sh       the runtime jars (every set-up: `make setup`)
#   scripts/fetch_jars.sh s3    the S3A connector and its AWS SDK (jars/s3/pom.xml, ~650 MB) into
#                               .cache/jars-s3, only on demand: `make s3-jars`, or the object-store tests
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-"$repo/.venv/bin/python"}
case "${1:-}" in
  "") out="$repo/.cache/jars"; pom="$repo/jars/pom.xml" ;;
  s3) out="$repo/.cache/jars-s3"; pom="$repo/jars/s3/pom.xml" ;;
  *) echo "usage: $0 [s3]" >&2; exit 2 ;;
esac
stamp="$out/.resolved-from"
# One fetch at a time per directory (two test workers may ask for the S3A jars at once): the others
# wait, then find the stamp.
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9

want=$(sha1sum "$pom" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "fetch_jars: Maven (mvn) is required to fetch the Delta jars" >&2; exit 1; }
pyspark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
echo "fetch_jars: resolving $(grep -c '<dependency>' "$pom") artifacts and their dependencies with mvn"
mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$staging" -DincludeScope=runtime

rm -rf "$out" && mkdir -p "$out"
for jar in "$staging"/*.jar; do
  artifact=$(basename "$jar" .jar | sed -E 's/-[0-9][0-9.]*(-[0-9]+)?$//')
  if ! compgen -G "$pyspark_jars/${artifact}-[0-9]*.jar" >/dev/null; then
    cp "$jar" "$out/"
  fi
done
echo "$want" > "$stamp"
echo "fetch_jars: $(ls "$out"/*.jar | wc -l) jars in $out"
