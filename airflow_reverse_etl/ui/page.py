"""The view as one self-contained HTML page (styles inline, charts as SVG, no script), small enough
to render on every request and to read in the Airflow UI's frame."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from typing import Any

from airflow_reverse_etl.ui.chart import COLOURS, stacked_bars
from airflow_reverse_etl.ui.summary import FAILED, OPERATIONS, OUTCOMES, Sync

#: error texts are cut to this many characters in tables; the whole text is the cell's tooltip
ERROR_CHARS = 240

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px 20px;color:#212529;font-size:14px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}h3{font-size:15px;margin:0}
.meta,.empty{color:#6c757d}.cards{display:flex;flex-wrap:wrap;gap:14px}
.card{border:1px solid #dee2e6;border-radius:8px;padding:12px 14px;min-width:320px}
.dest{color:#495057;font-family:ui-monospace,monospace;font-size:13px}
.figures{margin:6px 0;display:flex;gap:14px;flex-wrap:wrap}.figures b{font-size:15px}
.legend span{margin-right:12px}.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
.chart .tick{font-size:10px;fill:#6c757d}.chart .failed{font-size:12px}
table{border-collapse:collapse;margin-top:6px;font-size:13px}
th,td{border-bottom:1px solid #e9ecef;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f8f9fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status-failed,.status-refused,.status-too_many_rejects,.error{color:#c92a2a}.status-success,.status-already_delivered{color:#2b8a3e}
code{font-size:12px}
"""


def _text(value: Any) -> str:
    """A value as the page shows it: timestamps to the second, in UTC."""
    if isinstance(value, datetime):
        if value.tzinfo:
            value = value.astimezone(timezone.utc)
        shown: str = value.strftime("%Y-%m-%d %H:%M:%S UTC")
        return shown
    return "" if value is None else str(value)


def _cell(value: Any, cls: str = "") -> str:
    text = _text(value)
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{escape(text)}</td>"


def _error_cell(error: str | None, span: int = 1) -> str:
    text = error or ""
    shown = text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + "…"
    return f'<td class="error" colspan="{span}" title="{escape(text)}">{escape(shown)}</td>'


def _legend() -> str:
    items = "".join(f'<span><i class="swatch" style="background:{COLOURS[name]}"></i>{name}</span>'
                    for name in OPERATIONS + OUTCOMES)
    return f'<p class="legend">{items}<span>&#x2716; a run failed that day</span></p>'


def _recent_runs(sync: Sync) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("logical date", "status", *OPERATIONS, *OUTCOMES, "versions", "seconds"))
    rows = []
    for run in sync.recent_runs:
        status = str(run.get("status") or "")
        versions = f"{_text(run.get('from_version')) or '–'} → {_text(run.get('to_version'))}"
        rows.append("<tr>" + _cell(run.get("logical_date") or run.get("started_at"))
                    + _cell(status + (" (dry run)" if run.get("dry_run") else ""), f"status-{status}")
                    + "".join(_cell(run.get(c) or 0, "num") for c in OPERATIONS + OUTCOMES)
                    + _cell(versions) + _cell(run.get("duration_s"), "num") + "</tr>")
        if status in FAILED and run.get("error"):
            rows.append(f'<tr><td></td>{_error_cell(str(run["error"]), span=7)}</tr>')
    return f'<table class="runs"><tr>{head}</tr>{"".join(rows)}</table>'


def _card(sync: Sync) -> str:
    last = sync.last_run or {}
    figures = "".join(f"<span>{name} <b>{sync.totals[name]}</b></span>" for name in OPERATIONS + OUTCOMES)
    return (
        f'<section class="card sync" data-table="{escape(sync.table)}" data-consumer="{escape(sync.consumer)}">'
        f'<h3>{escape(sync.table)} → <span class="consumer">{escape(sync.consumer)}</span></h3>'
        f'<div class="dest">{escape(sync.destination)}</div>'
        f'<div class="figures"><span>runs <b>{sync.runs}</b></span><span>failed <b>{sync.failed}</b></span>'
        f'{figures}<span>pending rejects <b>{sync.pending_rejects}</b></span></div>'
        f'<div class="meta">last run: {escape(str(last.get("status")))} at {escape(_text(last.get("finished_at")))}'
        f'{f", {sync.dry_runs} dry run(s)" if sync.dry_runs else ""}</div>'
        f"{stacked_bars(sync.days)}"
        f"<details open><summary>latest runs</summary>{_recent_runs(sync)}</details>"
        "</section>"
    )


def _rejects(rejects: list[dict[str, Any]]) -> str:
    if not rejects:
        return '<p class="empty">No pending rejects.</p>'
    head = "".join(f"<th>{h}</th>" for h in ("table", "consumer", "sink", "key", "operation", "error", "attempts",
                                             "version", "first seen", "last seen"))
    rows = "".join(
        "<tr>" + _cell(r["table"]) + _cell(r["consumer"]) + _cell(r["sink"])
        + f"<td><code>{escape(str(r['key']))}</code></td>"
        + _cell(r["op"]) + _error_cell(r["error"]) + _cell(r["attempts"], "num") + _cell(r["version"], "num")
        + _cell(r["first_seen"]) + _cell(r["last_seen"]) + "</tr>"
        for r in rejects)
    return f'<table class="rejects"><tr>{head}</tr>{rows}</table>'


def render(warehouse: str, syncs: list[Sync], rejects: list[dict[str, Any]]) -> str:
    """The whole page for the warehouse at ``warehouse``."""
    cards = "".join(map(_card, syncs)) or '<p class="empty">No sync has run in this warehouse yet.</p>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Reverse ETL syncs</title><style>{STYLE}</style></head><body>"
        "<h1>Reverse ETL syncs</h1>"
        f'<div class="meta">warehouse <code>{escape(warehouse)}</code> · counts per logical day of what reached '
        "each destination and what it refused</div>"
        f"<h2>Syncs per consumer and destination</h2>{_legend()}<div class=\"cards\">{cards}</div>"
        f'<h2>Pending rejects <span class="meta">({len(rejects)})</span></h2>{_rejects(rejects)}'
        "</body></html>"
    )
