"""Sinks follow the snapshot's schema (spark_jobs.sinks.schema): a column the snapshot gains is added to
a Postgres, SQLite or Delta destination when ``schema_evolution="add_columns"`` allows it, and fails
the sync naming it otherwise; a type change is refused naming the column and both types."""

import sqlite3

from tests_common.jobs import job, write_parquet
from tests_common.pipeline import Pipeline

ROWS = [(1, "ann", "oslo"), (2, "bob", "lima")]
WIDER = [(1, "ann", "oslo", "gold"), (2, "bob", "lima", None), (3, "cy", "rome", "silver")]


def evolve(p: Pipeline, rows: list[tuple], schema: str) -> None:
    """Record the next day's source, which has a new column, with schema evolution on."""
    write_parquet(p.spark, p.source, rows, schema)
    p.steps += 1
    job(p.spark, "snapshot", p.warehouse, name=p.name, primary_key=p.key, allow_schema_evolution=True,
        source={"format": "parquet", "path": p.source}, logical_date=f"2026-01-0{p.steps}T00:00:00+00:00",
        run_id=f"evolve-{p.steps}")


def test_a_new_snapshot_column_reaches_every_table_sink(spark, warehouse, tmp_path, pg):
    p = Pipeline(spark, warehouse, tmp_path, consumer="pg")
    lite = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers"}
    lake = {"type": "delta", "path": str(tmp_path / "published"), "schema_evolution": "add_columns"}
    pg_dest = pg.destination(schema_evolution="add_columns")
    p.sync(p.step(ROWS), pg_dest)
    p.sync(p.diff("lite"), lite)
    p.sync(p.diff("lake"), lake)

    evolve(p, WIDER, "id INT, name STRING, city STRING, tier STRING")
    refused = p.sync_error(p.diff("lite"), lite)
    assert refused["type"] == "DestinationError"
    assert "SQLite table customers has no column(s) ['tier']" in refused["message"]
    assert "schema_evolution='add_columns'" in refused["message"]

    p.sync(p.diff("lite"), {**lite, "schema_evolution": "add_columns"})
    p.sync(p.diff("pg"), pg_dest)
    p.sync(p.diff("lake"), lake)
    assert pg.rows() == WIDER
    assert pg.execute(f"SELECT data_type FROM information_schema.columns WHERE table_name = '{pg.table}' "
                      "AND column_name = 'tier'") == [("text",)]
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        assert conn.execute("SELECT * FROM customers ORDER BY id").fetchall() == WIDER
    published = spark.read.format("delta").load(lake["path"])
    assert [tuple(r) for r in published.orderBy("id").collect()] == WIDER


def test_a_type_change_is_refused_naming_the_column_and_both_types(spark, warehouse, tmp_path):
    p = Pipeline(spark, warehouse, tmp_path)
    changes = p.step(ROWS)
    with sqlite3.connect(tmp_path / "crm.db") as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city INTEGER)")
    lite = {"type": "sqlite", "database": str(tmp_path / "crm.db"), "table": "customers",
            "schema_evolution": "add_columns"}
    error = p.sync_error(changes, lite)
    assert "Column 'city' of SQLite table customers is integer, which cannot take the change set's string" \
        in error["message"]
    spark.createDataFrame([(0, "x", 1)], "id INT, name STRING, city INT").write.format("delta").save(
        str(tmp_path / "published"))
    error = p.sync_error(changes, {"type": "delta", "path": str(tmp_path / "published")})
    assert "Column 'city' of the delta table at" in error["message"] and "is int, which cannot take" in error["message"]
    assert p.committed() is None
