"""The application data of the fleet's pipelines (bench scenario 9): ``ROWS`` customers per pipeline,
a little different each day (1% of the rows updated, 0.5% deleted, 0.5% inserted per date), computed
from the key and the date alone, so the benchmark can check each destination against the last day."""

from __future__ import annotations

ROWS = 2000
COLUMNS = ["customer_id", "name", "email", "city", "tier"]
SCHEMA = "customer_id INT, name STRING, email STRING, city STRING, tier STRING"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")
CITIES = ("Oslo", "Rome", "Kyiv", "Lima", "Pune", "Oran")


def rows_on(pipeline: str, ds: str) -> list[tuple[int, str, str, str, str]]:
    """The pipeline's customers on date ``ds`` (its day number in :data:`DAYS`; later dates keep the
    last day's rows)."""
    day = max((n for n, d in enumerate(DAYS) if d <= ds), default=0)
    salt = sum(map(ord, pipeline))
    out = []
    for key in range(ROWS + day * ROWS // 200):  # 0.5% new keys a day
        if key % 200 == (salt + day) % 200 and day:  # 0.5% deleted a day
            continue
        touched = day if key % 100 < day else 0  # 1% more updated each day
        out.append((key, f"customer {key} v{touched}", f"c{key}@{pipeline}.example", CITIES[(key + salt) % 6],
                    ("gold", "silver", "bronze")[(key + touched) % 3]))
    return out
