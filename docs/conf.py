"""Sphinx configuration of the airflow-reverse-etl documentation (``make docs``; ``make test`` builds it strictly).

Built the way the Airflow provider docs are: Sphinx with autodoc for the operators' parameters, here
with MyST so the pages are Markdown, and the furo theme. The build must work offline and in seconds:
there is no intersphinx (its inventories would be fetched from the network on every build), so
references to Python's, Airflow's and pyspark's own objects are left as plain text (``nitpick_ignore_regex``
below) while every reference to this project's objects and pages must resolve.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "docs" / "_ext"))  # options_table: the options reference from the code

project = "airflow-reverse-etl"
author = "the airflow-reverse-etl authors"
copyright = "2026, the airflow-reverse-etl authors"

# options_table (docs/_ext): option tables rendered from the options' declarations (their doc= lines);
# destinations_catalogue: the destinations' catalogue rendered from their records
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "options_table",
    "destinations_catalogue",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_ext"]
root_doc = "index"

# MyST: ``{ref}`` targets for headings down to level 3 (so a page can link to another page's section as
# ``[text](../guides/backfill-and-rebuild.md#a-date-older-than-the-newest-recorded-one)``), and the
# ``:::`` fence for directives inside Markdown.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# autodoc: importing airflow_reverse_etl never imports pyspark (the import rules of pyproject.toml), so the
# reference pages import the real modules; parameters come from the docstrings' ``:param:`` fields.
# the class line carries __init__'s signature, and its annotations go beside each :param: (not a second list)
autodoc_class_signature = "mixed"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_member_order = "bysource"
# type aliases named in signatures, linked to where they are documented
autodoc_type_aliases = {"RejectsCallback": "airflow_reverse_etl.alerts.RejectsCallback"}
# Airflow's operator metaclass gives every operator a __new__ of its own; the signature that matters is __init__
autodoc_default_options = {"show-inheritance": True, "exclude-members": "__new__"}

# Broken references fail the strict build (``-W -n`` in scripts/docs.sh); what lives outside this project
# (the standard library, Airflow, pyspark, Delta) has no inventory offline, so it is named, not linked.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(typing|collections|datetime|pathlib|enum|dataclasses|abc|contextlib)\..*"),
    (r"py:.*", r"(airflow|pyspark|delta|pendulum|deltalake|fsspec)(\..*)?"),
    (r"py:(class|obj|data)", r"(Any|None|str|int|float|bool|dict|list|tuple|set|bytes|type|object)"),
    (r"py:(class|obj|data)", r"(Sequence|Mapping|Iterator|Iterable|Callable|ClassVar|Literal|Optional|Union)"),
    # Airflow types the signatures name unqualified
    (r"py:class", r"(XComArg|Context|Asset|AssetAlias|TaskGroup)"),
    # the Spark side is not documented by autodoc (it needs pyspark; only the plain-Python contract is
    # imported, by the option tables); its modules are named in text
    (r"py:.*", r"spark_jobs(\..*)?"),
]

html_theme = "furo"
html_title = "airflow-reverse-etl"
html_static_path: list[str] = []
