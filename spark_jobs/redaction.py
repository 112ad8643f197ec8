"""Secrets out of everything a job writes or raises: one redaction, for every form a secret takes on the wire.

A secret enters a job process in two ways: read from the environment (a connection's password and
extras, :mod:`spark_jobs.env_secrets` and every sink built from them, on the driver and on each
executor) or fetched (an OAuth2 token). Each is :func:`remember` ed here, in every form a request may
carry it and an API may quote it back: as it is, percent-encoded (``+ / =`` as ``%2B %2F %3D``, a space
as ``%20`` or ``+``, either case of hex), JSON-escaped (once, or twice when an API quotes a JSON body
inside its JSON answer), as Python writes it inside quotes, and base64 — of itself, and of
``login:secret``, basic auth's header. The Airflow side masks the same forms in the task log
(:func:`wire_forms`).

:func:`redact` replaces each of them with ``***``; it is applied where a job's outputs leave it, and
only there:

* the job's result (the task's XCom and ``result.json``) and its error: :func:`spark_jobs.entry.run`;
* every row of every system table (the reject ledger's reasons, the run history's errors):
  :func:`spark_jobs.state.system_tables.rows_of`;
* every log line while a job runs (:func:`redacting_logs`), and an executor's own log handler;
* what leaves an executor — its outcome rows and its exceptions, the only place a token it fetched
  is known: :func:`spark_jobs.sinks.core.deliver_partition`.

A process keeps the :data:`KEPT` secrets it learnt last (a Spark worker lives on across syncs); a
secret shorter than :data:`MIN_SECRET` is not kept (it would blank ordinary words).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import re
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import quote, quote_plus

#: Shortest secret that is redacted.
MIN_SECRET = 4
#: Secrets a process keeps, the most recently learnt ones.
KEPT = 128
#: Extras that configure a request or say where a connection points, never a credential (Airflow's
#: HttpHook settings, addresses): their values are not secrets.
PUBLIC_EXTRAS = frozenset({"auth_type", "verify", "timeout", "proxies", "cert", "stream", "allow_redirects",
                           "max_redirects", "trust_env", "check_response", "instance_url", "domain",
                           "bootstrap.servers", "security.protocol", "sasl.mechanism", "version"})
MASK = "***"


class _Known:
    """What this process knows: each secret's wire forms (the most recently learnt last), the pattern
    of all of them (None: to compile again), and how many blocks redact the logs now."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.secrets: OrderedDict[str, frozenset[str]] = OrderedDict()
        self.pattern: re.Pattern[str] | None = None
        self.redacting_logs = 0


_KNOWN = _Known()


def _encoded(text: str) -> set[str]:
    """``text`` as a URL, a JSON string and a Python string literal carry it."""
    percent = {quote(text, safe=""), quote(text), quote_plus(text)}
    percent |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), p) for p in percent}
    escaped = {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1], repr(text)[1:-1]}
    return {text} | percent | escaped | {json.dumps(e)[1:-1] for e in escaped}


def wire_forms(secret: str, login: str | None = None) -> set[str]:
    """Every form of ``secret`` the module docstring lists (with ``login``: basic auth's too)."""
    bases = {secret, base64.b64encode(secret.encode()).decode()}
    if login is not None:  # basic auth: UTF-8, or Latin-1 as requests encodes it
        for charset in ("utf-8", "latin-1"):
            try:
                bases.add(base64.b64encode(f"{login}:{secret}".encode(charset)).decode())
            except UnicodeEncodeError:
                pass
    return {form for base in bases for form in _encoded(base) if len(form) >= MIN_SECRET}


def secret_values(value: Any) -> list[str]:
    """The secrets in a connection's password or extras: the text itself, or — for extras, JSON — each
    string in it but those of :data:`PUBLIC_EXTRAS`."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return [value]
        return [value, *secret_values(parsed)] if isinstance(parsed, (dict, list)) else [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() if k not in PUBLIC_EXTRAS for s in secret_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in secret_values(v)]
    return []


def remember(*values: Any, login: str | None = None) -> None:
    """Redact ``values`` (:func:`secret_values` of each) from now on, in every wire form."""
    found = [s for value in values for s in secret_values(value) if len(s) >= MIN_SECRET]
    with _KNOWN.lock:
        for secret in found:
            known = _KNOWN.secrets.pop(secret, frozenset())
            forms = known | frozenset(wire_forms(secret, login))
            _KNOWN.secrets[secret] = forms  # the most recent last
            if forms != known:
                _KNOWN.pattern = None
        while len(_KNOWN.secrets) > KEPT:
            _KNOWN.secrets.popitem(last=False)
            _KNOWN.pattern = None


def _compiled() -> re.Pattern[str] | None:
    """One pattern of every form (a trie of their characters: matching costs the text's length, not the
    number of forms)."""
    with _KNOWN.lock:
        if _KNOWN.pattern is None and _KNOWN.secrets:
            trie: dict[str, Any] = {}
            for form in {f for forms in _KNOWN.secrets.values() for f in forms}:
                node = trie
                for char in form:
                    node = node.setdefault(char, {})
                node[""] = {}
            _KNOWN.pattern = re.compile(_trie_pattern(trie))
        return _KNOWN.pattern


def _trie_pattern(node: dict[str, Any]) -> str:
    """A regular expression of a trie; at a form's end, a longer form is preferred (greedy ``?``)."""
    branches = [re.escape(char) + _trie_pattern(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:
        return f"(?:{body})?"
    return body


def redact(text: str) -> str:
    """``text`` with every form of every remembered secret replaced by ``***``."""
    pattern = _compiled()
    return pattern.sub(MASK, text) if pattern is not None and text else text


def excerpt(text: str, limit: int) -> str:
    """The start of ``text`` (an API's answer, an exception's message), at most ``limit`` characters,
    redacted *before* it is cut: a secret cut in half would no longer be found."""
    return redact(text)[:limit]


def redacted(value: Any) -> Any:
    """``value`` with :func:`redact` applied to every string in it (dicts, lists, tuples, their keys)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redacted(k): redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redacted(v) for v in value)
    return value


def redacted_error(exc: BaseException) -> BaseException:
    """``exc`` itself when its message holds no secret, else a copy of it (same class and attributes)
    whose message is redacted — raised ``from None``, so the original is not printed with it."""
    if redact(str(exc)) == str(exc):
        return exc
    clean = copy.copy(exc)
    clean.args = tuple(redacted(a) for a in exc.args)
    if redact(str(clean)) != str(clean):  # a class that builds its message otherwise
        return RuntimeError(f"{type(exc).__name__}: {redact(str(exc))}")
    return clean


class RedactingFilter(logging.Filter):
    """A log handler's filter that redacts each record's message (its arguments merged in first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if redact(message) != message:
            record.msg, record.args = redact(message), None
        if record.exc_info and record.exc_info[1] is not None:
            trace = logging.Formatter().formatException(record.exc_info)
            if redact(trace) != trace:  # the traceback goes into the message, redacted
                record.msg, record.args = f"{record.getMessage()}\n{redact(trace)}", None
                record.exc_info, record.exc_text = None, None
        return True


FILTER = RedactingFilter()


@contextmanager
def redacting_logs() -> Iterator[None]:
    """Redact what every handler of the root logger writes for the block: a job's run, a partition's
    delivery (blocks may nest and overlap, in threads: the filter stays until the last one ends)."""
    with _KNOWN.lock:
        _KNOWN.redacting_logs += 1
        for handler in logging.getLogger().handlers:
            if FILTER not in handler.filters:
                handler.addFilter(FILTER)
    try:
        yield
    finally:
        with _KNOWN.lock:
            _KNOWN.redacting_logs -= 1
            if not _KNOWN.redacting_logs:
                for handler in logging.getLogger().handlers:
                    handler.removeFilter(FILTER)
