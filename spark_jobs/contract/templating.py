"""The Jinja templates of a REST destination: where a record's values may go into a URL, a body or a
header, and how each place escapes them so that no value can break it.

Templates run in Jinja's immutable sandbox (:class:`jinja2.sandbox.ImmutableSandboxedEnvironment`, the
environment Airflow renders untrusted templates in): a template can read the record it is given and
call the filters below, never an attribute that starts with ``_``, a method that changes a value, or
anything of the process. Undefined names fail (``StrictUndefined``): a misspelt field is an error, not
an empty string sent to the API.

Every ``{{ … }}`` output is escaped for its place, by the environment (``finalize``), so escaping
cannot be forgotten:

* **URL** — each value is percent-encoded whole (``quote(value, safe="")``; a decimal as its exact
  text, ``12.3400``): ``{{ key.email }}`` gives ``ann%40example.com``, a ``/`` or ``?`` in a value
  cannot change the path or the query. A null value is refused (:class:`TemplateValueError`): a URL
  with ``None`` in it would address something else; so is a value that makes a path segment empty,
  ``.`` or ``..`` (:func:`placed_url`), which clients and servers read as another path
  (``/contacts/..`` is ``/``) — percent-encoding a dot does not help, ``%2E`` is a dot to them.
* **body** (JSON) — each value is written as a JSON value: ``"email": {{ data.email }}`` gives
  ``"email": "ann@example.com"`` (quotes, backslashes, control characters and any Unicode escaped as
  JSON requires), a number stays a number (a decimal the exact number Spark wrote, ``12.3400``),
  null is ``null``, a dict or list becomes an object or array. So a body is written *without* quotes
  around ``{{ … }}``; the rendered body is checked to be JSON before it is sent.
* **header** — the value as text; the whole header is refused unless it is visible ASCII with spaces
  or tabs inside only (:func:`header_problem`): a line break would start a new header, a leading
  space or a control character is refused by clients and servers, and anything beyond ASCII reaches
  the API as Latin-1 bytes it reads as something else.

Filters beyond Jinja's own: ``json`` (what the body does anyway, for use inside other expressions),
``compact`` (a dict without its null values: ``{{ data | compact }}``).

``secrets`` is the destination connection's password and extras (``{{ secrets.password }}``,
``{{ secrets.extra.<name> }}``), read on the executors from the environment the job was given: a body
that needs a token takes it from there, so it never travels in the spec or XCom.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import lru_cache
from secrets import token_hex
from typing import Any, Callable, Literal
from urllib.parse import quote, urlsplit

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, meta
from jinja2.exceptions import TemplateAssertionError
from jinja2.sandbox import ImmutableSandboxedEnvironment

Place = Literal["url", "body", "header"]

#: The names a template of one record may use (an operation sent ``per: record``).
RECORD_NAMES = frozenset({"op", "change", "key", "data", "record", "vars", "secrets", "table", "consumer",
                          "version", "idempotency_key"})
#: The names a template of a batch may use (an operation sent ``per: batch``): ``records`` is the
#: list of records, each ``{"op", "change", "key", "data"}``; ``keys`` their keys.
BATCH_NAMES = frozenset({"op", "records", "keys", "vars", "secrets", "table", "consumer", "version",
                         "idempotency_key"})
#: What the URL's escaping puts around each value it places, so that :func:`placed_url` sees the path
#: segments values made (private-use characters: a percent-encoded value never holds one).
VALUE_START, VALUE_END = "\ue000", "\ue001"
#: A header's value as clients and servers take it (RFC 9110 §5.5, without obsolete text): visible
#: ASCII, with spaces and tabs inside only.
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")


class TemplateValueError(ValueError):
    """A value a template cannot place (a null or ``..`` in a URL, a line break in a header): the
    record is rejected with this reason, the rest of the batch goes on."""


#: What a Decimal is while ``json.dumps`` writes a value, before its number replaces it (:func:`_dumps`):
#: text no value holds, as it carries a token drawn when the process started and never written out.
_DECIMAL_MARK = f"aretl-decimal-{token_hex(16)}-"
_MARKED = re.compile(f'"{_DECIMAL_MARK}([0-9]+)"')


def _dumps(value: Any, allow_nan: bool) -> str:
    """``value`` as compact JSON, Unicode as it is, a :class:`~decimal.Decimal` as the JSON number of its
    exact text (``12.3400``, ``1E-18``: what Spark wrote for it), anything else JSON has no type for as
    its text. The standard library writes no Decimal as a number, so each is written as a mark (a
    string) and the mark is replaced by the number afterwards: its C encoder does the rest as it
    always did, and no JSON is written by hand."""
    numbers: list[str] = []

    def default(other: Any) -> Any:
        if not isinstance(other, Decimal):
            return str(other)
        if not (other.is_finite() or allow_nan):
            raise ValueError("a Decimal NaN or infinity")
        numbers.append("NaN" if other.is_nan() else str(other))
        return f"{_DECIMAL_MARK}{len(numbers) - 1}"

    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=default, allow_nan=allow_nan)
    return _MARKED.sub(lambda mark: numbers[int(mark[1])], text) if numbers else text


def to_json(value: Any) -> str:
    """``value`` as compact JSON text, Unicode kept as it is (the body is sent as UTF-8), a decimal as
    its exact number."""
    return _dumps(value, allow_nan=True)


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
    return VALUE_START + quote(str(value), safe="") + VALUE_END


def placed_url(text: str) -> str:
    """A rendered URL template as it is sent: without the marks around its values, or refused when a
    value made a path segment empty, ``.`` or ``..``."""
    for segment in urlsplit(text).path.split("/"):
        if VALUE_START in segment:
            bare = segment.replace(VALUE_START, "").replace(VALUE_END, "")
            if bare in ("", ".", ".."):
                raise TemplateValueError(f"a value placed in the URL makes the path segment {bare!r}"
                                         f"{'' if bare else ' (empty)'}, which a client or server would take "
                                         "for another path")
    return text.replace(VALUE_START, "").replace(VALUE_END, "")


def body_json(value: Any) -> str:
    """``value`` as the JSON of a body; a number JSON cannot carry (NaN, infinite) is refused."""
    try:
        return _dumps(value, allow_nan=False)
    except ValueError:
        raise TemplateValueError("a value placed in the body is NaN or infinite, which JSON cannot carry") from None


def _body_value(value: Any) -> str:
    value = _defined(value)
    return value if isinstance(value, JsonText) else body_json(value)


def _header_value(value: Any) -> str:
    return "" if _defined(value) is None else str(value)


def header_problem(value: str) -> str | None:
    """What makes ``value`` no header value a client or server takes as it is; None when it is one."""
    if _FIELD_VALUE.fullmatch(value):
        return None
    if value != value.strip(" \t"):
        return "begins or ends with a space or a tab"
    char = next(c for c in value if not (" " <= c <= "~" or c == "\t"))
    kind = "a non-ASCII character" if ord(char) > 0x7f else "a control character"
    return f"holds {kind} (U+{ord(char):04X})"


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
