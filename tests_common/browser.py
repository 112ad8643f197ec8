"""A real headless Chromium (Debian's ``chromium`` package, installed by ``make test`` through
scripts/install_chromium.sh) for tests that look at a page as a user would: its DOM after the page's
scripts ran, and a screenshot. A browser test run by hand on a machine without it fails naming the
command that installs it (it is never skipped: ``make test`` always has one).

Each call is one ``chromium --headless`` process on a throw-away profile shared by the calls of one
test session, so a cookie a page set (a login) is there for the next page. The flags keep it from
phoning home (no sync, no component updates, no background networking) and let it run as root in a
container (no sandbox, no GPU).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests_common.paths import REPO

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--disable-dev-shm-usage")
#: where tests leave what they produce for a human to look at (screenshots); not committed
TEST_OUTPUT = REPO / ".cache" / "test-output"


@dataclass(frozen=True)
class Chromium:
    binary: str
    profile: Path

    def _run(self, url: str, *args: str, settle_ms: int, timeout: float) -> str:
        # --virtual-time-budget: let the page's scripts and their requests run before the dump/shot
        command = [self.binary, *FLAGS, f"--user-data-dir={self.profile}", f"--virtual-time-budget={settle_ms}",
                   *args, url]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"chromium exited {done.returncode} on {url}: {done.stderr[-2000:]}")
        return done.stdout

    def dom(self, url: str, settle_ms: int = 10_000, timeout: float = 90) -> str:
        """The page's DOM, serialised, once its scripts ran."""
        return self._run(url, "--dump-dom", settle_ms=settle_ms, timeout=timeout)

    def screenshot(self, url: str, path: Path, size: tuple[int, int] = (1400, 1000), settle_ms: int = 10_000,
                   timeout: float = 90) -> Path:
        """A PNG of the page at ``size`` (width, height) in ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._run(url, f"--screenshot={path}", f"--window-size={size[0]},{size[1]}", settle_ms=settle_ms,
                  timeout=timeout)
        if not path.is_file() or path.stat().st_size == 0:
            raise AssertionError(f"chromium wrote no screenshot of {url} to {path}")
        return path


def find_chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        raise RuntimeError("No chromium on PATH, which the browser tests need: run `bash scripts/install_chromium.sh` "
                           "(Debian's chromium package through apt, with root or sudo; `make test` runs it), or "
                           "install Chromium with your system's package manager so that `chromium` is on PATH")
    return binary


@pytest.fixture(scope="session")
def chromium(tmp_path_factory) -> Chromium:
    return Chromium(find_chromium(), tmp_path_factory.mktemp("chromium-profile"))


@pytest.fixture
def test_output(request) -> Path:
    """This test's directory under ``.cache/test-output`` (kept after the run, emptied before it)."""
    path = TEST_OUTPUT / request.node.name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path
