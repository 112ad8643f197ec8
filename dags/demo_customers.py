"""The demo application's customers table, day by day: the data of the example pipelines
(``reverse_etl_demo``, ``saas_destinations``), kept in one module beside them so that each syncs the
same customers. Not a DAG file (``.airflowignore`` says so); the DAG files import it, as Airflow puts
the DAG folder on the import path.

Day 1 has five customers; day 2 upgrades one, moves one, adds one and deletes one; day 3 changes an
email, adds one and deletes another.
"""

from __future__ import annotations

import csv
import os

COLUMNS = ["customer_id", "name", "email", "city", "tier"]
SCHEMA = "customer_id INT, name STRING, email STRING, city STRING, tier STRING"

DAY_1 = {
    1: ("Ada Lovelace", "ada@example.com", "London", "gold"),
    2: ("Alan Turing", "alan@example.com", "Manchester", "silver"),
    3: ("Grace Hopper", "grace@example.com", "New York", "gold"),
    4: ("Edsger Dijkstra", "edsger@example.com", "Eindhoven", "bronze"),
    5: ("Barbara Liskov", "barbara@example.com", "Boston", "silver"),
}
DAY_2 = {**{k: v for k, v in DAY_1.items() if k != 5},
         2: ("Alan Turing", "alan@example.com", "Manchester", "gold"),
         4: ("Edsger Dijkstra", "edsger@example.com", "Austin", "bronze"),
         6: ("Donald Knuth", "don@example.com", "Stanford", "silver")}
DAY_3 = {**{k: v for k, v in DAY_2.items() if k != 3},
         1: ("Ada Lovelace", "ada.lovelace@example.com", "London", "gold"),
         7: ("Margaret Hamilton", "margaret@example.com", "Boston", "gold")}
SOURCE_BY_DAY = {"2026-01-01": DAY_1, "2026-01-02": DAY_2, "2026-01-03": DAY_3}


def customers_on(ds: str | None, pipeline: str = "reverse_etl_demo") -> dict:
    """The demo application's customers as they are on ``ds``: the newest day of its data up to then.
    A date before its first day (or a run without a logical date) has no data: say which dates do,
    and how to run ``pipeline`` for one of them."""
    known = [d for d in SOURCE_BY_DAY if ds is not None and d <= ds]
    if not known:
        raise ValueError(f"The demo's application has data for {', '.join(SOURCE_BY_DAY)} (and keeps the last "
                         f"day's afterwards), none for logical date {ds}: trigger or backfill the DAG for one "
                         f"of those dates, e.g. airflow dags trigger {pipeline} --logical-date "
                         f"{min(SOURCE_BY_DAY)}T00:00:00+00:00")
    return SOURCE_BY_DAY[max(known)]


def write_extract(ds: str | None, path: str, pipeline: str = "reverse_etl_demo") -> str:
    """Write the customers table as it looks on ``ds`` to the CSV file ``path`` (the application's extract)."""
    rows = customers_on(ds, pipeline)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        writer.writerows((key, *values) for key, values in sorted(rows.items()))
    return path
