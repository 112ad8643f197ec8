"""Live syncs: schedule a pipeline on a Delta source's commits instead of on the clock.

``schedule=[live_source(source_path, "orders")]`` is the whole set-up: an Airflow ``Asset`` watched
by a :class:`~airflow_reverse_etl.triggers.delta_commit.DeltaCommitTrigger`, which fires when the
source has commits the snapshot ``orders`` has not recorded yet. The pipeline's runs then have no
logical date; how they record their versions is :func:`airflow_reverse_etl.operators.base.logical_date_of`
(docs/guides/live-syncs.md says what that guarantees).

The Asset is named after the consuming snapshot (``reverse-etl-live/snapshots/orders``), not after the
source table: the source may be an Asset of its own (a snapshot table another DAG writes), and the
watcher's events mean something narrower — "this pipeline is behind its source".
"""

from __future__ import annotations

from airflow.sdk import Asset, AssetWatcher

from airflow_reverse_etl import config
from airflow_reverse_etl.triggers.delta_commit import DeltaCommitTrigger
from spark_jobs.contract import table_rel


def live_source(source: str, snapshot: str, *, warehouse: str | None = None, poll_interval: float = 5.0,
                refire_after: float = 900.0) -> Asset:
    """The Asset to schedule a pipeline on so that it runs when the Delta table ``source`` (a path or
    an object-store URI) has commits the snapshot ``snapshot`` has not recorded.

    :param poll_interval: seconds between two looks at the logs (one small delta-rs read of each
        table; no Spark). The main part of the latency when the pipeline is idle.
    :param refire_after: seconds after which a commit fired for and still not recorded (its run
        failed for good) is fired again.
    """
    rel = table_rel(snapshot)
    trigger = DeltaCommitTrigger(source=source, snapshot=snapshot, warehouse=config.warehouse_uri(warehouse),
                                 poll_interval=poll_interval, refire_after=refire_after)
    return Asset(name=f"reverse-etl-live/{rel}", watchers=[AssetWatcher(name=f"{rel}-source-commits", trigger=trigger)])
