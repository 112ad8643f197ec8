"""The set-up scripts (issue 37 §6): ``make demo`` needs no root, so the set-up it shares with
``make test`` installs no system package; the browser the UI tests need is installed by ``make test``."""

from __future__ import annotations

import re

from tests_common.paths import REPO


def _makefile_target(name: str) -> str:
    makefile = (REPO / "Makefile").read_text()
    return re.search(rf"^{name}:.*\n((?:\t.*\n)*)", makefile, re.MULTILINE).group(0)


def test_the_demo_installs_no_system_package():
    for script in ("scripts/bootstrap.sh", "scripts/demo.sh", "scripts/fetch_jars.sh"):
        text = (REPO / script).read_text()
        commands = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert not [line for line in commands if re.search(r"install_chromium|apt-get|\bsudo\b", line)], script
    assert "bootstrap.sh" in _makefile_target("setup") and "demo.sh" in _makefile_target("demo")


def test_make_test_installs_the_browser_before_the_tests():
    text = (REPO / "scripts/test.sh").read_text()
    assert text.index("scripts/install_chromium.sh") < text.index("python -m pytest")
