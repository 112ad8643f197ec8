"""How the suite splits over pytest-xdist workers (``scripts/test.sh`` runs ``-n 2 --dist loadgroup``).

With ``--dist loadgroup`` every test is a unit of work of its own, handed to whichever worker is free,
except the tests of one ``xdist_group``: they run on one worker, one after another. This plugin puts
into one group the tests that would otherwise pay for one thing twice, or fight over it:

- ``standalone``: the users of the run's ``airflow standalone`` (a session fixture, so each worker
  would start its own: a scheduler, a dag processor and an API server each);
- ``cluster``: the users of the Spark standalone cluster (one master and worker per machine, on
  fixed ports: two workers would share it and each stop it when done);
- the tests of a module that share a module- or class-scoped fixture (the UI's sync history, a moto
  server, a sink plugin build): spread over two workers, that fixture would be built twice.

The groups come from the fixtures a test uses, like the markers of :mod:`tests_common.markers`, so a
new test joins its group without a written marker. Everything else spreads freely: the in-process
Spark session is per worker, the Spark Connect server one per run (:mod:`tests_common.spark_connect`),
and every test names its own tables, topics, ports and directories.

The plugin adds ``xdist_group`` markers, and under ``--dist loadgroup`` writes each group into its
tests' node ids as xdist itself means to (``<nodeid>@<group>``, what the controller's scheduler reads):
pytest-xdist 3.8 sets ``item._nodeid``, which pytest 9.2 no longer reads (a node id now comes from
``item._id``), so without this every marker would be ignored and each worker would start its own
``airflow standalone``. Without xdist (or with another ``--dist``) it changes nothing.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from _pytest.nodeid import NodeId

from tests_common import standalone

#: session fixture -> the group of every test that uses it (first match wins)
SHARED_SERVERS = {**dict.fromkeys(standalone.FIXTURES, "standalone"), "spark_cluster": "cluster"}


def _group(item: pytest.Item) -> str | None:
    fixtures = getattr(item, "fixturenames", ())
    for fixture, group in SHARED_SERVERS.items():
        if fixture in fixtures:
            return group
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(fixturedefs[-1].scope in ("module", "class", "package") for fixturedefs in definitions.values()):
        return item.nodeid.split("::", 1)[0]  # the module
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    for item in items:  # before xdist's own hook, which reads the markers
        group = _group(item)
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
    yield  # the other plugins' hooks, xdist's among them
    if config.getoption("loadgroup", default=False):  # true on xdist workers under --dist loadgroup
        for item in items:
            marker = item.get_closest_marker("xdist_group")
            if marker is not None and "@" not in item.nodeid.rpartition("]")[2]:  # unless xdist wrote it
                item._id = NodeId.parse(f"{item.nodeid}@{marker.args[0]}")
