"""Benchmark data: a source of N rows with 16 columns and a mutation of it, as Parquet, made by DuckDB.

Every value is arithmetic on the row id and the seed (no random generator), so the same N, rates and
seed give byte-identical data on any machine and any DuckDB version. Which rows a mutation updates
or deletes is decided the same way, by a multiplicative hash of the id.
"""

from __future__ import annotations

from dataclasses import dataclass

COLUMNS = [
    "id", "account_id", "name", "email", "city", "country", "tier", "status", "score", "balance",
    "quantity", "discount", "is_active", "created_at", "updated_at", "note",
]


def _row_sql(id_expr: str, seed: int, version: int) -> str:
    """SELECT list of one generated row for id ``id_expr``; ``version`` varies the mutable columns."""
    h = f"(({id_expr} * 2654435761 + {seed}) % 1000003)"
    return f"""
        {id_expr} AS id,
        ({h} % 50000)::BIGINT AS account_id,
        'name-' || {h} AS name,
        'user' || {id_expr} || '@example.com' AS email,
        (['London', 'Paris', 'Berlin', 'Madrid', 'Rome', 'Oslo', 'Lisbon', 'Vienna'])[({h} % 8) + 1] AS city,
        (['GB', 'FR', 'DE', 'ES', 'IT', 'NO', 'PT', 'AT'])[({h} % 8) + 1] AS country,
        (['bronze', 'silver', 'gold', 'platinum'])[(({h} + {version}) % 4) + 1] AS tier,
        (['active', 'dormant', 'churned'])[(({h} + {version}) % 3) + 1] AS status,
        (({h} % 10000) / 100.0 + {version})::DOUBLE AS score,
        ((({h} * 7) % 100000000) / 100.0 + {version})::DECIMAL(18, 2) AS balance,
        (({h} % 500) + {version})::INTEGER AS quantity,
        (({h} % 30) / 100.0)::DOUBLE AS discount,
        ({h} % 5 <> 0) AS is_active,
        TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_seconds(({h} % 31536000)::BIGINT) AS created_at,
        TIMESTAMPTZ '2025-01-01 00:00:00+00' + to_seconds((({h} % 86400) + {version} * 86400)::BIGINT) AS updated_at,
        CASE WHEN {h} % 3 = 0 THEN NULL ELSE 'note ' || ({h} % 997) END AS note
    """


@dataclass(frozen=True)
class Mutation:
    """Fractions of the rows to update, insert (as new ids) and delete."""

    update: float = 0.01
    insert: float = 0.005
    delete: float = 0.005


def _pick(id_expr: str, seed: int) -> str:
    """A deterministic number in [0, 1) per id, for choosing the rows a mutation touches."""
    return f"((({id_expr} * 40503 + {seed} * 7919) % 1000000) / 1000000.0)"


def connect(threads: int = 2):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET preserve_insertion_order = false")
    return con


def generate(con, rows: int, path: str, seed: int = 42) -> None:
    """Version 1 of the source: ids 1..rows."""
    con.execute(f"COPY (SELECT {_row_sql('i', seed, 0)} FROM range(1, {rows + 1}) t(i)) "
                f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 122880)")


def mutate(con, base: str, rows: int, path: str, mutation: Mutation, seed: int = 42,
           changes_path: str | None = None) -> dict[str, int]:
    """Version 2: update/delete the picked fractions of ``base``, add new ids after ``rows``.

    With ``changes_path`` also write the changed rows alone (upserts, and deleted ids with
    ``_deleted``) for applying the mutation to a Delta table. Returns the intended counts.
    """
    pick = _pick("id", seed)
    upd, dele = mutation.update, mutation.update + mutation.delete
    inserts = int(rows * mutation.insert)
    changed = f"""
        SELECT {_row_sql('id', seed, 1)}, {pick} >= {upd} AS _deleted FROM read_parquet('{base}')
        WHERE {pick} < {dele}
        UNION ALL
        SELECT {_row_sql('i', seed, 0)}, false AS _deleted FROM range({rows + 1}, {rows + inserts + 1}) t(i)
    """
    con.execute(f"""COPY (
        SELECT * FROM read_parquet('{base}') WHERE {pick} >= {dele}
        UNION ALL
        SELECT * EXCLUDE (_deleted) FROM ({changed}) WHERE NOT _deleted
    ) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 122880)""")
    if changes_path:
        con.execute(f"COPY ({changed}) TO '{changes_path}' (FORMAT parquet)")
    counts = con.execute(f"""SELECT count(*) FILTER (WHERE {pick} < {upd}),
                                    count(*) FILTER (WHERE {pick} >= {upd} AND {pick} < {dele})
                             FROM read_parquet('{base}')""").fetchone()
    return {"update": counts[0], "insert": inserts, "delete": counts[1]}
