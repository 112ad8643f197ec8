"""The shared core's bookkeeping of one batch, without Spark: a destination that answers per record
(delivered, rejected for good, try again) gets the records it asked for again, and no others; a
record still asking after the policy's attempts is rejected; a batch failing as a whole and for good
is a DestinationUnreachableError; every record is counted once."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from spark_jobs.contract.destinations import DeliveryPolicy
from spark_jobs.errors import DestinationError, DestinationUnreachableError, RetryableError
from spark_jobs.sinks.base import ChangeRecord, Outcome, Rejected, Retry, Sink, SinkConfig
from spark_jobs.sinks.batch import ChangeBatch
from spark_jobs.sinks.core import Stats, send_batch

POLICY = DeliveryPolicy(max_attempts=3, backoff_initial=0, backoff_max=0)


class ScriptedSink(Sink):
    """Answers each record by its ``id`` from a script: a list of outcomes per record, one per attempt
    (the last one repeats); records the sink was sent are written down, attempt by attempt."""

    name = "scripted"

    def __init__(self, script: dict[str, list[Any]]):
        super().__init__(SinkConfig(destination={"type": "scripted"}, key_fields=["id"], fields=["id"],
                                    mode="upsert"))
        self.script = script
        self.sent: list[list[str]] = []

    def write_batch(self, records: Sequence[ChangeRecord]) -> list[Outcome]:
        ids = [r.id for r in records]
        self.sent.append(ids)
        attempt = len(self.sent) - 1
        answers = [self.script[i][min(attempt, len(self.script[i]) - 1)] for i in ids]
        if any(isinstance(a, Exception) for a in answers):
            raise next(a for a in answers if isinstance(a, Exception))
        return answers


def batch(*ids: str) -> ChangeBatch:
    records = [ChangeRecord("upsert", {"id": i}, {"id": i}, "insert", i) for i in ids]
    return ChangeBatch.of(records, ["id"], ["id"])


def test_each_record_is_delivered_rejected_or_sent_again_until_the_attempts_run_out():
    sink = ScriptedSink({"ok": [None], "bad": [Rejected("no")], "late": [Retry("busy"), None],
                         "stuck": [Retry("busy")]})
    stats = Stats()
    rejects = send_batch(sink, batch("ok", "bad", "late", "stuck"), POLICY, stats)
    assert sink.sent == [["ok", "bad", "late", "stuck"], ["late", "stuck"], ["stuck"]]
    assert [(r.key, r.reason, r.attempts) for r in rejects] == [
        ("bad", "no", 1), ("stuck", "still failing after 3 attempts: busy", 3)]
    assert (stats.sent, stats.inserted, stats.rejected, stats.retried, stats.batches) == (2, 2, 2, 3, 1)
    assert stats.outcomes == {"upsert.ok": 2, "upsert.rejected": 2}


def test_a_batch_failing_whole_for_good_is_an_unreachable_destination():
    sink = ScriptedSink({"a": [RetryableError("down")]})
    with pytest.raises(DestinationUnreachableError, match="still failing after 3 attempts: down"):
        send_batch(sink, batch("a"), POLICY, Stats())
    assert len(sink.sent) == 3


def test_an_outcome_that_is_no_outcome_fails_the_sync():
    with pytest.raises(DestinationError, match="returned 'yes', not None/Rejected/Retry"):
        send_batch(ScriptedSink({"a": ["yes"]}), batch("a"), POLICY, Stats())


def test_a_partitions_sinks_share_its_request_pacer_which_no_copy_of_the_config_carries():
    """The pacer is the sink side's (issue 45): every sink built from one config (a partition's sending
    threads) waits on the one pacer of its share, made on first use; a pickled config (what an executor
    task receives) starts without one, so each partition paces its own share."""
    import pickle
    import time

    config = SinkConfig(destination={"type": "scripted"}, key_fields=["id"], fields=["id"], mode="upsert",
                        delivery=DeliveryPolicy(requests_per_second=20))
    first, second = Sink(config), Sink(config)
    started = time.monotonic()
    for sink in (first, second, first, second):  # one bucket of one request: four requests take ~3/20 s
        with sink.request_slot():
            pass
    assert time.monotonic() - started >= 3 / 20 - 0.01
    assert pickle.loads(pickle.dumps(config))._pacer is None and config._pacer is not None
    unlimited = SinkConfig(destination={"type": "scripted"}, key_fields=["id"], fields=["id"], mode="upsert")
    with Sink(unlimited).request_slot():
        assert unlimited._pacer is None  # no limit: nothing to wait on, nothing made
