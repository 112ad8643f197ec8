"""Searching everything a run left behind for a secret: the texts of its logs, XComs and spec files,
every file of the warehouse, and the rows of every Delta table (read back: Parquet pages may be
compressed, so a secret in a row need not appear in the file's bytes)."""

from __future__ import annotations

from pathlib import Path


def warehouse_places(spark, warehouse: str | Path) -> dict[str, str]:
    """{place: text} for every file under ``warehouse`` and the rows of every Delta table in it."""
    places = {str(path): path.read_bytes().decode("latin-1") for path in Path(warehouse).rglob("*") if path.is_file()}
    for table_dir in {p.parent for p in Path(warehouse).rglob("_delta_log")}:
        rows = spark.read.format("delta").load(str(table_dir)).toJSON().collect()
        places[f"rows of {table_dir}"] = "\n".join(rows)
    return places


def assert_nowhere(secrets, places: dict[str, str]) -> None:
    for secret in secrets:
        leaks = [place for place, text in places.items() if secret in text]
        assert not leaks, f"secret found in {leaks}"


def encodings(secret: str, login: str | None = None) -> set[str]:
    """``secret`` in each form it takes on the wire (issue 43): as it is, percent-encoded (a path or query
    value: ``+ / =`` as ``%2B %2F %3D``, a space as ``%20`` or ``+``), JSON-escaped, and — with a
    ``login`` — as basic auth's base64 of ``login:secret``."""
    import base64
    import json
    from urllib.parse import quote, quote_plus

    forms = {secret, quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1],
             json.dumps(secret, ensure_ascii=False)[1:-1]}
    if login is not None:
        forms.add(base64.b64encode(f"{login}:{secret}".encode()).decode())
    return forms
