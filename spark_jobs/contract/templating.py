"""The Jinja templates of a REST destination: where a record's values may go into a URL, a body or a
header, and how each place escapes them so that no value can break it.

Templates run in Jinja's immutable sandbox (:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`, the
environment Airflow renders untrusted templates in): a template can read the record it is given and
call the filters below, never an attribute that starts with ``_``, a method that changes a value, or
anything of the process. Undefined names fail (``StrictUndefined``): a misspelt field is an error, not
an empty string sent to the API.

Every ``{{ … }}`` output is escaped for its place, by the environment (``finalize``), so escaping
cannot be forgotten:

* **URL** — each value is percent-encoded whole (``quote(value, safe="")``): ``{{ key.email }}`` gives
  ``ann%40example.com``, a ``/`` or ``?`` in a value cannot change the path or the query. A null value
  is refused (:class:`TemplateValueError`): a URL with ``None`` in it would address something else.
* **body** (JSON) — each value is written as a JSON value: ``"email": {{ data.email }}`` gives
  ``"email": "ann@example.com"`` (quotes, backslashes, control characters and any Unicode escaped as
  JSON requires), a number stays a number, null is ``null``, a dict or list becomes an object or
  array. So a body is written *without* quotes around ``{{ … }}``; the rendered body is checked to
  be JSON before it is sent.
* **header** — the value as text; a line break is refused (it would start a new header).

Filters beyond Jinja's own: ``json`` (what the body does anyway, for use inside other expressions),
``compact`` (a dict without its null values: ``{{ data | compact }}``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable, Literal
from urllib.parse import quote

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, meta
from jinja2.exceptions import TemplateAssertionError
from jinja2.sandbox import ImmutableSandboxedEnvironment

Place = Literal["url", "body", "header"]

#: The names a template of one record may use (an operation sent ``per: record``).
RECORD_NAMES = frozenset({"op", "change", "key", "data", "record", "vars", "table", "consumer", "version",
                          "idempotency_key"})
#: The names a template of a batch may use (an operation sent ``per: batch``): ``records`` is the
#: list of records, each ``{"op", "change", "key", "data"}``; ``keys`` their keys.
BATCH_NAMES = frozenset({"op", "records", "keys", "vars", "table", "consumer", "version", "idempotency_key"})


class TemplateValueError(ValueError):
    """A value a template cannot place (a null in a URL, a line break in a header): the record is
    rejected with this reason, the rest of the batch goes on."""


def to_json(value: Any) -> str:
    """``value`` as compact JSON text, Unicode kept as it is (the body is sent as UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


class JsonText(str):
    """Text that already is JSON (what the ``json`` filter returns): the body writes it as it is."""


def _json_filter(value: Any) -> JsonText:
    return JsonText(to_json(value))


def _compact(value: Any) -> Any:
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


def _defined(value: Any) -> Any:
    if isinstance(value, Undefined):
        value._fail_with_undefined_error()
    return value


def _url_value(value: Any) -> str:
    value = _defined(value)
    if value is None:
        raise TemplateValueError("a value placed in the URL is null")
    if isinstance(value, bool):
        value = "true" if value else "false"
    return quote(str(value), safe="")


def _body_value(value: Any) -> str:
    value = _defined(value)
    return value if isinstance(value, JsonText) else to_json(value)


def _header_value(value: Any) -> str:
    text = "" if _defined(value) is None else str(value)
    if "\r" in text or "\n" in text:
        raise TemplateValueError("a value placed in a header holds a line break")
    return text


_FINALIZE: dict[Place, Callable[[Any], str]] = {"url": _url_value, "body": _body_value, "header": _header_value}


@lru_cache(maxsize=None)
def environment(place: Place) -> ImmutableSandboxedEnvironment:
    """The sandboxed environment of one place (one per process and place)."""
    env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, finalize=_FINALIZE[place],
                                        autoescape=False, keep_trailing_newline=True)
    env.filters["json"] = _json_filter
    env.filters["compact"] = _compact
    return env


@lru_cache(maxsize=1024)
def compiled(source: str, place: Place) -> Any:
    """``source`` compiled for ``place``, once per process: every sink instance of an executor (one
    per sending thread) shares it."""
    return environment(place).from_string(source)


def template_problem(source: str, place: Place, names: frozenset[str]) -> str | None:
    """What is wrong with ``source`` as a template of ``place`` that may use ``names``: a syntax
    error, an unknown filter, a name it is not given; None when it compiles and uses only ``names``.
    (Checked when options are built, so at DAG parse time for a built-in destination.)"""
    env = environment(place)
    try:
        unknown = sorted(meta.find_undeclared_variables(env.parse(source)) - names)
        env.from_string(source)
    except (TemplateSyntaxError, TemplateAssertionError) as exc:
        return f"is not a valid template: {exc.message} (line {exc.lineno})"
    if unknown:
        return f"uses {unknown}, which a template here is not given; it may use {sorted(names)}"
    return None
