#!/usr/bin/env bash
# Run every cargo-fuzz target for FUZZ_SECONDS (default 30) each.
# cargo-fuzz wants nightly; RUSTC_BOOTSTRAP=1 lets the stable toolchain take
# the -Z flags it passes (sanitizer, coverage), so no nightly is needed.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
seconds="${FUZZ_SECONDS:-30}"
export RUSTC_BOOTSTRAP=1
for target in protocol_decode journal_read config_parse template_render valid_id shell_parse; do
    echo "fuzz: $target for ${seconds}s"
    cargo fuzz run -O "$target" -- -max_total_time="$seconds" -rss_limit_mb=2048
done
