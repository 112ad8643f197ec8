"""A model that checks the engine (issue 33 §5): Hypothesis generates inputs nobody wrote, the real jobs
run on them, and plain-Python models of the documented semantics say what must come out.

* **snapshot → diff → sync.** A generated schema (key columns of the key types, composite or not; value
  columns; names with unicode, quotes and backquotes) and a generated history of source states —
  inserts, updates, deletes, re-inserts, empty tables, and states with a duplicate or null key, which the
  snapshot must refuse, changing nothing. After every state: the snapshot table, the diff's change set
  (one net change per key, in the Change Data Feed shape) and a SQLite destination synced in ``mirror``
  mode are compared with the model (design.md §3, §4.1).
* **the wide table's partial update** (design.md §4.2): a changelog source of ``+I``/``+U``/``-U``/``-D``
  events with two sequence groups, a plain field and a ``sum``, folded by the widen job in runs of
  several commits, compared with a per-key model of the documented rules after every run; the worked
  case of §4.2 is a fixed example.

Examples are cheap: tiny tables, the shared in-process session, and several independent examples per
Spark job — each **lane** of a snapshot example is its own history in its own key space (a leading
``lane`` key column), each **key** of a wide-table example its own event sequence — so the counts below
are of those independent histories, each compared with its own model after every step.
``ARETL_TEST_PROFILE=long`` runs the long search (docs/development/tests.md).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from spark_jobs.contract import change_set_fields
from spark_jobs.delta.expressions import quoted
from tests_common.jobs import job, job_error, rows_of
from tests_common.markers import PROFILE as TEST_PROFILE
from tests_common.key_values import TYPES, as_sqlite, utc_naive

#: Per profile: Hypothesis examples of each model, and the independent histories in each example.
#: The CI profile draws the same examples on every run (derandomized: the suite's verdict does not depend
#: on the draw); ``ARETL_TEST_PROFILE=long`` explores with fresh random draws.
PROFILES = {"ci": {"examples": 4, "lanes": 14, "keys": 16, "derandomize": True},
            "long": {"examples": 800, "lanes": 14, "keys": 16, "derandomize": False}}
PROFILE = PROFILES[TEST_PROFILE]
settings.register_profile("model", max_examples=PROFILE["examples"], deadline=None, database=None,
                          derandomize=PROFILE["derandomize"],
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                          print_blob=True)
MODEL = settings.get_profile("model")


# --- generated schemas, values and histories -----------------------------------------------------------

#: Characters of generated column names: letters of several scripts, quotes and other punctuation
#: Delta accepts in a name (it refuses `` ,;{}()\n\t=``; a dot, a backquote and the name ``*`` are
#: refused by the snapshot: spark_jobs.delta.columns).
NAME_ALPHABET = "abcXYZ_ßéñ漢字ы'\"-#$@!?+*&%~^|<>"
names = st.text(NAME_ALPHABET, min_size=1, max_size=5).filter(  # "*" is refused (spark_jobs.delta.columns)
    lambda n: n.lower() not in ("*", "lane", "_change_type", "_commit_version", "_commit_timestamp", "_op", "_change",
                                "_key", "_aretl_row_hash"))
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
#: value column types: (Arrow type, values, nulls included)
VALUE_TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "string": (pa.string(), TEXT | st.sampled_from(["", "o'neil", 'say "hi"', "a\\b", "🎉"])),
    "int": (pa.int32(), st.integers(-3, 3)),
    "decimal(10,2)": (pa.decimal128(10, 2), st.decimals(-100, 100, places=2)),
    "boolean": (pa.bool_(), st.booleans()),
    "date": (pa.date32(), st.dates(dt.date(1900, 1, 1), dt.date(2100, 1, 1))),
}


@st.composite
def schemas(draw) -> dict[str, Any]:
    """Key columns (one or two, of the key types) and value columns (none to three), distinct names
    as Spark compares them (without case)."""
    key_types = draw(st.lists(st.sampled_from(list(TYPES)), min_size=1, max_size=2))
    value_types = draw(st.lists(st.sampled_from(list(VALUE_TYPES)), max_size=3))
    columns = draw(st.lists(names, min_size=len(key_types) + len(value_types),
                            max_size=len(key_types) + len(value_types), unique_by=str.lower))
    return {"keys": list(zip(columns, key_types)), "values": list(zip(columns[len(key_types):], value_types))}


def key_values(schema: dict[str, Any]):
    return st.tuples(*(st.sampled_from(TYPES[kind][2]) for _, kind in schema["keys"]))


def row_values(schema: dict[str, Any]):
    return st.tuples(*(st.none() | VALUE_TYPES[kind][1] for _, kind in schema["values"]))


@st.composite
def lane_history(draw, schema: dict[str, Any], steps: int) -> list[dict[str, Any]]:
    """States of one lane, each ``{"rows": {key: values}, "bad": rows the snapshot must refuse or None}``:
    states drawn from a few keys (so keys come back, change and go), some empty, some with a duplicate
    or a null key on top of the good rows."""
    history = []
    for _ in range(steps):
        rows = draw(st.dictionaries(key_values(schema), row_values(schema), max_size=4))
        bad = None
        if draw(st.integers(0, 9)) == 0:
            if rows and draw(st.booleans()):
                key = draw(st.sampled_from(sorted(rows, key=repr)))
                bad = [(key, rows[key]), (key, draw(row_values(schema)))]  # a duplicate key
            else:
                key = list(draw(key_values(schema)))
                key[draw(st.integers(0, len(key) - 1))] = None  # a null key column
                bad = [(tuple(key), draw(row_values(schema)))]
        history.append({"rows": rows, "bad": bad})
    return history


@st.composite
def snapshot_examples(draw) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    schema = draw(schemas())
    steps = draw(st.integers(2, 3))
    lanes = [draw(lane_history(schema, steps)) for _ in range(PROFILE["lanes"])]
    return schema, lanes


# --- the snapshot model --------------------------------------------------------------------------------

def net_change(before: dict[tuple, tuple], after: dict[tuple, tuple]) -> Counter:
    """The change set the diff must write between two states of the table (design.md §4.1)."""
    changes: Counter = Counter()
    for key in after.keys() - before.keys():
        changes[(key, after[key], "insert")] += 1
    for key in before.keys() - after.keys():
        changes[(key, before[key], "delete")] += 1
    for key in before.keys() & after.keys():
        if before[key] != after[key]:
            changes[(key, before[key], "update_preimage")] += 1
            changes[(key, after[key], "update_postimage")] += 1
    return changes


class SnapshotRun:
    """One example's lake objects: a snapshot table, its source, a consumer and a SQLite table."""

    def __init__(self, spark, root, number: int, schema: dict[str, Any]):
        self.spark, self.schema = spark, schema
        self.warehouse = str(root / "warehouse")
        self.name = f"model_{number}"
        self.source = root / "sources" / self.name
        self.database = str(root / f"{self.name}.db")
        self.key = ["lane", *(name for name, _ in schema["keys"])]
        self.values = [name for name, _ in schema["values"]]
        self.day = 0

    def write(self, rows: list[tuple[tuple, tuple]]) -> None:
        """Rows (key with its lane first, values) as the source's one Parquet file."""
        kinds = [("lane", pa.int32()), *((n, TYPES[k][1]) for n, k in self.schema["keys"]),
                 *((n, VALUE_TYPES[k][0]) for n, k in self.schema["values"])]
        columns = list(zip(*(key + values for key, values in rows))) or [()] * len(kinds)
        self.source.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({n: pa.array(list(c), t) for (n, t), c in zip(kinds, columns)}),
                       self.source / "part-0.parquet")

    def snapshot(self, run=job) -> dict[str, Any]:
        self.day += 1
        return run(self.spark, "snapshot", self.warehouse, name=self.name, primary_key=self.key,
                   source={"format": "parquet", "path": str(self.source)},
                   logical_date=f"2026-01-01T00:{self.day // 60:02d}:{self.day % 60:02d}+00:00",
                   run_id=f"{self.name}-{self.day}")

    def table(self) -> Counter:
        frame = self.spark.read.format("delta").load(f"{self.warehouse}/snapshots/{self.name}")
        return Counter(rows_of(frame.select(*(quoted(c) for c in [*self.key, *self.values]))))

    def versions(self) -> int | None:
        """The table's newest version; None before its first."""
        from spark_jobs.delta.lake import table_history

        entries = table_history(f"{self.warehouse}/snapshots/{self.name}", 1)
        return None if entries is None else int(entries[0]["version"])

    def destination(self) -> Counter:
        quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in [*self.key, *self.values])
        with sqlite3.connect(self.database) as conn:
            try:
                return Counter(conn.execute(f"SELECT {quoted} FROM t").fetchall())
            except sqlite3.OperationalError as exc:  # nothing synced yet: no table
                assert "no such table" in str(exc)
                return Counter()

    def diff_and_sync(self) -> Counter:
        """The change set (key, values, change type) the diff wrote; then it is synced."""
        changes = job(self.spark, "diff", self.warehouse, table=f"snapshots/{self.name}", consumer="crm")
        frame = self.spark.read.format("delta").load(changes["changes_uri"])
        written = Counter((tuple(r[:len(self.key)]), tuple(r[len(self.key):-1]), r[-1])
                          for r in rows_of(frame.select(*self.key, *self.values, "_change_type")))
        job(self.spark, "sync", self.warehouse, **change_set_fields(changes), mode="mirror", allow_mass_delete=True,
            destination={"type": "sqlite", "database": self.database, "table": "t"}, run_id=f"sync-{self.day}")
        return written


def spark_form(key: tuple, values: tuple) -> tuple:
    return tuple(utc_naive(x) for x in (*key, *values))


@pytest.fixture(scope="module")
def model_root(tmp_path_factory):
    return tmp_path_factory.mktemp("engine-model")


EXAMPLES = {"snapshot": 0, "wide": 0}


@pytest.mark.timeout(1800)
@MODEL
@given(snapshot_examples())
def test_snapshot_diff_and_sync_agree_with_the_model(spark, model_root, drawn):
    schema, lanes = drawn
    EXAMPLES["snapshot"] += 1
    run = SnapshotRun(spark, model_root, EXAMPLES["snapshot"], schema)
    note(f"schema {schema}")
    before: dict[tuple, tuple] = {}
    for step in range(len(lanes[0])):
        good = {(lane, *key): values for lane, history in enumerate(lanes) for key, values in
                history[step]["rows"].items()}
        bad = [((lane, *key), values) for lane, history in enumerate(lanes) for key, values in
               history[step]["bad"] or []]
        if bad:  # refused, naming the problem; nothing written, nothing sent
            run.write([*good.items(), *bad])
            version, held = run.versions(), run.destination()
            error = run.snapshot(job_error)
            assert error["type"] == "DataQualityError", error
            assert ("duplicate primary key" in error["message"]) or ("null primary key" in error["message"])
            assert run.versions() == version and run.destination() == held
        run.write(list(good.items()))
        run.snapshot()
        assert run.table() == Counter(spark_form(k, v) for k, v in good.items()), f"step {step}"
        assert run.diff_and_sync() == Counter(
            {(spark_form(k, ()), spark_form((), v), kind): n for (k, v, kind), n in net_change(before, good).items()})
        assert run.destination() == Counter(tuple(as_sqlite(x) for x in (*k, *v)) for k, v in good.items())
        before = good


# --- the wide table's partial update -------------------------------------------------------------------

GROUPS = {"g1": ("a", "b"), "g2": ("c", "d")}
FIELDS = ("a", "b", "g1", "c", "d", "g2", "p", "s")
#: The changelog's columns after its key, row kind and position: group fields, their sequence fields G, a
#: plain field and a summed one.
EVENT_TYPES = {"a": pa.int32(), "b": pa.int32(), "g1": pa.int32(), "c": pa.int32(), "d": pa.string(),
               "g2": pa.int32(), "p": pa.string(), "s": pa.int32()}
ADDS, RETRACTIONS = ("+I", "+U"), ("-U", "-D")


def fold(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """A key's row after its events in order (design.md §4.2; a changelog's retraction carries its
    own values, §6): a plain field takes a non-null value; a group's fields change only with a non-null
    incoming G >= the stored G (a stored null is the smallest), then including nulls, and a retraction
    nulls them; G keeps the newest; a retraction leaves plain fields alone and takes its amount off a
    ``sum``. A row exists once an event other than a retraction arrived."""
    row: dict[str, Any] = {"exists": False, **dict.fromkeys(FIELDS)}
    for kind, values in events:
        retract, before = kind in RETRACTIONS, dict(row)
        for group, fields in GROUPS.items():
            incoming, stored = values[group], before[group]
            newer = incoming is not None and (stored is None or incoming >= stored)
            for field in fields:
                if newer:
                    row[field] = None if retract else values[field]
            if newer:
                row[group] = incoming
        if not retract:
            row["p"] = values["p"] if values["p"] is not None else before["p"]
        amount, total = values["s"], before["s"]
        if amount is not None:
            row["s"] = (total or 0) - amount if retract else (amount if total is None else total + amount)
        row["exists"] = row["exists"] or not retract
    return row


small = st.none() | st.integers(0, 3)
event = st.tuples(st.sampled_from([*ADDS, *RETRACTIONS]),
                  st.fixed_dictionaries({"a": small, "b": small, "g1": small, "c": small,
                                         "d": st.none() | st.sampled_from(["x", "y'z", "ü\"", ""]), "g2": small,
                                         "p": st.none() | TEXT, "s": small}))
#: per key, its events in each widen run (two or three runs, some with no event for the key)
wide_examples = st.integers(2, 3).flatmap(lambda runs: st.lists(
    st.lists(st.lists(event, max_size=3), min_size=runs, max_size=runs), min_size=PROFILE["keys"],
    max_size=PROFILE["keys"]))

#: The worked case of design.md §4.2 as events of key 1: (k, a, b, g_1, c, d, g_2), three widen runs.
WORKED_ROWS = [(1, 1, 1, 1, 1, "1", 1), (1, 2, 2, 2, 2, "2", None), (1, 3, 3, 1, 3, "3", 3), (1, 3, 3, 3, 2, "2", None),
               (1, 4, 4, 4, 2, "2", None), (1, 5, 5, 3, 5, None, 4)]
WORKED = [[[("+I", {**dict(zip(("a", "b", "g1", "c", "d", "g2"), row[1:])), "p": None, "s": None})
            for row in WORKED_ROWS[start:end]] for start, end in ((0, 1), (1, 3), (3, 6))]]


def test_the_model_gives_the_worked_case():
    events = [e for run in WORKED[0] for e in run]
    assert {k: v for k, v in fold(events[:1]).items() if k in FIELDS[:6]} == dict(
        zip(("a", "b", "g1", "c", "d", "g2"), (1, 1, 1, 1, "1", 1)))
    assert [fold(events[:n])[f] for n in (2, 3) for f in ("a", "b", "g1", "c", "d", "g2")] == [
        2, 2, 2, 1, "1", 1,   # g_2 null: c, d untouched
        2, 2, 2, 3, "3", 3]   # g_1 older: a, b untouched
    last = fold(events)
    assert (last["a"], last["b"], last["c"], last["d"]) == (4, 4, 5, None)  # null overwrites inside a group


class WideRun:
    """One example's changelog table and wide table."""

    def __init__(self, spark, root, number: int):
        self.spark, self.warehouse = spark, str(root / "warehouse")
        self.changelog = f"changelog/events_{number}"
        self.spec = {"name": f"pu_{number}", "primary_key": ["k"], "sequence_groups": {g: list(f) for g, f in
                                                                                      GROUPS.items()},
                     "aggregations": {"s": "sum"},
                     "sources": [{"name": "events", "table": self.changelog, "columns": list(FIELDS),
                                  "row_kind_field": "op", "order_field": "pos"}]}
        self.position = self.runs = 0

    def append(self, events: list[tuple[int, str, dict[str, Any]]]) -> None:
        """One commit of the changelog: ``(key, row kind, values)`` in the order they happened."""
        from deltalake import write_deltalake

        columns: dict[str, list[Any]] = {"k": [], "op": [], "pos": [], **{f: [] for f in FIELDS}}
        for key, kind, values in events:
            self.position += 1
            for name, value in (("k", key), ("op", kind), ("pos", self.position), *values.items()):
                columns[name].append(value)
        types = {"k": pa.int32(), "op": pa.string(), "pos": pa.int64(), **EVENT_TYPES}
        write_deltalake(f"{self.warehouse}/{self.changelog}", pa.table({n: pa.array(v, types[n]) for n, v in
                                                                        columns.items()}),
                        mode="append", configuration={"delta.enableChangeDataFeed": "true"})

    def widen(self) -> list[tuple]:
        self.runs += 1
        job(self.spark, "widen", self.warehouse, wide=self.spec, run_id=f"{self.spec['name']}-{self.runs}",
            logical_date=f"2026-01-01T{self.runs:02d}:00:00+00:00")
        frame = self.spark.read.format("delta").load(f"{self.warehouse}/wide/{self.spec['name']}")
        return rows_of(frame.select("k", *FIELDS))


@pytest.mark.timeout(1800)
@MODEL
@example(drawn=WORKED)
@given(wide_examples)
def test_the_wide_tables_partial_update_agrees_with_the_model(spark, model_root, drawn):
    EXAMPLES["wide"] += 1
    run = WideRun(spark, model_root, EXAMPLES["wide"])
    happened: dict[int, list[tuple[str, dict[str, Any]]]] = {key: [] for key in range(len(drawn))}
    for number in range(len(drawn[0])):
        commit = [(key, kind, values) for key, runs in enumerate(drawn) for kind, values in runs[number]]
        if commit:
            run.append(commit)
        elif number == 0:
            run.append([(0, "+I", dict.fromkeys(FIELDS))])  # the table must exist before the first run
            happened[0].append(("+I", dict.fromkeys(FIELDS)))
        for key, kind, values in commit:
            happened[key].append((kind, values))
        expected = sorted(((key, *(row[f] for f in FIELDS)) for key, events in happened.items()
                           if (row := fold(events))["exists"]), key=repr)
        assert sorted(run.widen(), key=repr) == expected, f"run {number}"
        for events in happened.values():  # a key without a row keeps no state into the next run
            if not fold(events)["exists"]:
                events.clear()
