"""Named points in the jobs where a test can make the job process die, to prove that a plain re-run
converges from every one of them (issue 15 §2).

Inert unless the environment variable ``ARETL_CRASH_AT`` names the point reached: then the process
sends itself SIGKILL there — no clean-up, no ``finally``, exactly as when the OS or a resource
manager kills a task. Nothing is read but that variable, and nothing is written. The points sit
between the commits of a job (each Delta commit is atomic, so a kill *during* one leaves the state
of the point before or after it):

``snapshot.merged``       the snapshot MERGE committed; the job's result and lineage not yet written
``sink.delivered``        every record delivered; reject ledger, consumer commit, run history not yet
``sink.ledger_settled``   reject ledger written; consumer commit not yet
``widen.merged``          wide-table fold committed; merged versions not yet in ``_system/consumers``
``widen.index_updated``   reverse index updated; the left join's rows not yet merged
"""

from __future__ import annotations

import os
import signal

ENV = "ARETL_CRASH_AT"


def reached(point: str) -> None:
    """Die here (SIGKILL) if the environment arms this point."""
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
