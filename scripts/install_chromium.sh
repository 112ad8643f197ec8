#!/usr/bin/env bash
# Headless Chromium for the browser tests (tests_common/browser.py) and the UI screenshot
# (scripts/ui_screenshot.sh): Debian's `chromium` package, installed only when it is missing. Called by
# `make test` (scripts/test.sh) and `make ui-screenshot`, never by `make setup` or `make demo`.
# Playwright-style browser downloads are not used: the distribution's package is what CI can install.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_chromium: no /usr/bin/chromium and no apt-get: install Chromium with your system's package manager" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install_chromium: installing chromium needs root (or sudo)" >&2; exit 1; }
  sudo=(sudo)
fi
echo "bootstrap: installing chromium (Debian package) for the browser tests"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium >/dev/null
