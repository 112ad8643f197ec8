"""``options-table``: a table of a set of options (a :class:`spark_jobs.contract.options.Options`
dataclass) — each option's name, type, default and documentation, read from the class itself, so the
reference cannot drift from what the code checks.

    ```{options-table} spark_jobs.contract.rest.RestOptions
    ```
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _type(hint: Any) -> str:
    text = str(hint).replace("typing.", "")
    for module in ("spark_jobs.contract.rest.", "spark_jobs.contract.destinations.", "spark_jobs.contract.sources."):
        text = text.replace(module, "")
    return text.replace("<class '", "").replace("'>", "")


def _default(field: dataclasses.Field[Any]) -> str | None:
    """The default as Python shows it (None: the option is required)."""
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        return repr(value.to_dict() if hasattr(value, "to_dict") else value)
    return None


def _cell(text: str, code: bool = False) -> nodes.entry:
    paragraph = nodes.paragraph()
    paragraph += nodes.literal(text=text) if code else nodes.Text(text)
    return nodes.entry("", paragraph)


def _row(cells: list[nodes.entry]) -> nodes.row:
    row = nodes.row()
    row.extend(cells)
    return row


class OptionsTable(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module, _, name = self.arguments[0].rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        hints = typing.get_type_hints(cls)
        group = nodes.tgroup(cols=4)
        group.extend(nodes.colspec(colwidth=width) for width in (18, 22, 20, 40))
        head = nodes.thead()
        head += _row([_cell(title) for title in ("option", "type", "default", "what it is")])
        body = nodes.tbody()
        for field in dataclasses.fields(cls):
            default = _default(field)
            body += _row([_cell(field.name, code=True), _cell(_type(hints[field.name]), code=True),
                          _cell(default, code=True) if default is not None else _cell("required"),
                          _cell(" ".join(str(field.metadata.get("doc") or "").split()))])
        group += head
        group += body
        table = nodes.table(classes=["options-table"])
        table += group
        return [table]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("options-table", OptionsTable)
    return {"parallel_read_safe": True}
