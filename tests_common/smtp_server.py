"""A real SMTP server for the alert tests: aiosmtpd on 127.0.0.1 and a free port, keeping every
message it receives, and the Airflow ``smtp_default`` connection pointing at it (no TLS)."""

from __future__ import annotations

import email
import email.policy
import json
import socket
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Iterator

import pytest

__all__ = ["SmtpServer", "smtp_server"]


@dataclass
class SmtpServer:
    host: str
    port: int
    messages: list[EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd's handler hook
        self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 Message accepted for delivery"

    def airflow_connection(self) -> str:
        return json.dumps({"conn_type": "smtp", "host": self.host, "port": self.port,
                           "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "airflow@example.com",
                                     "retry_limit": 0, "timeout": 10}})

    @staticmethod
    def text(message: EmailMessage) -> str:
        """Every text part of ``message``, decoded."""
        return "\n".join(part.get_content() for part in message.walk() if part.get_content_maintype() == "text")


@pytest.fixture
def smtp_server(monkeypatch) -> Iterator[SmtpServer]:
    """An SMTP server for one test, and ``smtp_default`` pointing at it."""
    from aiosmtpd.controller import Controller

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = SmtpServer("127.0.0.1", port)
    controller = Controller(server, hostname="127.0.0.1", port=port, ready_timeout=30)
    controller.start()
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", server.airflow_connection())
    try:
        yield server
    finally:
        controller.stop()
