"""What the commit protocol needs from an object store, checked once per warehouse before a job runs.

A Delta commit creates the table's next ``_delta_log/<version>.json`` only if no other writer created
it first; the loser sees the version taken and retries or fails (design §3, §6: a consumer commit is a
compare-and-set on the version its sync started from). On a local or HDFS file system that create is
atomic. On S3 it is a *conditional write*: ``PutObject`` with ``If-None-Match: *``, refused with
``412 Precondition Failed`` when the key exists (AWS S3 since August 2024; MinIO, Ceph RGW and moto
honour it too). delta-rs, which commits the system tables (consumer positions, run history, lineage)
and empty change sets from the job's driver (:mod:`spark_jobs.lake_io`), commits exactly
that way on S3 (measured: every commit file is a PUT with ``If-None-Match: *``). A store that ignores
the header would let two writers both "create" one version, the second silently replacing the first:
a lost consumer commit or run record, with nothing failing.

So the first job on an ``s3://``/``s3a://`` warehouse asks the store: it creates a probe object twice
with ``If-None-Match: *`` and requires the second create to be refused. A store that accepts it fails
the job with a :class:`~spark_jobs.errors.ConfigError` naming the warehouse, before anything is
written. The answer is kept in ``_system/storage/conditional-writes.json`` (and in the process), so
later jobs pay one read, not the probe.

Spark's own commits to one table (snapshots, wide tables, change sets) go through delta-spark's
``S3SingleDriverLogStore``, which serialises the commits *of one driver JVM* (a lock in that JVM, then
an existence check and a plain PUT): safe for the Spark Connect server (one driver for every job) and
for the product's date-ordered writers (one job per table at a time, design §6); concurrent Spark
writers to one table from several drivers need Delta's DynamoDB log store
(docs/guides/clusters-and-object-stores.md, "What the protocol needs from S3").
"""

from __future__ import annotations

import json
import posixpath
import threading
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from spark_jobs.contract.layout import Warehouse
from spark_jobs.errors import ConfigError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

#: The probe's name: its answer is kept in the warehouse (:meth:`Warehouse.storage_probe`).
PROBE = "conditional-writes"
#: Warehouse schemes that are S3: the ones whose commits rely on conditional writes.
S3_SCHEMES = ("s3://", "s3a://")

_checked: set[str] = set()
_lock = threading.Lock()


def require_conditional_writes(warehouse: str | None) -> None:
    """Fail with a :class:`ConfigError` when ``warehouse`` is on an object store that does not refuse
    a second create of one key (``If-None-Match: *``); checked once per warehouse (see the module)."""
    if not warehouse or not warehouse.startswith(S3_SCHEMES):
        return
    root = warehouse.rstrip("/")
    with _lock:
        if root in _checked:
            return
        import fsspec

        fs, path = fsspec.core.url_to_fs(Warehouse(root).storage_probe(PROBE))
        if not fs.exists(path):
            _probe(fs, posixpath.dirname(path), root)
            fs.pipe_file(path, json.dumps({"conditional_writes": True,
                                           "checked_at": datetime.now(timezone.utc).isoformat()}).encode())
        _checked.add(root)


def _probe(fs: AbstractFileSystem, directory: str, warehouse: str) -> None:
    """Create one probe object twice with ``If-None-Match: *``; the second create must be refused."""
    probe = f"{directory}/probe-{uuid.uuid4().hex}"
    fs.pipe_file(probe, b"1", mode="create")
    try:
        fs.pipe_file(probe, b"2", mode="create")
    except FileExistsError:
        return
    finally:
        fs.rm_file(probe)
    raise ConfigError(
        f"The object store of the warehouse {warehouse} accepted a second create of one key: it ignores "
        "conditional writes (PutObject with If-None-Match: *). Delta commits rely on them on S3 (delta-rs "
        "commits the consumer positions and run history that way): two jobs committing at once could "
        "silently replace each other's commit. Use a store that honours If-None-Match (AWS S3, or a "
        "recent MinIO or Ceph RGW); see docs/guides/clusters-and-object-stores.md.")
