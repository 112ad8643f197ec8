"""Option tables rendered from the code, so an option is documented in one place: its declaration.

Every set of options is a dataclass declared with ``option(default, check, doc=...)``
(:mod:`spark_jobs.contract.options`); these directives read the fields and render one table each —
option, type, default and the ``doc=`` line — where a page used to repeat them by hand::

    ```{options} spark_jobs.contract.destinations.DeliveryPolicy
    ```

    ```{destination-options}
    ```

``destination-options`` renders every built-in destination's options
(:data:`spark_jobs.contract.destinations.BUILT_IN`), one table per sink under its name, so a sink
added there is on the page without an edit. An option without a ``doc=`` line is a warning, which the
strict build (``scripts/docs.sh --strict``) turns into an error.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import import_module
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from spark_jobs.contract.options import REQUIRED

HEADER = ("option", "type", "default", "meaning")


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default_factory is not dataclasses.MISSING:
        return json.dumps(field.default_factory())
    if field.default is REQUIRED:
        return "required"
    return json.dumps(field.default)


def _row(cells: list[nodes.Node]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += nodes.paragraph("", "", cell)
        row += entry
    return row


class OptionsTable(SphinxDirective):
    """``options <module.Class>``: the table of one set of options."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module, _, name = self.arguments[0].rpartition(".")
        return [self.table(getattr(import_module(module), name))]

    def table(self, options: type) -> nodes.table:
        fields = dataclasses.fields(options)
        group = nodes.tgroup(cols=len(HEADER))
        group += [nodes.colspec(colwidth=width) for width in (2, 2, 2, 6)]
        head = nodes.thead()
        head += _row([nodes.Text(title) for title in HEADER])
        body = nodes.tbody()
        for field in fields:
            doc = field.metadata.get("doc", "")
            if not doc:
                self.reporter.warning(f"{options.__qualname__}.{field.name} has no doc= line", line=self.lineno)
            body += _row([nodes.literal(text=field.name), nodes.literal(text=str(field.type)),
                          nodes.literal(text=_default(field)), nodes.Text(doc)])
        group += [head, body]
        table = nodes.table(classes=["options-table"])
        table += group
        return table


class DestinationOptions(OptionsTable):
    """``destination-options``: every built-in destination's options, one table per sink."""

    required_arguments = 0

    def run(self) -> list[nodes.Node]:
        from spark_jobs.contract.destinations import BUILT_IN

        rendered: list[nodes.Node] = []
        for sink, options in BUILT_IN.items():
            rendered += [nodes.rubric("", "", nodes.literal(text=sink), nodes.Text(" destination")),
                         self.table(options)]
        return rendered


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("options", OptionsTable)
    app.add_directive("destination-options", DestinationOptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
