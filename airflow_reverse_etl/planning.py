"""Join priority as DAG dependencies: a wide-table spec becomes an Airflow TaskGroup.

Seed 001's "a priority queue drives the building of a tree": every task of a wide table goes into a
priority queue — 1 the snapshots of the sources (the leaves), 2 one full-join merge per group of sources
sharing the wide key, 3 one left-join merge per foreign-key source, 4 the publication (diff + sink) —
and tasks are taken out highest priority first. A task is created only after its inputs, and its
dependencies are:

* a merge depends on the snapshot tasks of its sources (it reads exactly the versions they wrote);
* the merges form a chain in queue order: all of them write the one wide Delta table, so one writer at
  a time means no optimistic-concurrency conflicts, each merge's output is the exact wide version the
  next one (and the publication) builds on, and left joins see every full join's foreign keys (and,
  taken in join order, those of the left joins they join through: orders -> customers -> cities);
* the publication depends on the last merge and diffs exactly the version it wrote.

So the rendered DAG *is* the priority order: no task can run before its inputs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_jobs.contract.layout import snapshot_name
from spark_jobs.contract.wide_table import WideTable, parse

if TYPE_CHECKING:
    from airflow.sdk import TaskGroup

    from airflow_reverse_etl.operators.base import ReverseEtlJobOperator

SNAPSHOT, FULL_JOIN, LEFT_JOIN, PUBLISH = 1, 2, 3, 4
MERGES = (FULL_JOIN, LEFT_JOIN)


@dataclass(frozen=True)
class PlannedTask:
    task_id: str
    priority: int
    sources: tuple[str, ...] = ()
    upstream: tuple[str, ...] = field(default=())


def plan(t: WideTable, snapshots: list[str], publish: bool) -> list[PlannedTask]:
    """The tasks of wide table ``t`` in the order the priority queue yields them, with dependencies.

    ``snapshots`` names the sources that get a snapshot task (the others are read at their latest
    version); ``publish`` adds the publication step.
    """
    return _taken_in_order(_queued(t, snapshots, publish))


Queue = list[tuple[int, int, PlannedTask]]


def _queued(t: WideTable, snapshots: list[str], publish: bool) -> Queue:
    """Every task of the wide table in a priority queue, each knowing the snapshot tasks it reads."""
    queue: Queue = []

    def push(task: PlannedTask) -> None:
        heapq.heappush(queue, (task.priority, len(queue), task))

    def leaves(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(f"snapshot_{n}" for n in names if n in snapshots)

    for s in t.sources:
        if s.name in snapshots:
            push(PlannedTask(f"snapshot_{s.name}", SNAPSHOT, (s.name,)))
    for group, members in t.groups.items():
        names = tuple(s.name for s in members)
        push(PlannedTask(f"full_join_{group}", FULL_JOIN, names, leaves(names)))
    for s in t.left_sources:
        push(PlannedTask(f"left_join_{s.name}", LEFT_JOIN, (s.name,), leaves((s.name,))))
    if publish:
        push(PlannedTask("publish_diff", PUBLISH))
    return queue


def _taken_in_order(queue: Queue) -> list[PlannedTask]:
    """The queue's tasks highest priority first; each merge and the publication also depend on the
    merge before them (one writer of the wide table at a time)."""
    planned: list[PlannedTask] = []
    created: set[str] = set()
    last_merge: str | None = None
    while queue:
        _, _, task = heapq.heappop(queue)
        upstream = task.upstream
        if task.priority != SNAPSHOT and last_merge:
            upstream = (*upstream, last_merge)
        missing = [u for u in upstream if u not in created]
        assert not missing, f"{task.task_id} planned before its inputs {missing}"  # the queue's invariant
        planned.append(PlannedTask(task.task_id, task.priority, task.sources, upstream))
        created.add(task.task_id)
        if task.priority in MERGES:
            last_merge = task.task_id
    return planned


def wide_table_group(wide_table: dict[str, Any], *, snapshots: dict[str, dict[str, Any]] | None = None,
                     publish: dict[str, Any] | None = None, group_id: str | None = None,
                     **operator_kwargs: Any) -> TaskGroup:
    """Build the TaskGroup of a wide table inside the current DAG and return it.

    :param wide_table: the wide-table spec (:mod:`spark_jobs.contract.wide_table`), validated now.
    :param snapshots: ``{source name: SnapshotOperator kwargs}`` (``source``, ``primary_key``, ...) for
        the sources to snapshot in this DAG; the snapshot ``name`` comes from the source's table.
    :param publish: ``{"consumer": ..., "columns": ..., **SinkOperator kwargs}``: diff the wide table
        for ``consumer`` and sink the change set (task ids ``publish_diff`` and ``publish_sink``).
    :param group_id: the TaskGroup id (default: the wide table's name).
    :param operator_kwargs: passed to every operator (``warehouse``, ``spark_conn_id``, ...).
    """
    from airflow.sdk import TaskGroup

    from airflow_reverse_etl.exceptions import ReverseEtlConfigError, spec_validation
    from airflow_reverse_etl.operators.diff import DiffOperator
    from airflow_reverse_etl.operators.sink import SinkOperator
    from airflow_reverse_etl.operators.snapshot import SnapshotOperator
    from airflow_reverse_etl.operators.widen import WidenTableOperator

    with spec_validation():
        t = parse(wide_table)
    snapshots = dict(snapshots or {})
    snapshot_names: dict[str, str] = {}  # source -> the snapshot its task writes
    for name in snapshots:
        with spec_validation():
            table = t.source(name).table
        written = snapshot_name(table)
        if written is None:
            raise ReverseEtlConfigError(f"Source {name} reads {table}, which no snapshot task writes")
        snapshot_names[name] = written
    publish = dict(publish) if publish else None
    tasks: dict[str, Any] = {}
    task: ReverseEtlJobOperator
    with TaskGroup(group_id=group_id or t.name) as group:
        for step in plan(t, list(snapshots), publish is not None):
            if step.priority == SNAPSHOT:
                (name,) = step.sources
                task = SnapshotOperator(task_id=step.task_id, name=snapshot_names[name],
                                        **{**operator_kwargs, **snapshots[name]})
            elif step.priority in MERGES:
                inputs = {n: tasks[f"snapshot_{n}"].output for n in step.sources if n in snapshots}
                task = WidenTableOperator(task_id=step.task_id, wide_table=wide_table, sources=list(step.sources),
                                          inputs=inputs, **operator_kwargs)
            else:
                sink_kwargs = dict(publish or {})
                consumer, columns = sink_kwargs.pop("consumer"), sink_kwargs.pop("columns", None)
                (last_merge,) = step.upstream
                task = DiffOperator(task_id=step.task_id, snapshot=tasks[last_merge].output, consumer=consumer,
                                    columns=columns, primary_key=t.primary_key, **operator_kwargs)
                tasks["publish_sink"] = SinkOperator(task_id="publish_sink", changes=task.output,
                                                     **{**operator_kwargs, **sink_kwargs})
                task >> tasks["publish_sink"]
            for upstream in step.upstream:
                tasks[upstream] >> task
            tasks[step.task_id] = task
    return group
