"""Consumer commit state: per (table, consumer) the last version a sink delivered completely.

This is the heart of the commit protocol: a diff reads changes in (committed, V]; only a sink that
finished delivering V moves ``committed`` to V. A failed or killed sync leaves it where it was, so the
next run resends everything not yet acknowledged.

``_system/consumers`` is append-only (see :mod:`spark_jobs.state.system_tables`): each commit appends one
row per (table, consumer) with ``seq``, that pair's commit sequence (1, 2, ...), and a unique
``commit_id``; the committed version of a pair is the one in its row with the highest ``seq``. Rows
an older release wrote (one per pair, updated in place, no ``seq``) count as sequence 0. To see the
current state as a table::

    SELECT table, consumer, max_by(committed_version, coalesce(seq, 0)) AS committed_version
    FROM delta.`<warehouse>/_system/consumers` GROUP BY table, consumer

A sync's commit is compare-and-set (:func:`require_position` before delivery, :func:`commit_from`
after it): it commits V only if the pair's newest commit is still the one the sync started from. The
sync reads the table at its newest version, checks the pair there, and appends its row as exactly
the next version (:func:`spark_jobs.lake_io.commit_after`, Delta's own put-if-absent of
the commit file): no commit can land between the check and the commit. When another commit took
that version (another pair's, most often) the sync reads again: its pair unchanged, it tries again;
its pair moved, it fails with :class:`~spark_jobs.errors.StaleCommitError` and the committed version
never moves backwards. The rows are read and written from the driver with delta-rs
(:mod:`spark_jobs.state.system_tables`).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable

from spark_jobs.contract import Warehouse
from spark_jobs.contract.system_tables import CONSUMERS
from spark_jobs.lake_io import VersionTaken, append, commit_after
from spark_jobs.errors import AlreadyDeliveredError, ConcurrentWriteError, StaleCommitError
from spark_jobs.state import system_tables

if TYPE_CHECKING:
    import pyarrow as pa

    from spark_jobs.lake_io.tables import DeltaTable

#: Which (table, consumer) pairs a read is about.
Pairs = Callable[[str, str], bool]


@dataclass(frozen=True)
class Position:
    """A (table, consumer)'s newest commit: the version (None: never committed) and its sequence."""
    table: str
    consumer: str
    version: int | None = None
    seq: int = 0
    run_id: str | None = None
    committed_at: datetime | None = None
    commit_id: str | None = None

    def describe(self) -> str:
        if self.version is None:
            return "nothing committed"
        return f"version {self.version} committed by run {self.run_id!r} at {self.committed_at}"


def positions(wh: Warehouse, pairs: Pairs | None = None) -> dict[tuple[str, str], Position]:
    """(table, consumer) -> its newest commit, for the pairs ``pairs`` accepts (all: None)."""
    return _newest(system_tables.current(wh, CONSUMERS)[1], pairs)


def _newest(rows: pa.Table, pairs: Pairs | None) -> dict[tuple[str, str], Position]:
    """The newest commit of each pair among ``rows``: the highest sequence (rows of older releases
    have none: 0); for unconditional commits of one sequence, the later one."""
    found: dict[tuple[str, str], Position] = {}
    for r in rows.to_pylist():
        pair = (r["table"], r["consumer"])
        if pairs is not None and not pairs(*pair):
            continue
        candidate = Position(*pair, int(r["committed_version"]), int(r["seq"] or 0), r["run_id"], r["committed_at"],
                             r["commit_id"])
        known = found.get(pair)
        if known is None or _order(candidate) > _order(known):
            found[pair] = candidate
    return found


def _order(p: Position) -> tuple[int, datetime]:
    return p.seq, p.committed_at or datetime.min.replace(tzinfo=timezone.utc)


def _one(pair: tuple[str, str]) -> Pairs:
    return lambda table, consumer: (table, consumer) == pair


def position(wh: Warehouse, table_rel: str, consumer: str) -> Position:
    return positions(wh, _one((table_rel, consumer))).get((table_rel, consumer), Position(table_rel, consumer))


def committed_version(wh: Warehouse, table_rel: str, consumer: str) -> int | None:
    return position(wh, table_rel, consumer).version


def committed_versions(wh: Warehouse, consumer_prefix: str) -> dict[tuple[str, str], int]:
    """(table, consumer) -> committed version for every consumer whose name starts with the prefix:
    one read for a job that tracks several tables (a wide table's sources)."""
    found = positions(wh, lambda _table, consumer: consumer.startswith(consumer_prefix))
    return {pair: p.version for pair, p in found.items() if p.version is not None}


def commit(wh: Warehouse, table_rel: str, consumer: str, version: int, run_id: str | None) -> None:
    commit_all(wh, {(table_rel, consumer): version}, run_id)


def commit_all(wh: Warehouse, versions: dict[tuple[str, str], int], run_id: str | None) -> None:
    """Commit several (table, consumer) versions in one transaction (one append), unconditionally:
    for jobs that guard their own progress, such as widen (the wide table's commits record what they
    merged)."""
    if not versions:
        return
    current = positions(wh, lambda table, consumer: (table, consumer) in versions)
    next_seq = {pair: (current[pair].seq if pair in current else 0) + 1 for pair in versions}
    rows = _rows([(t, c, v, next_seq[(t, c)]) for (t, c), v in versions.items()], run_id)
    append(CONSUMERS.uri(wh), rows)


def require_position(wh: Warehouse, table_rel: str, consumer: str, from_version: int | None,
                     to_version: int) -> Position:
    """The pair's position, read now, provided a sync from ``from_version`` to ``to_version`` may
    commit over it; checked before delivery so that a stale sync fails before sending anything. The
    position returned is what the sync's commit compares against (:func:`commit_from`).

    A sync from version F commits only over F. A sync from nothing (the first one, or a full resync)
    commits over nothing or over any version up to its own target — never backwards. A sync whose
    target the pair has already committed (another run delivered it) raises
    :class:`~spark_jobs.errors.AlreadyDeliveredError`, a stale commit with nothing left to send."""
    current = position(wh, table_rel, consumer)
    if from_version is None:
        fits = current.version is None or current.version <= to_version
    else:
        fits = current.version == int(from_version)
    if not fits and current.version == to_version:
        raise AlreadyDeliveredError(f"Consumer {consumer!r} of {table_rel} already has {current.describe()}: "
                                    "the version this sync would deliver. Nothing was sent.")
    if not fits:
        raise StaleCommitError(_stale_message(current, from_version, to_version, delivered=False))
    return current


#: How often a sync's commit reads again after other pairs' commits took the version it meant to take.
CAS_ATTEMPTS = 30


def commit_from(wh: Warehouse, expected: Position, version: int, run_id: str | None) -> None:
    """Commit ``version`` for the pair only if its newest commit is still ``expected``
    (compare-and-set), else raise :class:`StaleCommitError`."""
    pair = (expected.table, expected.consumer)
    uri = CONSUMERS.uri(wh)
    row = _rows([(*pair, version, expected.seq + 1)], run_id)
    own_id = row["commit_id"][0].as_py()
    for attempt in range(CAS_ATTEMPTS):
        table, rows = system_tables.current(wh, CONSUMERS)
        now = _newest(rows, _one(pair)).get(pair, Position(*pair))
        if now.commit_id == own_id:
            return  # an earlier attempt landed, though writing it reported an error (after its commit)
        if (now.seq, now.commit_id) != (expected.seq, expected.commit_id):
            raise StaleCommitError(_stale_message(now, expected.version, version, delivered=True))
        try:
            return _commit_on_top(uri, row, table)
        except VersionTaken:
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # another commit landed first: read again
    raise ConcurrentWriteError(f"{uri} kept changing: {CAS_ATTEMPTS} commits of other consumers landed while "
                               f"this sync tried to commit version {version} of {expected.table} for "
                               f"{expected.consumer!r}. Its changes were sent; run the sync again.")


def _commit_on_top(uri: str, row: pa.Table, table: DeltaTable | None) -> None:
    commit_after(uri, row, table, user_metadata=json.dumps({"commit_id": row["commit_id"][0].as_py()}))


def _rows(rows: list[tuple[str, str, int, int]], run_id: str | None) -> pa.Table:
    """The consumer rows of one commit (one ``commit_id``)."""
    commit_id = uuid.uuid4().hex
    now = datetime.now(timezone.utc)
    return system_tables.rows_of(CONSUMERS, [
        {"table": t, "consumer": c, "committed_version": int(v), "committed_at": now, "run_id": run_id,
         "seq": seq, "commit_id": commit_id} for t, c, v, seq in rows])


def _stale_message(current: Position, from_version: int | None, to_version: int, delivered: bool) -> str:
    start = "nothing committed" if from_version is None else f"version {from_version}"
    sent = ("It has already sent its changes; the destination converges with the next sync, which "
            f"starts from version {current.version}. " if delivered else "Nothing was sent. ")
    return (
        f"Consumer {current.consumer!r} of {current.table}: this sync of version {to_version} started from "
        f"{start}, but the consumer now has {current.describe()}. Committing would skip or undo that "
        f"commit, so this sync does not commit. {sent}If this is an old task re-run after newer ones, "
        "there is nothing to do: the newer runs delivered the changes. Otherwise run the diff again, so "
        "the sync starts from the committed version."
    )
