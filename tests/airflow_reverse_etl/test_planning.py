"""Join priority planning: a wide-table spec renders as a TaskGroup whose edges are the priority order."""

from __future__ import annotations

import pendulum
import pytest

from airflow_reverse_etl.exceptions import ReverseEtlConfigError
from airflow_reverse_etl.planning import FULL_JOIN, LEFT_JOIN, PUBLISH, SNAPSHOT, plan, wide_table_group
from spark_jobs.contract.wide_table import parse

# Seed 001: six sources; nodes 1-3 and nodes 4-5 are two full-join groups on the wide key, node 6 is
# left-joined through a foreign key that nodes 1 and 4 provide; then the root is published.
SIX = {
    "name": "root",
    "primary_key": ["id"],
    "sources": [
        {"name": "n1", "group": "g1", "columns": ["city_id", "a1"]},
        {"name": "n2", "group": "g1", "columns": ["a2"]},
        {"name": "n3", "group": "g1", "columns": ["a3"]},
        {"name": "n4", "group": "g2", "columns": ["city_id", "a4"]},
        {"name": "n5", "group": "g2", "columns": ["a5"]},
        {"name": "n6", "join": "left", "on": {"city_id": "city_id"}, "columns": ["city_name"]},
    ],
}
SNAPSHOTS = {f"n{i}": {"source": {"format": "parquet", "path": f"/data/n{i}"}, "primary_key": "id"}
             for i in range(1, 6)} | {"n6": {"source": {"format": "parquet", "path": "/data/n6"},
                                            "primary_key": "city_id"}}
PUBLISH_SPEC = {"consumer": "crm", "destination": {"type": "sqlite", "database": "/tmp/x.db", "table": "root"}}


def _edges(dag) -> set[tuple[str, str]]:
    return {(up, task.task_id) for task in dag.tasks for up in task.upstream_task_ids}


def test_six_sources_render_the_priority_tree():
    from airflow.sdk import DAG

    with DAG("six", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        group = wide_table_group(SIX, snapshots=SNAPSHOTS, publish=PUBLISH_SPEC, warehouse="/tmp/wh")
    r = "root."
    expected = {
        (r + "snapshot_n1", r + "full_join_g1"), (r + "snapshot_n2", r + "full_join_g1"),
        (r + "snapshot_n3", r + "full_join_g1"),
        (r + "snapshot_n4", r + "full_join_g2"), (r + "snapshot_n5", r + "full_join_g2"),
        (r + "full_join_g1", r + "full_join_g2"),          # one writer of the wide table at a time
        (r + "full_join_g2", r + "left_join_n6"), (r + "snapshot_n6", r + "left_join_n6"),
        (r + "left_join_n6", r + "publish_diff"), (r + "publish_diff", r + "publish_sink"),
    }
    assert _edges(dag) == expected
    assert group.group_id == "root"
    merge = dag.get_task(r + "full_join_g2")
    assert merge.sources == ["n4", "n5"]
    assert set(merge.inputs) == {"n4", "n5"}  # exact versions from the snapshot tasks' XComs
    assert dag.get_task(r + "snapshot_n6").name == "n6"
    assert dag.get_task(r + "publish_diff").primary_key == ["id"]


def test_the_plan_of_six_sources():
    """Each task's priority class, the sources it merges and the tasks it waits for."""
    steps = plan(parse(SIX), snapshots=[f"n{i}" for i in range(1, 7)], publish=True)
    assert {s.task_id: (s.priority, s.sources, s.upstream) for s in steps} == {
        **{f"snapshot_n{i}": (SNAPSHOT, (f"n{i}",), ()) for i in range(1, 7)},
        "full_join_g1": (FULL_JOIN, ("n1", "n2", "n3"), ("snapshot_n1", "snapshot_n2", "snapshot_n3")),
        "full_join_g2": (FULL_JOIN, ("n4", "n5"), ("snapshot_n4", "snapshot_n5", "full_join_g1")),
        "left_join_n6": (LEFT_JOIN, ("n6",), ("snapshot_n6", "full_join_g2")),
        "publish_diff": (PUBLISH, (), ("left_join_n6",)),
    }


def test_left_joins_wait_for_every_full_join_whatever_the_spec_order():
    """A left-join source written first still merges after the full joins that provide its foreign
    key, and the full-join groups chain in the order the spec names them."""
    left_first = {**SIX, "sources": [SIX["sources"][5], *SIX["sources"][3:5], *SIX["sources"][:3]]}
    steps = plan(parse(left_first), snapshots=[], publish=True)
    assert [(s.task_id, s.upstream) for s in steps] == [
        ("full_join_g2", ()),
        ("full_join_g1", ("full_join_g2",)),
        ("left_join_n6", ("full_join_g1",)),
        ("publish_diff", ("left_join_n6",)),
    ]


def test_sources_without_snapshot_tasks_and_no_publication():
    steps = plan(parse(SIX), snapshots=["n6"], publish=False)
    assert [(s.task_id, s.upstream) for s in steps] == [
        ("snapshot_n6", ()),
        ("full_join_g1", ()),
        ("full_join_g2", ("full_join_g1",)),
        ("left_join_n6", ("snapshot_n6", "full_join_g2")),
    ]


def test_configuration_errors_surface_at_parse_time():
    from airflow.sdk import DAG

    bad = {**SIX, "sequence_groups": {"a1": ["id"]}}
    with DAG("bad", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        with pytest.raises(ReverseEtlConfigError, match="primary key column 'id' cannot be in sequence group 'a1'"):
            wide_table_group(bad, snapshots=SNAPSHOTS)
