"""Emulators of the SaaS APIs the built-in destinations deliver to, each a real HTTP server on
127.0.0.1 that keeps its objects in memory and refuses what the vendor refuses (design §8: an API
that cannot run here is met through an emulator of its documented contract, itself tested).

One module per vendor — :mod:`.salesforce`, :mod:`.hubspot`, :mod:`.braze` — each naming in its
docstring the documentation every rule follows, with a fixture (``salesforce_api``, ``hubspot_api``,
``braze_api``: a fresh server per test) registered in tests/conftest.py; :mod:`.server` holds what
they share (routing, recording, injected faults, rate-limit windows). Their own tests, which prove
each refusal, are in tests/integration/emulators/.
"""
