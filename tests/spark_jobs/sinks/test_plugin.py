"""A third-party sink, installed with pip as its own distribution, is usable by name: the entry point
group makes it known, executors import it, and the shared core gives it batching and the ledger."""

import json
import subprocess
import sys
from tests_common.paths import REPO

import pytest

from tests_common.pipeline import Pipeline

PLUGIN = REPO / "tests" / "plugins" / "aretl-test-sink"


@pytest.fixture(scope="module")
def installed_plugin():
    """pip-install the plugin into this interpreter's environment (no index, no build isolation:
    it needs only setuptools) and uninstall it afterwards."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "--no-index", str(PLUGIN)], check=True)
    try:
        yield
    finally:
        subprocess.run([*pip, "uninstall", "-y", "aretl-test-sink"], check=True)


def test_an_installed_plugin_is_used_by_name(spark, warehouse, tmp_path, installed_plugin):
    from spark_jobs.sinks import resolve_sink

    assert resolve_sink("test-jsonl").__module__ == "aretl_test_sink"
    out = tmp_path / "out.jsonl"
    p = Pipeline(spark, warehouse, tmp_path, schema="id INT, name STRING, reject BOOLEAN")
    result = p.sync(p.step([(1, "ann", False), (2, "bob", True), (3, "cid", False)]),
                    {"type": "test-jsonl", "path": str(out)}, delivery={"batch_size": 2, "driver_max_records": 0})
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["key"]["id"] for line in lines) == [1, 3]
    assert lines[0]["op"] == "upsert" and set(lines[0]["data"]) == {"id", "name", "reject"}
    assert result["stats"]["rejected"] == 1 and p.ledger()[0]["sink"] == "test-jsonl"


@pytest.mark.fault("bad input", "unknown sink type")
def test_an_unknown_sink_lists_the_installed_ones(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    error = p.sync_error(p.step([(1, "ann", "oslo")]), {"type": "no-such-sink"})
    assert error["type"] == "ConfigError" and "'no-such-sink'" in error["message"]
    assert all(name in error["message"] for name in ("postgres", "http", "kafka", "delta", "sqlite"))
    assert p.committed() is None
