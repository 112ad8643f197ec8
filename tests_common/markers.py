"""Markers from the fixtures a test uses, so selecting by marker never misses a test.

A test that reaches Postgres through any fixture (directly or through another fixture) gets the
``postgres`` marker, and so on: ``-m "not postgres"`` deselects every test that needs the server,
whatever its module declares. The markers describe what a test *needs*; ``slow`` sums up the ones
that cost minutes (a JVM per job, or a cluster). ``spark_submit`` stays a written marker: running a
job through spark-submit is what the test's body does, not a fixture it asks for.

The markers are registered here (with ``--strict-markers`` a typo is an error), next to the fixtures
that imply them.

``long`` is written on a test that explores further than CI can afford — more dates, more cases, a
second route to a path another test already covers in CI. Such a test is skipped unless the run asks
for the long profile (``ARETL_TEST_PROFILE=long``, the same switch that gives the Hypothesis models
their long profile): CI keeps every path covered, the long profile explores.
"""

from __future__ import annotations

import os

import pytest

from tests_common import standalone

#: marker -> (description, fixtures that imply it)
FIXTURE_MARKERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "spark": ("uses the in-process local SparkSession (the `spark` fixture)", ("spark",)),
    "postgres": ("needs the real Postgres server started by scripts/services/postgres.sh", ("postgres_server",)),
    "kafka": ("needs the real Kafka broker started by scripts/services/kafka.sh", ("kafka_broker",)),
    "cluster": ("starts a real Spark standalone master + worker on 127.0.0.1", ("spark_cluster",)),
    "spark_connect": ("runs jobs on the Spark Connect server of scripts/services/spark_connect.sh",
                      ("spark_connect_server", "s3_connect_server")),
    "s3": ("talks to a real S3-compatible server on 127.0.0.1 (moto's server)",
           ("s3_endpoint", "s3_ignoring_conditional_writes")),
    "airflow_db": ("uses the Airflow metadata database (SQLite in a throw-away AIRFLOW_HOME)", ("airflow_db",)),
    "standalone": ("drives a real `airflow standalone` (scheduler, API server)", standalone.FIXTURES),
    "browser": ("drives a real headless Chromium", ("chromium",)),
}
WRITTEN_MARKERS = {
    "spark_submit": "runs jobs through a real spark-submit process (one JVM per job); written on the test",
    "long": "explores beyond CI (every path it covers is covered in CI too); run with ARETL_TEST_PROFILE=long",
}
#: The test profile: ``ci`` (the default) skips the ``long`` tests, ``long`` runs them.
PROFILE = os.environ.get("ARETL_TEST_PROFILE", "ci")
#: markers that make a test slow: it is marked ``slow`` too, so ``-m "not slow"`` is the quick suite
SLOW = ("spark_submit", "cluster", "standalone")


def pytest_configure(config: pytest.Config) -> None:
    for marker, (description, _) in FIXTURE_MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: {description} (added from the fixtures it uses)")
    for marker, description in WRITTEN_MARKERS.items():
        config.addinivalue_line("markers", f"{marker}: {description}")
    config.addinivalue_line("markers", f"slow: minutes, not seconds (added to every test marked {' or '.join(SLOW)})")


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection, which reads the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker, (_, implied_by) in FIXTURE_MARKERS.items():
            if fixtures.intersection(implied_by):
                item.add_marker(marker)
        if any(item.get_closest_marker(marker) for marker in SLOW):
            item.add_marker("slow")
        if PROFILE != "long" and item.get_closest_marker("long"):
            item.add_marker(pytest.mark.skip(reason="explores beyond CI: run with ARETL_TEST_PROFILE=long"))
