"""Wide rows (issue 23 §3): a table of 2,000 columns — the width wide-table users reach — is
snapshotted, diffed and synced like a narrow one. The row hash over its values was a left-deep XOR
chain whose analysis overflowed the JVM's stack from 500 columns on, reported as a retryable
infrastructure error that no retry could fix."""

from __future__ import annotations

import sqlite3

import pytest

from tests_common.pipeline import Pipeline

WIDTH = 2000  # SQLite's default limit of columns per table, key included


def rows(width: int, version: int) -> list[tuple]:
    """Three keys; key 2 changes one value in each version, key 3 goes in version 1."""
    def row(key):
        return (key, *[f"{key}-{c}" + ("-v1" if version and key == 2 and c == width // 2 else "")
                       for c in range(1, width)])
    return [row(1), row(2)] + ([] if version else [row(3)])


@pytest.mark.fault("bad input", "a 2,000-column table through snapshot, diff and sync")
def test_a_2000_column_table(spark, warehouse, tmp_path):
    schema = "id INT, " + ", ".join(f"c{c} STRING" for c in range(1, WIDTH))
    p = Pipeline(spark, warehouse, tmp_path, schema=schema)
    database = tmp_path / "crm.db"
    destination = {"type": "sqlite", "database": str(database), "table": "wide"}
    first = p.step(rows(WIDTH, 0))
    assert first["counts"]["insert"] == 3
    p.sync(first, destination, mode="mirror")
    second = p.step(rows(WIDTH, 1))
    assert (second["counts"]["update"], second["counts"]["delete"]) == (1, 1)
    p.sync(second, destination, mode="mirror")
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT * FROM wide ORDER BY id").fetchall() == rows(WIDTH, 1)
