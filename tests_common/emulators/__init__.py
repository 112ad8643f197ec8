"""Emulators of the SaaS APIs the built-in destinations deliver to, each a real HTTP server on
127.0.0.1 that keeps its objects in memory and refuses what the vendor refuses (design §8: an API
that cannot run here is met through an emulator of its documented contract, itself tested).

One module per vendor — :mod:`.salesforce` (a package), :mod:`.hubspot` (its properties' rules in
:mod:`.hubspot_properties`, its object store in :mod:`.hubspot_objects`), :mod:`.braze` — each naming in its
docstring the documentation every rule follows, with a fixture (``salesforce_api``, ``hubspot_api``,
``braze_api``: a fresh server per test) registered in tests/conftest.py. They are built on the one test server
(:mod:`tests_common.http_server`: routing, the request record, injected faults), its credentials
(:mod:`tests_common.http_auth`) and rate-limit windows (:mod:`tests_common.rate_windows`). Their own tests, which prove
each refusal, are in tests/integration/emulators/.
"""

from typing import Any, Callable


def holds(predicate: Callable[[Any], Any], values: Any) -> bool:
    """Whether a test's rule (a vendor-side validation rule) holds for ``values``; a rule that cannot
    judge them does not."""
    try:
        return bool(predicate(values))
    except Exception:
        return False
