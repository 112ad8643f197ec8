"""The ``options-table`` directive: a table of a set of options (one of the frozen dataclasses of
``spark_jobs/contract/options.py``) — each option's name, default and documentation — read from the
class itself, so the destination catalogue cannot drift from what the code checks::

    ```{options-table} spark_jobs.contract.destinations.SqliteOptions
    ```

The contract is plain Python (no pyspark), so the docs build imports it.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return repr(field.default_factory())  # type: ignore[misc]
    return "required"


def _row(cells: list[nodes.Node]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += nodes.paragraph("", "", cell)
        row += entry
    return row


class OptionsTable(Directive):
    required_arguments = 1
    has_content = False

    def run(self) -> list[nodes.Node]:
        module, _, name = self.arguments[0].rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        table = nodes.table()
        group = nodes.tgroup(cols=3)
        table += group
        for width in (20, 20, 60):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += _row([nodes.Text("option"), nodes.Text("default"), nodes.Text("what it is")])
        group += head
        body = nodes.tbody()
        for field in dataclasses.fields(cls):
            default = _default(field)
            body += _row([nodes.literal(text=field.name),
                          nodes.emphasis(text=default) if default == "required" else nodes.literal(text=default),
                          nodes.Text(field.metadata.get("doc", ""))])
        group += body
        return [table]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("options-table", OptionsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
