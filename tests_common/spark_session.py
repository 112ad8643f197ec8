"""The in-process Spark fixtures: one local SparkSession with Delta for the whole run, a fresh
warehouse directory per test."""

from __future__ import annotations

import pytest

from tests_common.paths import JARS_DIR
from tests_common.spark_conf import LONG_LIVED_JVM_CONF, TEST_SPARK_CONF


@pytest.fixture(scope="session")
def spark():
    """One local[2] session for all in-process tests: Spark start-up costs seconds, not milliseconds."""
    from spark_jobs.session import build_session

    session = build_session(
        "aretl-tests",
        master="local[2]",
        jars_dir=str(JARS_DIR),
        conf={
            **TEST_SPARK_CONF,
            **LONG_LIVED_JVM_CONF,
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "2g",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path) -> str:
    path = tmp_path / "warehouse"
    path.mkdir()
    return str(path)
