# The two commands of the README: `make demo` and `make test`. Both set themselves up first.
.PHONY: setup demo test docs clean
.PHONY: bench ui-screenshot s3-jars

setup:
	bash scripts/bootstrap.sh

demo: setup
	bash scripts/demo.sh

test: setup
	bash scripts/test.sh

# The documentation site (docs/) into .cache/docs/html; `make test` builds it strictly.
docs: setup
	bash scripts/docs.sh

clean:
	rm -rf .cache/demo .pytest_cache

# Benchmarks (not tests): `make bench ROWS=10000000` for the 10M figures. See bench/README.md.
ROWS ?= 1000000
bench: setup
	.venv/bin/pip install -q -e ".[test,bench]"
	.venv/bin/python -m bench.run --rows $(ROWS)

# The Airflow UI view of sync history and rejects, as a PNG under .cache/test-output/ (docs/operations/ui.md).
ui-screenshot: setup
	bash scripts/ui_screenshot.sh

# The S3A connector (hadoop-aws + the AWS SDK bundle, ~650 MB) into .cache/jars-s3, for a warehouse on
# s3a:// (docs/guides/clusters-and-object-stores.md); the object-store tests fetch it themselves.
s3-jars: setup
	bash scripts/fetch_jars.sh s3
