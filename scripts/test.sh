#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the real MCP servers the
# integration tests drive (pinned in tests/package.json), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d tests/node_modules ] || [ tests/package-lock.json -nt tests/node_modules ]; then
  npm ci --prefix tests --no-audit --no-fund
fi
cargo build --bins
cargo test --all-targets -- "$@"
