#!/usr/bin/env bash
# Daisy's main job: build, install what is missing, and write the test report.
#   DIR=/path   where the pools live (default /dev/shm: DRAM emulating NVM, as in seed 000)
#   OUT=/path   where the report goes (default ./daisy-report)
# Extra arguments go to `daisy report` (for example --quick or --full).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cargo build --release --locked -p daisy-cli
# Built separately: it enables the library's simulator hooks, which the daisy binary must not have.
cargo build --release --locked -p daisy-powerfail
exec ./target/release/daisy report --dir "${DIR:-/dev/shm}" --out "${OUT:-daisy-report}" "$@"
