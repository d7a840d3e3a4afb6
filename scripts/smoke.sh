#!/usr/bin/env bash
# The README's first command, run the way a new user types it on a fresh
# clone: `cargo run --release` with the shipped config.json must pick the hub
# binary, start, listen, and serve its built-in tools. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -- --version
log=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
cargo run --release >"$log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q "listening on ws://127.0.0.1:8765/ws" "$log" && break
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "smoke: \`cargo run --release\` exited before listening:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 1
done
grep -q "listening on" "$log" || { echo "smoke: no \`listening on\` within 600 s" >&2; cat "$log" >&2; exit 1; }
health=$(curl -fsS -H "Authorization: Bearer $(cat state/token)" http://127.0.0.1:8765/health)
node -e '
const h = JSON.parse(process.argv[1]);
if (h.status !== "ok" || !(h.toolCount >= 4)) { console.error("smoke: /health is not ok with built-in tools:", process.argv[1]); process.exit(1); }
' "$health"
kill -TERM "$pid"
wait "$pid" || { echo "smoke: the hub did not stop cleanly on SIGTERM" >&2; cat "$log" >&2; exit 1; }
echo "smoke: \`cargo run --release\` starts, listens and stops cleanly"
