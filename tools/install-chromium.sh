#!/usr/bin/env bash
# Installs the headless browser the dashboard's test drives (cmd/dashboard/dashboard.integration.test.ts):
# Debian's `chromium` package, through apt. npm never downloads a browser (playwright-core only
# drives one). A no-op when a browser is there already: $CHROMIUM_PATH, chromium, chromium-browser.
set -euo pipefail

for candidate in "${CHROMIUM_PATH:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  if [[ -n "$candidate" && -x "$candidate" ]]; then
    exit 0
  fi
done

fail() {
  echo "install-chromium: no chromium found and $1; install Debian's chromium package (apt-get install chromium) or set CHROMIUM_PATH to a Chromium binary" >&2
  exit 1
}

command -v apt-get >/dev/null 2>&1 || fail "no apt-get to install it with"
if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "neither root nor passwordless sudo to install it"
fi

started=$SECONDS
echo "install-chromium: installing Debian's chromium for the dashboard's browser test (apt-get, once; about a minute)"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q chromium
[[ -x /usr/bin/chromium ]] || fail "apt-get installed no /usr/bin/chromium"
echo "install-chromium: $(/usr/bin/chromium --version 2>/dev/null | tail -1) installed in $((SECONDS - started)) s"
