"""Postgres sink against a real PostgreSQL server: the four modes, field mapping and constants,
schema mismatches named by column, per-record rejects isolated from a bulk batch, and a resend after
the sync was killed midway."""

from tests_common.pipeline import Pipeline, sync_killed_midway

ROWS = [(1, "ann", "oslo"), (2, "bob", "lima"), (3, "cid", "rome")]


def test_upsert_then_mirror_with_mapping_and_constants(spark, warehouse, tmp_path, pg):
    pg.execute(f"CREATE TABLE {pg.table} (id bigint PRIMARY KEY, full_name varchar(20), town text, "
               "origin text NOT NULL, loaded_at timestamptz DEFAULT now())")
    p = Pipeline(spark, warehouse, tmp_path)
    options = {"field_mapping": {"id": "id", "name": "full_name", "city": "town"}, "constants": {"origin": "lake"}}
    first = p.sync(p.step(ROWS), pg.destination(), **options)
    assert first["stats"]["inserted"] == 3 and first["committed"]
    assert pg.rows("id, full_name, town, origin") == [(1, "ann", "oslo", "lake"), (2, "bob", "lima", "lake"),
                                                      (3, "cid", "rome", "lake")]
    second = p.sync(p.step([(1, "ann", "nice"), (3, "cid", "rome"), (4, "dan", "kyiv")]), pg.destination(),
                    mode="mirror", **options)
    assert (second["stats"]["inserted"], second["stats"]["updated"], second["stats"]["deleted"]) == (1, 1, 1)
    assert pg.rows("id, full_name, town, origin") == [(1, "ann", "nice", "lake"), (3, "cid", "rome", "lake"),
                                                      (4, "dan", "kyiv", "lake")]
    # a resend of the same change set changes nothing and duplicates nothing
    p.sync(p.step([(1, "ann", "nice"), (3, "cid", "rome"), (4, "dan", "kyiv")]), pg.destination(), mode="mirror",
           **options)
    assert pg.execute(f"SELECT count(*) FROM {pg.table}") == [(3,)]


def test_insert_and_update_modes_and_table_creation(spark, warehouse, tmp_path, pg):
    p = Pipeline(spark, warehouse, tmp_path)
    p.sync(p.step(ROWS[:2]), pg.destination())  # creates the table with the key as primary key
    assert pg.execute("SELECT data_type FROM information_schema.columns WHERE table_name = %s AND "
                      "column_name = 'id'", (pg.table,)) == [("integer",)]
    pg.execute(f"UPDATE {pg.table} SET name = 'kept' WHERE id = 1")
    pg.execute(f"INSERT INTO {pg.table} VALUES (3, 'preexisting', 'x')")
    changes = p.step([(1, "ANN", "oslo"), (2, "BOB", "lima"), (3, "cid", "rome"), (4, "dan", "kyiv")])
    # insert mode: new keys only, an existing key is kept as it is
    result = p.sync(changes, pg.destination(), mode="insert", commit=False)
    assert result["planned"] == {"insert": 2}
    assert pg.rows() == [(1, "kept", "oslo"), (2, "bob", "lima"), (3, "preexisting", "x"), (4, "dan", "kyiv")]
    # update mode: existing keys only
    pg.execute(f"DELETE FROM {pg.table} WHERE id = 4")
    result = p.sync(changes, pg.destination(), mode="update")
    assert result["planned"] == {"update": 2}
    assert pg.rows() == [(1, "ANN", "oslo"), (2, "BOB", "lima"), (3, "preexisting", "x")]


def test_schema_mismatches_name_the_column(spark, warehouse, tmp_path, pg):
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(ROWS)
    cases = {
        "missing": ("(id int PRIMARY KEY, name text)", "has no column(s) ['city']"),
        "wrong_type": ("(id int PRIMARY KEY, name text, city integer)", "Column 'city'"),
        "no_key": ("(id int, name text, city text)", "no primary key or unique index on exactly ['id']"),
        "required": ("(id int PRIMARY KEY, name text, city text, tier text NOT NULL)", "NOT NULL column(s) ['tier']"),
    }
    for suffix, (ddl, expected) in cases.items():
        table = f"{pg.table}_{suffix}"
        pg.execute(f"CREATE TABLE {table} {ddl}")
        error = p.sync_error(changes, pg.destination(table=table))
        assert error["type"] == "DestinationError" and expected in error["message"], (suffix, error)
        assert pg.execute(f"SELECT count(*) FROM {table}") == [(0,)]
    assert p.committed() is None


def test_bad_records_are_isolated_from_the_bulk_batch_and_rejected(spark, warehouse, tmp_path, pg):
    pg.execute(f"CREATE TABLE {pg.table} (id int PRIMARY KEY, name varchar(5), city text CHECK (city <> 'bad'))")
    rows = [(i, f"n{i}", "bad" if i in (7, 31) else "ok") for i in range(1, 41)] + [(41, "too-long-name", "ok")]
    p = Pipeline(spark, warehouse, tmp_path)
    result = p.sync(p.step(rows), pg.destination(), delivery={"batch_size": 100})
    assert result["stats"]["rejected"] == 3 and result["stats"]["sent"] == 38
    assert pg.execute(f"SELECT count(*) FROM {pg.table}") == [(38,)]
    ledger = {entry["key"]: entry["error"] for entry in p.ledger()}
    assert set(ledger) == {'{"id":7}', '{"id":31}', '{"id":41}'}
    assert "23514" in ledger['{"id":7}'] and "check constraint" in ledger['{"id":7}']
    assert "22001" in ledger['{"id":41}'] and "too long" in ledger['{"id":41}']
    # the destination is fixed; the next run re-sends the three rows though the source did not change
    pg.execute(f"ALTER TABLE {pg.table} DROP CONSTRAINT {pg.table}_city_check, ALTER COLUMN name TYPE text")
    again = p.sync(p.step(rows), pg.destination())
    assert again["resent"] == 3 and again["stats"]["sent"] == 3 and p.ledger() == []
    assert pg.rows() == sorted(rows)


def test_resend_after_a_kill_midway_loses_and_duplicates_nothing(spark, warehouse, tmp_path, pg):
    rows = [(i, f"name-{i}", f"city-{i % 7}") for i in range(2000)]
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(rows)
    count = lambda: pg.execute(f"SELECT count(*) FROM {pg.table}")[0][0] if pg.execute(  # noqa: E731
        "SELECT to_regclass(%s)", (pg.table,))[0][0] else 0
    sync_killed_midway(p, changes, pg.destination(), count, len(rows),
                       delivery={"batch_size": 100, "rate_limit": 400})
    assert p.committed() is None  # the killed run committed nothing
    result = p.sync(changes, pg.destination())
    assert result["committed"] and pg.rows() == rows


def test_a_created_table_takes_its_column_types_from_the_shared_type_map(pg, postgres_server):
    from spark_jobs.sinks.base import SinkConfig
    from spark_jobs.sinks.postgres import PostgresSink

    schema = {"id": "int", "big": "bigint", "flag": "boolean", "ratio": "double", "amount": "decimal(12,3)",
              "raw": "binary", "day": "date", "at": "timestamp", "local_at": "timestamp_ntz", "tags": "array<string>"}
    config = SinkConfig(destination=pg.destination(), key_fields=["id"], fields=list(schema), mode="upsert",
                        secrets={"password": postgres_server.password})
    PostgresSink(config).prepare(schema)
    columns = pg.execute("SELECT column_name, data_type, numeric_precision, numeric_scale "
                         "FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
                         (pg.table,))
    assert [(name, kind) for name, kind, *_ in columns] == [
        ("id", "integer"), ("big", "bigint"), ("flag", "boolean"), ("ratio", "double precision"),
        ("amount", "numeric"), ("raw", "bytea"), ("day", "date"), ("at", "timestamp with time zone"),
        ("local_at", "timestamp without time zone"), ("tags", "jsonb")]
    assert columns[4][2:] == (12, 3)
    assert PostgresSink(config).count() == 0


def test_new_rows_go_straight_into_the_table_and_a_key_it_holds_falls_back_to_the_staged_upsert(pg, postgres_server):
    """Rows new to the source are COPY-ed into the target; a batch holding a key the table already has
    (a resend after a kill) is rolled back and applied by the staged upsert, and that connection stays
    on the staged path. A view (COPY cannot fill one) never takes the direct path."""
    from spark_jobs.sinks.base import ChangeRecord, SinkConfig
    from spark_jobs.sinks.postgres import PostgresSink

    def new_rows(*rows):
        return [ChangeRecord(op="upsert", key={"id": i}, data={"id": i, "name": name}, change="insert",
                             id=f'{{"id":{i}}}') for i, name in rows]

    def sink_for(table):
        config = SinkConfig(destination=pg.destination(table=table), key_fields=["id"], fields=["id", "name"],
                            mode="upsert", secrets={"password": postgres_server.password})
        sink = PostgresSink(config)
        sink.open()
        return sink

    pg.execute(f"CREATE TABLE {pg.table} (id int PRIMARY KEY, name text)")
    sink = sink_for(pg.table)
    try:
        assert sink.write_batch(new_rows((1, "ann"), (2, "bob"))) == [None, None]
        assert sink.copy_new_rows
        assert sink.write_batch(new_rows((2, "bo"), (3, "cid"))) == [None, None]
        assert not sink.copy_new_rows
        assert sink.write_batch(new_rows((4, "dan"))) == [None]
    finally:
        sink.close()
    assert pg.rows() == [(1, "ann"), (2, "bo"), (3, "cid"), (4, "dan")]

    pg.execute(f"CREATE VIEW {pg.table}_view AS SELECT * FROM {pg.table}")
    sink = sink_for(f"{pg.table}_view")
    try:
        assert sink.write_batch(new_rows((1, "ada"), (5, "eve"))) == [None, None]
        assert not sink.copy_new_rows
    finally:
        sink.close()
    assert pg.rows() == [(1, "ada"), (2, "bo"), (3, "cid"), (4, "dan"), (5, "eve")]
    pg.execute(f"DROP VIEW {pg.table}_view")


def test_batches_go_in_binary_where_every_column_takes_it_else_as_csv(spark, pg, postgres_server):
    """Binary COPY is strict about types, so a batch goes binary only where every column takes its
    field in binary: a table the sink creates, or one with wider integers (cast up first) and
    timestamp columns without zone (UTC wall time, as the CSV text gives). A column that needs
    Postgres to convert text (a date into a text column) sends the batch as CSV. Every path, direct
    and staged, loads the same values."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    from spark_jobs.sinks.base import SinkConfig
    from spark_jobs.sinks.batch import ChangeBatch
    from spark_jobs.sinks.postgres import PostgresSink
    from spark_jobs.sinks.postgres_copy import binary_ready

    ddl = ("id INT, big BIGINT, small SMALLINT, flag BOOLEAN, ratio DOUBLE, amount DECIMAL(38,18), name STRING, "
           "raw BINARY, day DATE, at TIMESTAMP, local_at TIMESTAMP_NTZ")
    utc = dt.timezone.utc
    rows = [(1, -2**63, -32768, True, -0.0, Decimal("-99999999999999999999.999999999999999999"), "é'\"\n,",
             b"\x00\xff", dt.date(1, 1, 1), dt.datetime(1, 1, 1, tzinfo=utc), dt.datetime(9999, 12, 31, 23, 59, 59)),
            (2, None, None, None, None, None, None, None, None, None, None),
            (3, 2**63 - 1, 32767, False, 1e300, Decimal("0.000000000000000001"), "", b"",
             dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=utc), dt.datetime(1999, 12, 31))]
    arrow = spark.createDataFrame(rows, ddl).toArrow()
    fields = arrow.column_names
    schema = {f.name: f.dataType.simpleString() for f in spark.createDataFrame([], ddl).schema}

    def batch(change):
        n = arrow.num_rows
        return ChangeBatch(arrow.append_column("_op", pa.array(["upsert"] * n))
                           .append_column("_change", pa.array([change] * n))
                           .append_column("_key", pa.array([f'{{"id":{i}}}' for i in range(n)])), ["id"], fields)

    def deliver(table):
        """Both paths into ``table``: whether they went binary, and the rows stored."""
        config = SinkConfig(destination=pg.destination(table=table), key_fields=["id"], fields=fields, mode="upsert",
                            secrets={"password": postgres_server.password})
        sink = PostgresSink(config)
        sink.prepare(schema)
        sink.open()
        try:
            assert sink.write_batch(batch("insert")) == [None] * 3  # new rows: COPY into the table itself
            assert sink.copy_new_rows
            assert sink.write_batch(batch("update")) == [None] * 3  # staged, then INSERT … ON CONFLICT
            binary = binary_ready(arrow, sink.column_types) is not None
        finally:
            sink.close()
        return binary, [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)  # bytea: a memoryview
                        for row in pg.rows(table=table)]

    columns = ("id {id} PRIMARY KEY, big bigint, small {small}, flag boolean, ratio double precision, amount numeric, "
               "name varchar(40), raw bytea, day {day}, at {at}, local_at timestamp")
    wall_time = [(*row[:9], row[9] and row[9].replace(tzinfo=None), row[10]) for row in rows]
    day_text = [(*row[:8], row[8] and row[8].isoformat(), *row[9:]) for row in rows]
    cases = {  # table suffix -> (its columns, None: the sink creates it), binary?, rows stored
        "created": (None, True, rows),
        "wider": (dict(id="bigint", small="integer", day="date", at="timestamp"), True, wall_time),
        "text_day": (dict(id="integer", small="smallint", day="text", at="timestamptz"), False, day_text),
    }
    for suffix, (kinds, binary, stored) in cases.items():
        table = f"{pg.table}_{suffix}"
        if kinds:
            pg.execute(f"CREATE TABLE {table} ({columns.format(**kinds)})")
        assert deliver(table) == (binary, stored), suffix
