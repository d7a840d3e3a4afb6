#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what the tests need (the
# real MCP servers pinned in tests/package.json, and Debian's chromium for the
# HTML-report test), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d tests/node_modules ] || [ tests/package-lock.json -nt tests/node_modules ]; then
  npm ci --prefix tests --no-audit --no-fund
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # Quiet when it works; the whole apt output when it does not, so a
    # person sees why chromium did not install.
    log=$(mktemp)
    if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >"$log" 2>&1 \
      || { apt-get update >>"$log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >>"$log" 2>&1; }; }; then
      cat "$log" >&2
      echo "installing chromium with apt-get failed (output above)" >&2
      rm -f "$log"
      exit 1
    fi
    rm -f "$log"
  else
    echo "chromium is missing: install it (sudo apt-get install chromium) and run again" >&2
    exit 1
  fi
fi
# The site fixtures and the TLS test make self-signed certificates with the
# openssl CLI.
if ! command -v openssl >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssl >/dev/null 2>&1 \
      || { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssl; }
  else
    echo "openssl is missing: install it (sudo apt-get install openssl) and run again" >&2
    exit 1
  fi
fi
# Most integration tests wait on a hub, a server or a browser rather than
# use a core: four at a time on this 2-core machine takes `it` from ~300 s
# to ~180 s, every test still passing (issue 42.6). RUST_TEST_THREADS set by
# the caller wins.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
# --workspace: the test server (testserver/, a package of its own) builds and
# runs its unit tests beside the hub's, in the same dependency build.
cargo test --workspace --all-targets -- "$@"
