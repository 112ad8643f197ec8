"""``destinations-catalogue``: the catalogue of the built-in destinations, rendered from their records
(:mod:`spark_jobs.contract.catalogue`), so the page cannot say anything the records do not.

    ```{destinations-catalogue} summary
    ```

``summary``: what each writes to, its modes, requests and limits, connection types, and its lineage
name (the record's namer applied to its example); ``matching``: how each matches records to what the
destination holds and what a user must know about keys.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from spark_jobs.contract.catalogue import CATALOGUE
from spark_jobs.contract.destination_record import BuiltInDestination


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _lineage(record: BuiltInDestination) -> str:
    named = record.lineage(*record.example)
    return "—" if named is None else f"`{named[0]}`, `{named[1]}`"


def _connections(record: BuiltInDestination) -> str:
    return " or ".join(f"`{name}`" for name in record.connections) or "—"


def summary() -> list[str]:
    lines = ["| type | writes to | modes | per request / limits | connection | lineage (e.g.) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| [`{r.name}`](#{r.name}) | {_cell(r.writes_to)} | {_cell(r.modes)} | {_cell(r.per_request)} | "
              f"{_connections(r)} | {_lineage(r)} |" for r in CATALOGUE]
    return lines


def matching() -> list[str]:
    lines = ["| type | how records are matched, and what to know about keys |", "|---|---|"]
    lines += [f"| [`{r.name}`](#{r.name}) | {_cell(r.matching)} |" for r in CATALOGUE]
    return lines


TABLES = {"summary": summary, "matching": matching}


class DestinationsCatalogue(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        lines = TABLES[self.arguments[0]]()
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="spark_jobs/contract/catalogue.py"), 0, container)
        return list(container.children)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("destinations-catalogue", DestinationsCatalogue)
    return {"parallel_read_safe": True}
