"""Secrets a job reads from its driver's environment.

An operator puts a connection's password and extras (tokens, SASL settings) into environment
variables of the Spark process only; the spec names the variables (``secrets_env: {name: ENV_VAR}``),
never the values, so no spec file, argv, XCom, log or table holds them; and what the job writes or
raises is redacted of them (:mod:`spark_jobs.redaction`).
"""

from __future__ import annotations

import os

from spark_jobs import redaction
from spark_jobs.errors import ConfigError


def read_secrets(secrets_env: dict[str, str] | None, whose: str) -> dict[str, str]:
    """``{name: value}`` for each secret ``secrets_env`` names; ``whose`` ("destination", "kafka
    source") says in the error which part of the spec expected a variable that is not set."""
    secrets = {}
    for name, env in (secrets_env or {}).items():
        if env not in os.environ:
            raise ConfigError(f"The {whose} secret {name!r} is expected in the environment variable {env}, "
                              "which is not set in the Spark driver")
        secrets[name] = os.environ[env]
        redaction.remember(secrets[name])
    return secrets
