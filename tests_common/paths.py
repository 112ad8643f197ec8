"""Where the repository and its fetched jars are, for fixtures and tests that load DAG files or run
the project's scripts."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JARS_DIR = REPO / ".cache" / "jars"
