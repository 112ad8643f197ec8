"""A minimal third-party sink: every record becomes one JSON line appended to ``path``.

It knows nothing of batching, retries or the ledger — the shared core does that — and implements
only the protocol: ``write_batch`` returning one outcome per record. Records whose ``data`` has a
field named ``reject`` set to true are refused, so a test can see plugin rejects reach the ledger.
"""

import json

from spark_jobs.sinks.base import Rejected, Sink


class JsonLinesSink(Sink):
    name = "test-jsonl"
    max_parallelism = 1  # one writer per file

    def open(self):
        self.file = open(self.config.options["path"], "a", encoding="utf-8")

    def write_batch(self, records):
        outcomes = []
        for record in records:
            if record.data.get("reject"):
                outcomes.append(Rejected("test-jsonl: refused on request"))
                continue
            self.file.write(json.dumps({"op": record.op, "key": record.key, "data": record.data}, default=str) + "\n")
            outcomes.append(None)
        self.file.flush()
        return outcomes

    def close(self):
        self.file.close()
