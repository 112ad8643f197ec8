"""Every key type the contract allows (spark_jobs.contract.key_types.KEY_TYPES), single and composite, on
every path that matches keys (issue 33 §4): a BIGINT in a composite key failed every MERGE after the first,
and nothing checked the other types on the other paths.

Cheap by construction: the sources are written without Spark (pyarrow Parquet, delta-rs tables with a
Change Data Feed), every job runs in the shared in-process session, and one lake carries

* ``mixed``: one table whose composite key spans every key type, taken through three source states
  (inserts; updates, deletes, new keys; re-inserts) by the snapshot's full path, into every sink's upsert
  and delete (SQLite, Postgres, HTTP, Kafka, Delta; the last through a consumer that skipped a state, so
  its diff collapses two versions per key), back out of the Kafka topic through the upsert-kafka source
  (its full read, then its read-on, which skips a state too: two syncs' messages per key, a tombstone
  and its key's return among them), into a wide table (partial update keyed by the composite key, and a
  left join whose reverse index is keyed by a composite foreign key of every type), then SCD2 history and
  restore;
* ``mixed_cdf``: the same keys recorded through the Change Data Feed path;
* ``exact``: a composite key of the types whose values are exact as SQL literals, on both snapshot paths,
  whose MERGEs carry the typed key list (the bug of §1): two states, since a MERGE's key list is built
  the same way whatever its rows do to the keys (the third state is ``mixed``'s);
* one table per type with that column alone as its key, through the snapshot's MERGE (the diff and the
  sinks match a key of one column with the code that matches ``mixed``'s). CI runs three of them, one
  per form of the ON clause (the rest in the long profile): the key list of a literal type (a string,
  the literal with quoting), of a boolean (which Spark folds) and no list (a timestamp).

Each state is compared with the plain-Python state after every step, in every table and destination.
"""

from __future__ import annotations

import re

import sqlite3
import uuid
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pytest

from spark_jobs.contract import change_set_fields
from spark_jobs.contract.key_types import KEY_TYPES
from tests_common.jobs import job, job_error, rows_of
from tests_common.key_values import TYPES, as_json, as_postgres, as_sqlite, utc_naive
from tests_common.services import read_topic

MIXED = tuple(TYPES)
KEY = [TYPES[t][0] for t in MIXED]
#: The Change Data Feed source also carries the key as foreign-key columns, for the wide table's left join.
FK = {f"f{c[1:]}": (TYPES[t][1], itemgetter(i)) for i, (t, c) in enumerate(zip(MIXED, KEY))}
#: The key types whose values are exact as SQL literals: a MERGE lists their keys (spark_jobs.delta.key_pruning).
LITERAL = ("tinyint", "smallint", "int", "bigint", "decimal(20,4)", "string", "date", "boolean")


def test_the_matrix_covers_every_key_type_of_the_contract():
    assert {t.split("(")[0] for t in TYPES} == {t.split("(")[0] for t in KEY_TYPES}


# --- the source states, and the state as each destination holds it -------------------------------------

def composite_keys(types: tuple[str, ...]) -> list[tuple]:
    """A base key, then for each type the base key with that column alone at each other value: keys that
    differ in exactly one column, so matching on any one column wrongly shows."""
    base = tuple(TYPES[t][2][0] for t in types)
    keys = [base]
    for i, t in enumerate(types):
        keys += [base[:i] + (value,) + base[i + 1:] for value in TYPES[t][2][1:]]
    return keys


def states(keys: list[tuple], types: tuple[str, ...]) -> list[dict[tuple, tuple]]:
    """Three states, key -> (v, n): all keys; then a quarter deleted, a quarter updated and two new keys
    (one differing from the base in two columns); then the deleted keys back with other values, one new
    key deleted again and the other updated, and one key of the first state deleted (so a consumer that
    skips the second state still has a delete to send)."""
    first = {k: (f"a{i}", i) for i, k in enumerate(keys)}
    base = keys[0]
    new = [tuple(TYPES[t][2][1] if j in (0, 1) else base[j] for j, t in enumerate(types)),
           tuple(TYPES[t][2][-1] if j in (3, len(types) - 2) else base[j] for j, t in enumerate(types))]
    second = {k: (f"b{i}", i) if i % 4 == 2 else row for i, (k, row) in enumerate(first.items()) if i % 4 != 1}
    second.update({new[0]: ("new0", 100), new[1]: ("new1", 101)})
    third = {k: (f"c{i}", -i) if i % 4 == 3 else row for i, (k, row) in enumerate(second.items())}
    third.update({k: (f"back{i}", i) for i, k in enumerate(keys) if i % 4 == 1})
    del third[new[0]]
    del third[keys[4]]  # unchanged in the second state
    third[new[1]] = ("new1-changed", 102)
    return [first, second, third]


def arrow(state: dict[tuple, tuple], types: tuple[str, ...], extra: dict[str, tuple] | None = None) -> pa.Table:
    """The state as an Arrow table: the key columns, ``v``, ``n`` (and ``extra`` columns: name -> (type,
    function of the key))."""
    keys = list(state)
    columns = {TYPES[t][0]: pa.array([k[i] for k in keys], TYPES[t][1]) for i, t in enumerate(types)}
    columns["v"] = pa.array([state[k][0] for k in keys], pa.string())
    columns["n"] = pa.array([state[k][1] for k in keys], pa.int32())
    for name, (kind, of) in (extra or {}).items():
        columns[name] = pa.array([of(k) for k in keys], kind)
    return pa.table(columns)


def ddl(types: tuple[str, ...], extra: str = "") -> str:
    return ", ".join([*(f"`{TYPES[t][0]}` {t.upper()}" for t in types), "v STRING", "n INT"]) + extra


def spark_rows(state: dict[tuple, tuple]) -> list[tuple]:
    """The state as a table of it reads back (sorted rows: key columns, v, n)."""
    return sorted(tuple(utc_naive(x) for x in (*k, *row)) for k, row in state.items())


# --- the lake --------------------------------------------------------------------------------------------

class Lake:
    """The matrix's warehouse, its sources and destinations (one per module: every job of the matrix
    runs once)."""

    def __init__(self, spark, root, postgres_server, kafka_broker, http):
        self.spark, self.root = spark, root
        self.warehouse = str(root / "warehouse")
        self.pg, self.kafka, self.http = postgres_server, kafka_broker, http
        self.topic = f"matrix-{uuid.uuid4().hex[:8]}"
        self.pg_table = f"matrix_{uuid.uuid4().hex[:8]}"
        self.day = 0

    def date(self, day: int) -> str:
        return f"2026-03-{day + 1:02d}T00:00:00+00:00"

    def job(self, kind: str, **spec: Any) -> dict[str, Any]:
        """Run the job ``kind`` (its spec may name a table ``name``)."""
        return job(self.spark, kind, self.warehouse, **spec)

    def parquet(self, name: str, table: pa.Table) -> dict[str, Any]:
        import pyarrow.parquet as pq

        path = self.root / "sources" / name
        path.mkdir(parents=True, exist_ok=True)
        for old in path.glob("*.parquet"):
            old.unlink()
        pq.write_table(table, path / "part-0.parquet")
        return {"format": "parquet", "path": str(path)}

    def delta(self, name: str, table: pa.Table) -> dict[str, Any]:
        from deltalake import write_deltalake

        path = str(self.root / "sources" / name)
        write_deltalake(path, table, mode="overwrite", configuration={"delta.enableChangeDataFeed": "true"})
        return {"format": "delta", "path": path}

    def snapshot(self, name: str, source: dict[str, Any], key: list[str], day: int, **extra: Any) -> dict[str, Any]:
        return self.job("snapshot", name=name, source=source, primary_key=key, logical_date=self.date(day),
                        run_id=f"{name}-{day}", **extra)

    def table(self, rel: str) -> list[tuple]:
        return rows_of(self.spark.read.format("delta").load(f"{self.warehouse}/{rel}"))

    def sync(self, table: str, consumer: str, destination: dict[str, Any], run: str, **options: Any):
        changes = self.job("diff", table=f"snapshots/{table}", consumer=consumer)
        return self.job("sync", **change_set_fields(changes), destination=destination, mode="mirror",
                        run_id=f"sync-{consumer}-{run}", **options), changes


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory, postgres_server, kafka_broker):
    from tests_common.webhook_receiver import HttpDestination

    with HttpDestination(key_fields=tuple(KEY)) as http:
        yield Lake(spark, tmp_path_factory.mktemp("key-matrix"), postgres_server, kafka_broker, http)


# --- the composite key of every type, through every path ---------------------------------------------------


def destinations(lake: Lake) -> dict[str, dict[str, Any]]:
    pg = lake.pg
    return {
        "postgres": {"type": "postgres", "table": lake.pg_table, "secrets_env": {"password": "ARETL_MATRIX_PG"},
                     "connection": {"conn_type": "postgres", "host": pg.host, "port": pg.port, "login": pg.user,
                                    "schema": pg.dbname}},
        "http": {"type": "http", "url": lake.http.url},
        "kafka": {"type": "kafka", "topic": lake.topic, "bootstrap_servers": lake.kafka.bootstrap_servers,
                  "create_topic": {"partitions": 3}},
        "sqlite": {"type": "sqlite", "database": str(lake.root / "crm.db"), "table": "matrix"},
    }


def held(lake: Lake) -> dict[str, list[tuple]]:
    """What each destination holds, as sorted rows (key columns, v, n) in its own representation."""
    import psycopg2

    with sqlite3.connect(lake.root / "crm.db") as conn:
        sqlite_rows = sorted(conn.execute(f"SELECT {', '.join(KEY)}, v, n FROM matrix").fetchall())
    with psycopg2.connect(**lake.pg.connect_kwargs()) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(KEY)}, v, n FROM {lake.pg_table}")
        pg_rows = sorted(tuple(bytes(x) if isinstance(x, memoryview) else utc_naive(x) for x in row) for row in cur)
    http_rows = sorted(tuple(row[c] for c in [*KEY, "v", "n"]) for row in lake.http.rows())
    topic: dict[str, Any] = {}
    for message in sorted(read_topic(lake.kafka, lake.topic), key=lambda m: (m.partition, m.offset)):
        topic[message.key.decode()] = None if message.value is None else message.json()
    kafka_rows = sorted(tuple(row[c] for c in [*KEY, "v", "n"]) for row in topic.values() if row is not None)
    return {"sqlite": sqlite_rows, "postgres": pg_rows, "http": http_rows, "kafka": kafka_rows}


def expected(state: dict[tuple, tuple]) -> dict[str, list[tuple]]:
    def rows(convert) -> list[tuple]:
        return sorted(tuple(convert(x, t) for x, t in zip((*k, *row), [*MIXED, "string", "int"]))
                      for k, row in state.items())

    return {"sqlite": rows(as_sqlite), "postgres": rows(as_postgres), "http": rows(as_json), "kafka": rows(as_json)}


@pytest.mark.timeout(900)
def test_a_composite_key_of_every_type_on_every_path(lake, monkeypatch):
    monkeypatch.setenv("ARETL_MATRIX_PG", lake.pg.password)
    keys = composite_keys(MIXED)
    days = states(keys, MIXED)
    targets = destinations(lake)
    late = {"type": "delta", "path": str(lake.root / "published")}
    wide = {"name": "mixed_wide", "primary_key": KEY,
            "sources": [{"name": "mixed", "columns": ["v"], "remove_row_on_delete": True},
                        {"name": "mixed_cdf", "columns": ["n", *FK], "remove_row_on_delete": True},
                        {"name": "from_kafka", "join": "left", "on": dict(zip(FK, KEY)), "columns": {"kv": "v"}}]}
    for day, state in enumerate(days):
        lake.snapshot("mixed", lake.parquet("mixed", arrow(state, MIXED)), KEY, day)
        cdf = lake.snapshot("mixed_cdf", lake.delta("mixed_cdf", arrow(state, MIXED, FK)), KEY, day)
        assert cdf["read"] == ("full_extract" if day == 0 else "change_data_feed")
        assert lake.table("snapshots/mixed") == spark_rows(state)
        assert [r[:len(KEY) + 2] for r in lake.table("snapshots/mixed_cdf")] == spark_rows(state)

        # one change set, delivered to every sink; only the last sync commits it (a diff of the same
        # consumer and versions would write this change set again)
        changes = lake.job("diff", table="snapshots/mixed", consumer="crm")
        for name in ("postgres", "http", "kafka", "sqlite"):
            lake.job("sync", **change_set_fields(changes), destination=targets[name], mode="mirror",
                     run_id=f"sync-{name}-{day}", commit=name == "sqlite")
        got, want = held(lake), expected(state)
        assert got == want, f"day {day}: " + "; ".join(
            f"{d}: {sorted(set(got[d]) - set(want[d]))[:1]} != {sorted(set(want[d]) - set(got[d]))[:1]}"
            for d in want if got[d] != want[d])

        if day == 1:  # the Kafka source and the late consumer skip a state: two versions per key
            continue
        kafka_source = {"format": "kafka", "bootstrap_servers": lake.kafka.bootstrap_servers, "topic": lake.topic,
                        "value_schema": ddl(MIXED)}
        read = lake.snapshot("from_kafka", kafka_source, KEY, day)
        assert read["read"] == ("full_extract" if day == 0 else "kafka_offsets")
        assert lake.table("snapshots/from_kafka") == sorted(spark_rows(state))

        synced, changes = lake.sync("mixed", "late", late, str(day))
        if day == 2:
            net = {"insert": len(state.keys() - days[0].keys()), "delete": len(days[0].keys() - state.keys()),
                   "update": sum(state[k] != days[0][k] for k in state.keys() & days[0].keys())}
            assert changes["counts"] == net and net["delete"] == 1  # the collapsed diff has a delete to send
        assert rows_of(lake.spark.read.format("delta").load(late["path"]).select(*KEY, "v", "n")) == \
            spark_rows(state)
        lake.job("widen", wide=wide, run_id=f"widen-{day}", logical_date=lake.date(day))
        assert lake.table("wide/mixed_wide") == sorted(
            (*(utc_naive(x) for x in k), v, n, *(utc_naive(x) for x in k), v) for k, (v, n) in state.items())

    history = lake.job("history", table="snapshots/mixed", run_id="history")
    intervals = {k: sum(1 for i, day in enumerate(days) if k in day and (i == 0 or days[i - 1].get(k) != day[k]))
                 for day in days for k in day}
    assert history["rows"] == sum(intervals.values())
    current = lake.spark.read.format("delta").load(history["uri"]).where("is_current").select(*KEY, "v", "n")
    assert rows_of(current) == spark_rows(days[-1])

    lake.job("restore", table="snapshots/mixed", target_logical_date=lake.date(0), run_id="restore")
    assert lake.table("snapshots/mixed") == spark_rows(days[0])


# --- the literal types: the MERGE's typed key list, full path and Change Data Feed path ----------------------

def test_a_composite_key_of_the_literal_types_merges_with_its_typed_key_list(lake):
    key = [TYPES[t][0] for t in LITERAL]
    days = states(composite_keys(LITERAL), LITERAL)[:2]  # a first write, then a MERGE of every kind of change
    for day, state in enumerate(days):
        table = arrow(state, LITERAL)
        full = lake.snapshot("exact", lake.parquet("exact", table), key, day)
        fast = lake.snapshot("exact_cdf", lake.delta("exact_cdf", table), key, day)
        assert (full["read"], fast["read"]) == (("full_extract", "full_extract") if day == 0 else
                                                ("full_extract", "change_data_feed"))
        for name in ("exact", "exact_cdf"):
            assert lake.table(f"snapshots/{name}") == spark_rows(state), (name, day)
    for name in ("exact", "exact_cdf"):
        merges = lake.spark.sql(f"DESCRIBE HISTORY delta.`{lake.warehouse}/snapshots/{name}`").where(
            "operation = 'MERGE'").collect()
        # the key list, typed: Spark folds the literal tuples into struct constants, "named_struct(...) IN ([...])"
        predicates = [m["operationParameters"]["predicate"] for m in merges]
        assert len(merges) == 1 and all(re.search(r"named_struct\(k_tinyint, .*\) IN \(\[-?\d", p)
                                        for p in predicates), name


# --- each type alone as the key ----------------------------------------------------------------------------

#: The single keys CI runs, one per form of the ON clause: a literal type's key list (the string's
#: literals quote and escape), a boolean's (Spark folds a one-value list into the column itself), none.
SINGLE_IN_CI = ("string", "boolean", "timestamp")


@pytest.mark.parametrize("kind", [kind if kind in SINGLE_IN_CI else pytest.param(kind, marks=pytest.mark.long)
                                  for kind in TYPES])
def test_each_type_alone_is_a_key(lake, kind):
    """Its values but the last, then all but the first (one deleted, one inserted, the rest updated)
    through the snapshot's MERGE, whose ON clause lists the keys in the single-column form for a
    literal type (spark_jobs.delta.key_pruning) and lists none for the others.

    No diff or sync here: both build their key matching over the key's column list, the same code for
    one column as for several, so the composite test (every type, one key, into every sink's upsert and
    delete) is their test for each type alone too. The same holds for the MERGE's join and for each
    type's literal in the key list, so CI runs :data:`SINGLE_IN_CI` and the long profile every type: in
    CI test_a_composite_key_of_every_type_on_every_path joins on every type and
    test_a_composite_key_of_the_literal_types_merges_with_its_typed_key_list lists every literal type's
    values."""
    from deltalake import DeltaTable

    column, arrow_type, values = TYPES[kind]
    for day, kept in enumerate((values[:-1], values[1:])):
        source = lake.parquet(f"single-{column}", pa.table({column: pa.array(kept, arrow_type),
                                                            "v": [f"{day}-{i}" for i in range(len(kept))]}))
        lake.snapshot(f"single_{column}", source, [column], day)
        assert lake.table(f"snapshots/single_{column}") == sorted(
            (utc_naive(value), f"{day}-{i}") for i, value in enumerate(kept)), day
    history = DeltaTable(f"{lake.warehouse}/snapshots/single_{column}").history()
    predicates = [str(entry["operationParameters"]["predicate"]) for entry in history
                  if entry["operation"] == "MERGE"]
    # the join names the column twice (source = target); a key list names it again. Spark folds a list of
    # one value to an equality, and for a boolean to the column itself ("... AND k_boolean")
    listed = [len(re.findall(rf"\b{column}\b", p)) > 2 for p in predicates]
    assert listed == [kind in LITERAL], (kind, [entry["operation"] for entry in history], predicates)


# --- what is not a key type -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, values", [("double", [1.5, 2.5]), ("float", [1.5, 2.5]),
                                          ("array<int>", [[1], [2]])])
def test_a_type_that_is_not_a_key_type_is_refused_on_the_first_run_before_anything_is_written(lake, kind, values):
    arrow_type = {"double": pa.float64(), "float": pa.float32(), "array<int>": pa.list_(pa.int32())}[kind]
    source = lake.parquet(f"refused-{kind}", pa.table({"k": pa.array(values, arrow_type), "v": ["a", "b"]}))
    error = job_error(lake.spark, "snapshot", lake.warehouse, name=f"refused_{kind[:5]}", source=source,
                      primary_key=["k"], logical_date=lake.date(0), run_id="refused")
    assert error["type"] == "ConfigError" and f"key column(s) ['k'] have types a key cannot have (k is {kind}" \
        in error["message"], error
    assert not (lake.root / "warehouse" / "snapshots" / f"refused_{kind[:5]}").exists()
