"""Test-sized client settings for the spark-submit processes the tests start.

Each spark-submit job is a cold JVM that lives for a few seconds of tiny jobs: it takes the
short-lived JVM settings and the test-sized Spark settings of :mod:`tests_common.spark_conf`. They go
where a machine that submits jobs keeps its client configuration, ``spark-defaults.conf`` in
``SPARK_CONF_DIR``, which the hook hands to spark-submit with the rest of the environment: the hook's
own ``--conf`` settings and the job code are those of a production run.

Registered for every test module in tests/conftest.py (``pytest_plugins``), not imported, except
:data:`SUBMIT_DEFAULTS`, which the standalone cluster's client configuration includes too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests_common.spark_conf import SHORT_LIVED_JVM_CONF, TEST_SPARK_CONF

#: spark-defaults.conf entries for every spark-submit a test starts (executors: the cluster's)
SUBMIT_DEFAULTS = {
    **SHORT_LIVED_JVM_CONF,
    **TEST_SPARK_CONF,  # tiny tables on a 2-core machine, as in the in-process session and the Connect server
}


def write_spark_defaults(conf_dir: Path, settings: dict[str, str]) -> None:
    """``conf_dir/spark-defaults.conf`` holding ``settings`` (``key value`` per line)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in settings.items()))


@pytest.fixture(autouse=True)
def spark_submit_client_defaults(request, monkeypatch) -> None:
    """For a test marked ``spark_submit``: a ``SPARK_CONF_DIR`` with :data:`SUBMIT_DEFAULTS`. A fixture
    that needs its own client configuration (the cluster's ``cluster_client``) sets ``SPARK_CONF_DIR``
    after this one and includes these settings itself."""
    if request.node.get_closest_marker("spark_submit") is None:
        return
    conf_dir = request.getfixturevalue("tmp_path") / "spark-submit-conf"
    write_spark_defaults(conf_dir, SUBMIT_DEFAULTS)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
