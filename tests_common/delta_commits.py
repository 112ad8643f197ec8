"""What a Delta commit did to a table's files, read from its commit file: for tests that check a write
rewrote only what it had to."""

from __future__ import annotations

import json


def touched(uri: str, version: int, partition: str = "region") -> tuple[set[str], int]:
    """The ``partition`` values of the data files the commit ``version`` added or removed (deletion
    vectors included: a file that gets one is removed and re-added), and how many such actions there were."""
    with open(f"{uri}/_delta_log/{version:020d}.json") as log:
        actions = [json.loads(line) for line in log]
    files = [a[kind] for a in actions for kind in ("add", "remove") if kind in a]
    return {f["partitionValues"][partition] for f in files}, len(files)
