#!/usr/bin/env bash
# Daisy's main job: build, install what is missing, and write the test report.
#   DIR=/path   where the pools live (default /dev/shm: DRAM emulating NVM, as in seed 000)
#   OUT=/path   where the report goes (default ./daisy-report)
# Extra arguments go to `daisy report` (for example --quick, --full or --allow-perf-fail).
# The report is written and its scoreboard printed whatever the verdicts; the exit status is
# `daisy report`'s: 0, 1 when a functional test failed, 3 when a performance verdict is FAIL.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cargo build --release --locked -p daisy-cli
# libdaisy.so beside the daisy binary: the report runs the transaction cases through the C API
# too (issue 23's targets; NOT RUN without it).
cargo build --release --locked -p daisy-c
# Built separately: it enables the library's simulator hooks, which the daisy binary must not have.
cargo build --release --locked -p daisy-powerfail
out="${OUT:-daisy-report}"
status=0
./target/release/daisy report --dir "${DIR:-/dev/shm}" --out "$out" "$@" || status=$?
if [ -f "$out/report.html" ]; then
    echo "the report: $out/report.html (and $out/report.md)"
fi
if [ "$status" = 3 ]; then
    echo "exit status 3: a performance verdict is FAIL (the scoreboard says which; --allow-perf-fail exits 0)"
fi
exit "$status"
